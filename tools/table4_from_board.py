"""Table 4's per-state estimates for a domain's extra seeds, taken from a board's bundles instead of scoring again:
for every export of DOMAIN under EXPORTS other than seed 0's, each bundle scored on that export's build whose
estimator reading (name and params_fp) is one Table 4 already carries on the domain's seed 0 goes into
ESTIMATES under the table's name for it. Number's seeds 1 and 2 are the powered run's, scored there:

    python tools/table4_from_board.py results/powered/board number
    python benchmarks/table4.py --from-exports

A bundle whose reading the table does not carry on seed 0 is left out (the pooled cell would cover other
states than its seed-0 part); the script prints what it took and what it left.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sveb import store  # noqa: E402
from sveb.experiment.table4_files import domain_exports, merge_estimates, read_estimates, seed_of, write_estimates  # noqa: E402


def readings(records: list[dict], domain: str, build_fp: str) -> dict[tuple[str, str], str]:
    """(bundle name, params_fp) -> the table's estimator name, for the readings the table carries on a build. A
    renamed reading (hista before 2026-11-25 is hista-sveb) is stored under its bundle's old name."""
    out = {}
    for r in records:
        if r["domain"] == domain and r["build_fp"] == build_fp:
            out[(r["estimator"], r["params_fp"])] = r["estimator"]
            out[(r["estimator"].removesuffix("-sveb"), r["params_fp"])] = r["estimator"]
    return out


def from_board(board: Path, domain: str, exports: Path, records: list[dict]) -> tuple[list[dict], list[str]]:
    """The records the board's bundles give for DOMAIN's extra seeds, and a line per bundle left out."""
    names = domain_exports(exports, domain)
    if not names or seed_of(names[0]) != 0:
        raise SystemExit(f"{exports}: no seed-0 export of {domain}")
    seed0 = store.read_manifest(exports / names[0])["build_fp"]
    want = readings(records, domain, seed0)
    extra = {store.read_manifest(exports / n)["build_fp"]: n for n in names[1:]}
    new, left = [], []
    for meta in sorted(board.glob("bundles/*/bundle.json")):
        b = json.loads(meta.read_text())
        fp, e = b["build"]["build_fp"], b["estimator"]
        if fp not in extra:
            continue
        name = want.get((e["name"], e["params_fp"]))
        if name is None:
            left.append(f"{meta.parent.name}: {e['name']} {e['params_fp']} on {extra[fp]} (not on seed 0)")
            continue
        rel = meta.parent.relative_to(ROOT) if meta.parent.is_relative_to(ROOT) else meta.parent
        prov = f"board bundle {rel}" + (f" (the reading registered as {name} since)" if name != e["name"] else "")
        for r in pq.read_table(meta.parent / "estimates.parquet").to_pylist():
            new.append({"domain": domain, "build_fp": fp, "state_id": r["state_id"], "estimator": name,
                        "params_fp": e["params_fp"], "protocol": r["protocol"], "value": r["value"],
                        "provenance": prov})
    return new, left


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("board", type=Path)
    p.add_argument("domain")
    p.add_argument("--exports", type=Path, default=ROOT / "results/table4/exports")
    p.add_argument("--estimates", type=Path, default=ROOT / "results/table4/estimates.parquet")
    a = p.parse_args(argv)
    records = read_estimates(a.estimates)
    new, left = from_board(a.board, a.domain, a.exports, records)
    write_estimates(a.estimates, merge_estimates(records, new))
    cells = sorted({(r["estimator"], r["build_fp"]) for r in new})
    print(f"{len(new)} per-state estimates of {len(cells)} (reading, build) cells into {a.estimates}")
    for line in left:
        print(f"left out: {line}")


if __name__ == "__main__":
    main()
