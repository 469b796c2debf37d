"""The probe's learning curve: held-out MAE and the paired difference of squared error vs grpo against the
number of training rows (prefixes in the outcome regime, states in the Monte-Carlo regime).

    python benchmarks/probe_curve.py --train <train build dir> --build <benchmark build dir>
        [--sizes 100 300 1000 0] [--regimes probe probe-mc] [-P relative=1 ...]
    python benchmarks/probe_curve.py --scripted-setup /tmp/curve   # a tiny smoke run (scripted engine,
                                                                   # random 2-layer Llama): plumbing only

Each point refits the probe on a nested seeded subsample of the train rows (`max_train`; 0 = all) and
values every benchmark state held-out. Δ SE = mean over states of (probe - ref)^2 - (grpo - ref)^2 with
a problem-clustered CR1 t 95% CI (negative: the probe is better). MCS@k rows (the build's extra
draws) mark where the curve would cross them. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from sveb.estimators import make
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import estimate_all
from sveb.score.scoring import paired_sq_diff
from sveb.store.builds import load_build


def held_out(name: str, params: dict, data) -> np.ndarray:
    est = make(name, params)
    prepare(est, data)
    values = estimate_all(est, data, "held-out", progress=False)[0]
    return values, est.diagnostics()


def point(values, base, ref, groups) -> dict:
    r = paired_sq_diff(values, base, ref, groups)  # the leaderboard's CR1 t-interval
    return {"mae": float(np.abs(values - ref).mean()), "dse": r["delta_sq"],
            "dse_lo": r["delta_sq_ci_low"], "dse_hi": r["delta_sq_ci_high"]}


def scripted_setup(tmp: Path) -> tuple[Path, Path]:
    """Tiny builds for a smoke run: scripted rollouts, a random 2-layer Llama as the 'policy'."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    from tests.test_critic import tiny_llama
    src = tmp / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    model = tiny_llama(tmp / "llama")
    out = {}
    for split, seed, n in (("train", 4, 8), ("test", 3, 6)):
        cfg = BuildConfig(domain="number", model=model, source=str(src), split=split, problems=n, oversample=3,
                          rollouts=8, states_per_problem=3, mc=6, mc_extra=3, min_acc=0.1, max_acc=0.9, seed=seed,
                          min_novel_numbers=0, sampling=SamplingConfig(max_tokens=120), engine="scripted")
        out[split] = build(cfg, tmp / "root", engine=ScriptedEngine())
    return out["train"], out["test"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=Path)
    ap.add_argument("--build", type=Path)
    ap.add_argument("--scripted-setup", type=Path, help="make tiny scripted builds here and run on them")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 0], help="train rows (0 = all)")
    ap.add_argument("--regimes", nargs="+", default=["probe", "probe-mc"])
    ap.add_argument("-P", "--param", action="append", default=[], help="probe parameter key=value")
    args = ap.parse_args()
    if args.scripted_setup:
        args.scripted_setup.mkdir(parents=True, exist_ok=True)
        args.train, args.build = scripted_setup(args.scripted_setup)
    if not (args.train and args.build):
        ap.error("--train and --build (or --scripted-setup)")
    params = dict(p.split("=", 1) for p in args.param)
    data = load_build(args.build)
    ref = np.array([data.references[s["state_id"]]["value"] for s in data.states])
    groups = np.array([s["problem_id"] for s in data.states])
    base = held_out("grpo", {}, data)[0]
    rows = []
    n_extra = min(len(r["extra_rewards"]) for r in data.references.values())
    for k in (2, 3):
        if n_extra >= k:
            rows.append({"estimator": f"mcs-{k}", "rows": "-", **point(held_out(f"mcs-{k}", {}, data)[0], base, ref,
                                                                     groups)})
    for name in args.regimes:
        for size in args.sizes:
            values, diag = held_out(name, {**params, "max_train": str(size), "train_build": str(args.train)}, data)
            if any(r["estimator"] == name and r["rows"] == diag.get("train_rows") for r in rows):
                continue  # a size above what the train build has: the same fit as the full one
            rows.append({"estimator": name, "rows": diag.get("train_rows"), "C": diag.get("C"),
                         **point(values, base, ref, groups)})
    table = Table(title=f"probe learning curve (held-out, {len(ref)} states, {len(set(groups))} problems; "
                        f"grpo MAE {np.abs(base - ref).mean():.4f})")
    for col in ("estimator", "train rows", "C", "MAE", "Δ SE vs grpo [95% CI]"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["estimator"], str(r["rows"]), f"{r['C']:g}" if r.get("C") else "-", f"{r['mae']:.4f}",
                      f"{r['dse']:+.4f} [{r['dse_lo']:+.4f}, {r['dse_hi']:+.4f}]")
    Console().print(table)
    print(json.dumps({"train": str(args.train), "build": str(args.build), "grpo_mae": float(np.abs(base - ref).mean()),
                      "rows": rows}))


if __name__ == "__main__":
    main()
