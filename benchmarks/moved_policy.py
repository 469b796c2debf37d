"""How estimators follow a policy that moved (issue 59): per state, ΔV = V_new − V_old between two builds of the same
states, and each estimator's estimate of it (its value on NEW minus its value on OLD), by sveb.score.moved.

    python benchmarks/moved_policy.py OLD NEW [OLD NEW ...] [--protocol held-out] [--estimates FILE ...] [--json OUT]
                                      [--save-estimates FILE]

OLD: a build or export (e.g. results/table4/exports/number); NEW: its states' references under the other
policy (`sveb rereference --states-from OLD`), or another re-reference of the same source. Several pairs (Table 4's
seed builds and their re-references) are pooled into one set of states; the slope's clusters stay problems, so a
problem two seeds share counts once. ΔV comes from the first
n_ref draws of each build's references (paired draw by draw: a re-reference seeds draw j as its source did).
Estimates: what `sveb eval` stored in each build (or in a read-only build's mirror), and the rows of any --estimates
file (Table 4's results/table4/estimates.parquet) whose build_fp is the build's, averaged over trainings.
Prints ΔV's summary (its spread, the reference noise, the share of states that moved by 2 SE) and per estimator:
MAE and debiased squared error of its ΔV estimate, and the slope of its estimate on ΔV (the share it tracks), raw
and corrected for the reference noise, with a standard error clustered by problem.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sveb import store
from sveb.core import schema
from sveb.score.moved import compare
from sveb.store.builds import content_hash_of, results_view


def references(bdir: Path) -> dict[str, list[float]]:
    rows = store.read_table(bdir / "references", schema.REFERENCES).to_pylist()
    return {r["state_id"]: list(r["mc_rewards"])[:r["n_ref"]] for r in rows}


KEEP = ("build_fp", "state_id", "estimator", "params_fp", "protocol", "value")


def stored(bdir: Path, build_fp: str) -> list[dict]:
    """What `sveb eval` stored in a build (or its read-only mirror), each row tagged with the build's fingerprint."""
    view = Path(results_view(store.Build(bdir), create=False))
    if not any((view / "estimates").glob("part-*")):
        return []
    return [{**{k: r[k] for k in KEEP if k in r}, "build_fp": build_fp}
            for r in store.read_table(view / "estimates").to_pylist()]


def estimates(bdir: Path, build_fp: str, protocol: str, files: list[Path]) -> dict[tuple[str, str], dict[str, float]]:
    """(estimator, params_fp) -> state_id -> value (the mean over trainings), for one protocol."""
    rows = stored(bdir, build_fp)
    for f in files:
        table = store.read_table(Path(f)) if Path(f).is_dir() else store.read_shard(Path(f))  # a folder or one file
        rows += [r for r in table.to_pylist() if r.get("build_fp") == build_fp]
    acc: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        if r["protocol"] == protocol:
            acc.setdefault((r["estimator"], r["params_fp"]), {}).setdefault(r["state_id"], []).append(r["value"])
    return {k: {s: float(np.mean(v)) for s, v in d.items()} for k, d in acc.items()}


def named(old: dict, new: dict) -> tuple[dict, dict]:
    """Keys shown by estimator name, with the parameters' fingerprint where one name has several settings."""
    keys = set(old) | set(new)
    many = {n for n, _ in keys if sum(1 for m, _ in keys if m == n) > 1}
    label = {k: f"{k[0]}[{k[1][:6]}]" if k[0] in many else k[0] for k in keys}
    return {label[k]: v for k, v in old.items()}, {label[k]: v for k, v in new.items()}


