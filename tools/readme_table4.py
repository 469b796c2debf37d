"""The README's Table 4 grid from results/table4/scores.csv: MAE held-out · in-group per domain, ▲ / ▼ where the
Holm verdict says better / worse than grpo, † where no per-state estimates were kept (no test), - where the
estimator was not scored on that domain. Paste its output over the README's table.

    python tools/readme_table4.py [results/table4/scores.csv]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

DOMAINS = ("number", "math", "science", "general", "programming")
ROWS = ("grpo", "mcs-1", "mcs-2", "mcs-3", "mcs-4", "numca", "hista", "shear", "pacs", "numca-sveb", "hista-sveb",
        "shear-sveb", "hidden-align", "ppo-1", "pacs-sveb", "probe", "probe-mc", "ppo-n")
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


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    print("\n".join(table(Path(args[0]) if args else Path("results/table4/scores.csv"))))


if __name__ == "__main__":
    main()
