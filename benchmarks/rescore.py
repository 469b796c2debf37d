"""Recompute a results folder's tables from its committed exports, without sampling or running an estimator:
the estimates are stored per state in each export, and every table recomputes its statistics from them
(`sveb.pooling.rescore`). Writes RESULTS/leaderboard.csv and RESULTS/report/; with --board also recomputes
RESULTS/board's rows from its accepted bundles (`sveb.board.rebuild`) and rewrites its page RESULTS/site.

    python benchmarks/rescore.py results/powered --board
    python benchmarks/rescore.py results/powered-confirm

The exports are linked (read-only) into a temporary root at their builds' places; nothing in them changes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path


def link_root(exports: list[Path], root: Path) -> Path:
    """ROOT/<model>/<domain>/<build_fp> -> each export folder (absolute symlinks)."""
    for e in exports:
        m = json.loads((e / "manifest.json").read_text())
        place = root / m["model"] / m["domain"] / m["build_fp"]
        place.parent.mkdir(parents=True, exist_ok=True)
        place.symlink_to(e.resolve(), target_is_directory=True)
    return root


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a results folder holding exports/")
    ap.add_argument("--board", action="store_true", help="also rebuild RESULTS/board and RESULTS/site")
    a = ap.parse_args(argv)
    from sveb import leaderboard
    from sveb.report import write_report
    exports = sorted(p for p in (a.results / "exports").iterdir() if (p / "manifest.json").exists())
    with tempfile.TemporaryDirectory() as tmp:
        root = link_root(exports, Path(tmp) / "root")
        rows = leaderboard.rows(root)
        print(leaderboard.write_csv(rows, a.results / "leaderboard.csv"), f"({len(rows)} rows)")
        print(write_report(root, a.results / "report"))
    if a.board:
        from sveb.board import rebuild
        from sveb.site import write_site
        print(f"{a.results / 'board'}: {len(rebuild(a.results / 'board'))} rows")
        print(write_site(a.results / "board", a.results / "site"))


if __name__ == "__main__":
    main()