def read_pair(old: Path, new: Path, protocol: str, files: list[Path]) -> tuple[dict, dict, dict, dict, dict]:
    """One OLD NEW pair: both builds' references, their estimates (named) and each state's problem."""
    mo, mn = store.load_manifest(old), store.load_manifest(new)
    src = (mn.states_from or {}).get("content_hash")
    if src not in (content_hash_of(old), (mo.states_from or {}).get("content_hash")):
        raise SystemExit(f"{new}: not a re-reference of {old} (`sveb rereference --states-from OLD`) nor "
                         f"of its source; its states would be another build's")
    problem_of = {s["state_id"]: s["problem_id"] for s in store.read_table(old / "states", schema.STATES).to_pylist()}
    eo, en = named(estimates(old, mo.build_fp, protocol, files), estimates(new, mn.build_fp, protocol, files))
    return references(old), references(new), eo, en, problem_of


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("builds", type=Path, nargs="+", metavar="OLD NEW")
    p.add_argument("--protocol", default="held-out")
    p.add_argument("--estimates", type=Path, action="append", default=[],
                   help="A Parquet file of estimates with a build_fp column (repeatable)")
    p.add_argument("--json", type=Path, help="Also write the result here")
    p.add_argument("--save-estimates", type=Path, metavar="FILE",
                   help="Also write the estimates stored in the builds (all protocols) to one Parquet file, so that "
                        "the result can be redone from exports with --estimates FILE")
    args = p.parse_args(argv)
    if len(args.builds) % 2:
        raise SystemExit(f"{len(args.builds)} builds given: pass them in pairs, OLD NEW [OLD NEW ...]")
    pairs = list(zip(args.builds[::2], args.builds[1::2]))
    refs_o, refs_n, est_o, est_n, problem_of = {}, {}, {}, {}, {}
    for i, (old, new) in enumerate(pairs):
        tag = f"{i}/" if len(pairs) > 1 else ""  # state ids kept apart per pair; problems are not (clusters)
        ro, rn, eo, en, pr = read_pair(old, new, args.protocol, args.estimates)
        refs_o |= {tag + k: v for k, v in ro.items()}
        refs_n |= {tag + k: v for k, v in rn.items()}
        problem_of |= {tag + k: v for k, v in pr.items()}
        for acc, got in ((est_o, eo), (est_n, en)):
            for name, d in got.items():
                acc.setdefault(name, {}).update({tag + k: v for k, v in d.items()})
    r = compare(refs_o, refs_n, est_o, est_n, problem_of)
    r["pairs"] = [[str(o), str(n)] for o, n in pairs]
    mo, mn = store.load_manifest(pairs[0][0]), store.load_manifest(pairs[0][1])
    st = r["states"]
    where = ", ".join(f"{o} -> {n}" for o, n in pairs)
    print(f"OLD {mo.model} -> NEW {mn.model} ({where}), protocol {args.protocol}")
    print(f"{st['n']} states ({st['unmatched']} unmatched): ΔV mean {st['dv_mean']:+.4f} "
          f"± {st['dv_mean_se']:.4f} SE, sd {st['dv_sd']:.4f}; reference noise (mean SE²) {st['noise_var']:.4f}, "
          f"reliability {st['reliability']:.2f}; {st['moved']:.0%} of states moved by more than 2 SE")
    print(f"{'estimator':<16} {'n':>5} {'MAE':>7} {'sq err-noise':>12} {'slope':>7} {'± SE':>6} {'corrected':>9}")
    for e in sorted(r["estimators"], key=lambda e: -e["slope"] if np.isfinite(e["slope"]) else np.inf):
        print(f"{e['estimator']:<16} {e['n']:>5} {e['mae']:>7.4f} {e['mse_debiased']:>12.4f} {e['slope']:>7.3f} "
              f"{e['slope_se']:>6.3f} {e['slope_corrected']:>9.3f}")
    if not r["estimators"]:
        print("no estimator has estimates on both builds: run `sveb eval -e NAME --build DIR` on each")
    if args.json:
        args.json.write_text(json.dumps(r, indent=2))
    if args.save_estimates:
        rows = [x for o, n in pairs for b in (o, n) for x in stored(b, store.load_manifest(b).build_fp)]
        table = pa.Table.from_pylist(rows, schema=pa.schema([(k, pa.float64() if k == "value" else pa.string())
                                                              for k in KEEP]))
        tmp = args.save_estimates.with_name(args.save_estimates.name + ".tmp")
        pq.write_table(table, tmp)
        tmp.replace(args.save_estimates)
        print(f"{table.num_rows} stored estimates -> {args.save_estimates}")
    return r


if __name__ == "__main__":
    main()
