"""Recompute a results folder's tables from its committed exports, without sampling or running an estimator:
the estimates are stored per state in each export, and every table recomputes its statistics from them
(`sveb.score.pooling.rescore`). Writes RESULTS/leaderboard.csv and RESULTS/report/; with --board also recomputes
RESULTS/board's rows from its accepted bundles (`sveb.board.rebuild`) and rewrites its page RESULTS/site.

    python benchmarks/rescore.py results/table4-like-folder
    python benchmarks/rescore.py results/powered --from-board --board

The exports are linked (read-only) into a temporary root at their builds' places; nothing in them changes.
An export's estimates/ and scores/ are not committed (.gitignore): `--from-board` takes every estimate from
the committed bundles of RESULTS/board instead (one estimates shard per bundle), so a fresh clone recomputes
the same tables.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path


def link_root(exports: list[Path], root: Path, tables_only: bool = False) -> dict[str, Path]:
    """ROOT/<model>/<domain>/<build_fp> -> each export folder (absolute symlinks; `tables_only`: a folder of
    links to its manifest and tables, without its local estimates and scores). Returns content hash -> place."""
    from sveb.store import CONTENT_TABLES
    out = {}
    for e in exports:
        m = json.loads((e / "manifest.json").read_text())
        place = root / m["model"] / m["domain"] / m["build_fp"]
        place.parent.mkdir(parents=True, exist_ok=True)
        if tables_only:
            place.mkdir()
            for name in ("manifest.json", *CONTENT_TABLES, "screens"):
                if (e / name).exists():
                    (place / name).symlink_to((e / name).resolve())
        else:
            place.symlink_to(e.resolve(), target_is_directory=True)
        out[(m.get("export") or {}).get("content_hash") or m.get("content_hash")] = place
    return out


def estimates_from_board(board: Path, places: dict[str, Path]) -> int:
    """Each accepted bundle's per-state estimates as the build's estimates shard, with the identity of its score
    row (the statistics are recomputed by every table from the estimates). Returns the bundles written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sveb import store
    from sveb.core import schema
    n = 0
    problem_of: dict[Path, dict[str, str]] = {}
    for b in sorted((board / "bundles").iterdir()):
        meta = json.loads((b / "bundle.json").read_text())
        place = places.get(meta["build"]["content_hash"])
        if place is None:
            continue
        e = meta["estimator"]
        pj = json.dumps(e["params"], sort_keys=True)
        t = pq.read_table(b / "estimates.parquet").to_pylist()
        if place not in problem_of:  # state -> problem, read once per build
            problem_of[place] = {s["state_id"]: s["problem_id"]
                                 for s in store.read_table(place / "states", schema.STATES).to_pylist()}
        states = problem_of[place]
        for proto in sorted({r["protocol"] for r in t}):
            key = f"{e['name']}-{e['params_fp']}-{proto}"
            rows = [{"state_id": r["state_id"], "problem_id": states[r["state_id"]], "estimator": e["name"],
                     "params_fp": e["params_fp"], "params": pj, "protocol": proto, "value": r["value"],
                     "own_shift": r["own_shift"]} for r in t if r["protocol"] == proto]
            store.write_shard(store.shard_path(place / "estimates", key),
                              pa.Table.from_pylist(rows, schema=schema.ESTIMATES), "from-board")
            score = {c: None for c in schema.SCORES.names}
            score.update(model=meta["build"]["model"], domain=meta["build"]["domain"],
                         build_fp=meta["build"]["build_fp"], estimator=e["name"], params_fp=e["params_fp"], params=pj,
                         protocol=proto, seconds=(meta.get("cost") or {}).get(proto, {}).get("seconds"))
            store.write_shard(store.shard_path(place / "scores", key),
                              pa.Table.from_pylist([score], schema=schema.SCORES), "from-board")
        n += 1
    return n


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, help="a results folder holding exports/")
    ap.add_argument("--board", action="store_true", help="also rebuild RESULTS/board and RESULTS/site")
    ap.add_argument("--from-board", action="store_true", help="estimates from RESULTS/board's bundles, not the "
                    "exports' local (uncommitted) estimates")
    a = ap.parse_args(argv)
    from sveb.present import leaderboard
    from sveb.present.report import write_report
    a.results = a.results.resolve()
    exports = sorted(p for p in (a.results / "exports").iterdir() if (p / "manifest.json").exists())
    home = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the root is `root`, relative: the report names it, and a temp path is no one's to keep
        try:
            root = Path("root")
            places = link_root(exports, root, tables_only=a.from_board)
            if a.from_board:
                print(f"{estimates_from_board(a.results / 'board', places)} bundles from {a.results / 'board'}")
            rows = leaderboard.rows(root)
            print(leaderboard.write_csv(rows, a.results / "leaderboard.csv"), f"({len(rows)} rows)")
            print(write_report(root, a.results / "report"))
        finally:
            os.chdir(home)
    if a.board:
        from sveb.board import rebuild
        from sveb.present.site import write_site
        print(f"{a.results / 'board'}: {len(rebuild(a.results / 'board'))} rows")
        print(write_site(a.results / "board", a.results / "site"))


if __name__ == "__main__":
    main()
