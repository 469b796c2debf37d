"""Tables made from results/table4/scores.csv, one source for every page that shows them:

- the grid (docs/results.md): MAE held-out · in-group per domain, ▲ / ▼ where the Holm verdict says better /
  worse than grpo, † where no per-state estimates were kept (no test), - where not scored on that domain;
- the headline (README.md, `--headline`): one domain's held-out column, MAE, Δ, Holm p, verdict, k_eq, Spearman.
Paste the output over the page's table; tests/test_docs.py fails when a page differs from it.

    python tools/readme_table4.py [--headline] [results/table4/scores.csv]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

DOMAINS = ("number", "math", "science", "general", "programming")
ROWS = ("grpo", "mcs-1", "mcs-2", "mcs-3", "mcs-4", "numca", "hista", "shear", "pacs", "numca-sveb", "hista-sveb",
        "shear-sveb", "hidden-align", "ppo-1", "pacs-sveb", "probe", "probe-mc", "ppo-n",
        # issue 58's signals, each in a Holm family of its own kind: after the main rows
        "mcs-eb-1", "mcs-eb-2", "mcs-eb-3", "mcs-eb-4", "mcs-cv-1", "mcs-cv-2", "mcs-cv-3", "mcs-cv-4",
        "judge", "judge-cal", "prm", "logprob", "entropy", "intrinsic")
MARK = {"better": "▲", "worse": "▼"}


def cell(row: dict | None) -> str:
    return "-" if row is None else f"{float(row['mae']):.3f}{MARK.get(row['verdict'], '')}"


def untested(*rows: dict | None) -> bool:
    return all(r is not None and r["estimates"] != "per state" and r["estimator"] != "grpo" for r in rows)


def table(path: Path) -> list[str]:
    by = {(r["domain"], r["estimator"], r["protocol"]): r for r in csv.DictReader(open(path, encoding="utf-8"))}
    names = [n for n in ROWS if any(k[1] == n for k in by)] + sorted({k[1] for k in by} - set(ROWS))
    out = ["| held-out · in-group | " + " | ".join(DOMAINS) + " |", "|---|" + "---:|" * len(DOMAINS)]
    for n in names:
        cells = []
        for d in DOMAINS:
            h, i = by.get((d, n, "held-out")), by.get((d, n, "in-group"))
            dagger = "† " if untested(h, i) else ""  # before both values: the whole cell is untested
            cells.append("-" if h is None and i is None else f"{dagger}{cell(h)} · {cell(i)}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return out


def _ci(row: dict, key: str, fmt: str) -> str:
    lo, hi = row.get(f"{key}_ci_low", ""), row.get(f"{key}_ci_high", "")
    if lo and hi:
        return f"{float(row[key]):{fmt}} [{float(lo):{fmt}}, {float(hi):{fmt}}]"
    return f"{float(row[key]):{fmt}}"


def _keq(row: dict) -> str:
    k, lo, hi = (float(row.get(c) or "nan") for c in ("k_eq", "k_eq_ci_low", "k_eq_ci_high"))
    if k != k:
        return ""
    show = (lambda x: "∞" if x == float("inf") else f"{x:.1f}")  # noqa: E731
    return f"{show(k)} [{show(lo)}, {show(hi)}]" if lo == lo and hi == hi else show(k)


def _p(x: str) -> str:
    return "" if not x else ("<0.001" if float(x) < 0.001 else f"{float(x):.3f}")


def headline(path: Path, domain: str = "number", protocol: str = "held-out") -> list[str]:
    """One domain's column of Table 4 as the README's headline table (rows in ROWS order, grpo first)."""
    by = {r["estimator"]: r for r in csv.DictReader(open(path, encoding="utf-8"))
          if r["domain"] == domain and r["protocol"] == protocol}
    names = [n for n in ROWS if n in by] + sorted(set(by) - set(ROWS))
    out = ["| estimator | MAE [95% CI] | Δ sq err vs grpo [95% CI] | Holm p | verdict | worth k rollouts | Spearman |",
           "|:--|--:|--:|--:|:--|--:|--:|"]
    for n in names:
        r = by[n]
        delta = _ci(r, "delta_sq", "+.4f") if r.get("delta_sq") else ""
        mark = "† " if r.get("estimates") != "per state" and n != "grpo" else ""
        sp = f"{float(r['spearman']):.2f}" if r.get("spearman") else ""
        out.append(f"| {n} | {mark}{_ci(r, 'mae', '.3f')} | {delta} | {_p(r.get('p_holm', ''))} | "
                   f"{r.get('verdict', '')} | {_keq(r)} | {sp} |")
    return out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    head = "--headline" in args
    args = [a for a in args if a != "--headline"]
    path = Path(args[0]) if args else Path("results/table4/scores.csv")
    print("\n".join(headline(path) if head else table(path)))


if __name__ == "__main__":
    main()
