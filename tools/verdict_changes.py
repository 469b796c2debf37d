"""Which verdicts changed between two Table 4 score files (issue 56's closing list).

Per (domain, estimator, protocol) present in both: the old and new verdict, MAE and Holm p, for every row whose
verdict differs; rows only in one file are listed apart. Markdown on stdout.

    python tools/verdict_changes.py OLD/scores.csv NEW/scores.csv [--domains number,general]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

Key = tuple[str, str, str]


NEEDED = ("domain", "estimator", "protocol", "verdict")


def load(path: Path) -> dict[Key, dict]:
    """A scores.csv by (domain, estimator, protocol); a missing file or column is a one-line SystemExit."""
    try:
        with open(path, encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise SystemExit(f"{path}: cannot read ({e.strerror})") from None
    missing = [c for c in NEEDED if rows and c not in rows[0]]
    if missing:
        raise SystemExit(f"{path}: not a Table 4 scores.csv (no column {', '.join(missing)})")
    return {(r["domain"], r["estimator"], r["protocol"]): r for r in rows}


def verdict(row: dict) -> str:
    """grpo is the reference row (no test); a row without per-state estimates was not tested."""
    if row["estimator"] == "grpo":
        return "reference"
    return row.get("verdict") or "untested"


def changes(old: dict[Key, dict], new: dict[Key, dict], domains: set[str] | None = None):
    """(changed, only_old, only_new): changed holds (key, old row, new row) whose verdicts differ."""
    keep = (lambda k: domains is None or k[0] in domains)  # noqa: E731
    both = sorted(k for k in old.keys() & new.keys() if keep(k))
    changed = [(k, old[k], new[k]) for k in both if verdict(old[k]) != verdict(new[k])]
    return (changed, sorted(k for k in old.keys() - new.keys() if keep(k)),
            sorted(k for k in new.keys() - old.keys() if keep(k)))


def _num(row: dict, col: str, fmt: str) -> str:
    v = row.get(col) or ""
    return f"{float(v):{fmt}}" if v else ""


def render(changed, only_old, only_new) -> list[str]:
    out = ["| domain | estimator | protocol | verdict before → now | MAE before → now | Holm p before → now |",
           "|:--|:--|:--|:--|--:|--:|"]
    for (d, e, p), a, b in changed:
        out.append(f"| {d} | {e} | {p} | {verdict(a)} → {verdict(b)} | {_num(a, 'mae', '.3f')} → "
                   f"{_num(b, 'mae', '.3f')} | {_num(a, 'p_holm', '.3g')} → {_num(b, 'p_holm', '.3g')} |")
    for label, keys in (("only before", only_old), ("only now", only_new)):
        if keys:
            out += ["", f"{label}: " + ", ".join(f"{e} ({d}, {p})" for d, e, p in keys)]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--domains", default="", help="comma-separated; default every domain")
    a = ap.parse_args(argv)
    doms = {d for d in a.domains.split(",") if d} or None
    print("\n".join(render(*changes(load(a.old), load(a.new), doms))))


if __name__ == "__main__":
    main()
