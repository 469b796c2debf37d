"""The confirmatory probe test (benchmarks/confirm.py, `make confirm`; the plan: results/confirm-2/plan.md).

Resumable end to end: each benchmark seed is sampled on number test slots disjoint from every earlier build
(`exclude`), exported, and restored under the root (an export that exists is not sampled again); a seed cut off
by a session's end keeps what it sampled with `--save-partial` (its shards copied to OUT/partial/<export name>, to
commit), which a fresh clone's run takes back before it samples the rest (sveb.experiment.partial); the train build
is the one Table 4's number column trains on (same config, so the same fingerprint; an export of it is restored);
grpo and the probe at each training seed are scored held-out (cached by sveb.evaluate); then the one
pre-registered test: the probe's mean Δ of squared error against grpo over its trainings, pooled over the seeds,
clusters = problems (sveb.score.pooling.paired, which uses sveb.score.trainings). `a` is the script's flags.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console

from sveb import store
from sveb.core import schema
from sveb.core.device import describe, pick_dtype
from sveb.core.errors import UsageError, brief
from sveb.evaluate import evaluate
from sveb.experiment import partial
from sveb.experiment.presets import preset_configs
from sveb.experiment.runner import Sampler
from sveb.experiment.table4 import restore
from sveb.sample.jobs import dtype_of
from sveb.sample.rules import stage_fps, validate
from sveb.score import power, scoring
from sveb.score.compare import compare, default_key
from sveb.score.composition import dtype_refusal
from sveb.score.pool_checks import Allow, check, computed_in
from sveb.score.pooling import add_estimates, base_view, load_view, merge, paired, read_scores
from sveb.store.export import export_build, verify

TRAIN = "number-train"  # the train build's key under PARTIAL, when no export of it is found
A, B = "probe", "grpo"  # the one hypothesis: A's squared error differs from B's (held-out)
BESIDE = ("mcs-2", "mcs-3")  # reported beside it, not verdicts
KEPT = (A, B, *BESIDE)  # the estimates committed with the result (estimates.parquet)


def configs(a):
    """The benchmark build of each seed and the train build: the powered preset (as Table 4's number column)
    with the plan's size and exclusions, in the plan's dtype. `a.override` (tests only): fields for both
    (train_problems: the train build's problems)."""
    tests, train = preset_configs("powered", "number", a.engine, [int(s) for s in str(a.seeds).split(",")])
    over = dict(getattr(a, "override", None) or {})
    train_problems = over.pop("train_problems", train.problems)
    tests = [replace(c, model=a.model, problems=a.problems, oversample=a.oversample, exclude=tuple(a.exclude),
                     dtype=a.dtype, **over) for c in tests]
    return tests, replace(train, model=a.model, dtype=a.dtype, problems=train_problems, **over)


def check_dtype(dtype: str) -> None:
    """The plan fixes one compute dtype for sampling and hidden states: SVEB_CPU_DTYPE is set to it here, and a
    different value already set is an error rather than a mixed run."""
    forced = os.environ.get("SVEB_CPU_DTYPE")
    if forced and forced != dtype:
        raise UsageError(f"SVEB_CPU_DTYPE={forced}: the plan fixes --dtype {dtype}; unset it or pass --dtype {forced}")
    os.environ["SVEB_CPU_DTYPE"] = dtype
    if pick_dtype(dtype) != dtype:
        raise UsageError(f"--dtype {dtype}: this machine computes in {pick_dtype(dtype)}")


def find_export(results: Path, build_fp: str) -> str:
    """An export of the build `build_fp` under `results` (Table 4's number train, wherever its folder is now), or ""."""
    for m in sorted(results.glob("**/exports/*/manifest.json")):
        if store.load_manifest(m.parent).build_fp == build_fp:
            return str(m.parent)
    return ""


def sample(a, console, engine=None, model_dir=None) -> tuple[list[Path], Path]:
    """Every seed's export (sampled unless it exists) restored under the root, and the train build."""
    tests, train = configs(a)
    for cfg in [*tests, train]:
        validate(cfg)
    root, exports = Path(a.root), Path(a.out) / "exports"
    sampler = Sampler(a.engine, engine)
    bdirs = []
    carried = Path(a.partial) if getattr(a, "partial", "") else None
    for cfg in tests:
        exp = exports / f"number-seed{cfg.seed}"
        if not (exp / "manifest.json").exists():
            console.rule(f"build: number seed {cfg.seed}")
            if carried is not None:
                partial.take(carried / exp.name, root, dtype_of(cfg), console, exp.name)
            export_build(sampler.build(cfg, root, console), exp, model_dir)
        if carried is not None:  # exported: the export is what is committed from now on
            shutil.rmtree(carried / exp.name, ignore_errors=True)
        verify(exp)
        bdirs.append(restore(exp, root))
    want = stage_fps(train)["references"]
    found = a.train_export or find_export(Path(a.results), want)
    if found:
        got = store.load_manifest(Path(found)).build_fp
        if got != want:
            raise UsageError(f"--train-export {found}: build {got}, but the plan's train build is {want}")
        console.print(f"train build: export {found}")
        tb = restore(Path(found), root)
    else:
        console.rule("train build")
        if carried is not None:
            partial.take(carried / TRAIN, root, dtype_of(train), console, TRAIN)
        tb = sampler.build(train, root, console)
    sampler.close()
    return bdirs, tb


def save_partial(a, console) -> None:
    """`--save-partial`: what each unexported seed (and the train build, when no export of it is found) has sampled
    under ROOT, copied to PARTIAL/<export name>/ to be committed, for a later session's fresh clone to resume from."""
    tests, train = configs(a)
    root, exports = Path(a.root), Path(a.out) / "exports"
    todo = {f"number-seed{c.seed}": c for c in tests
            if not (exports / f"number-seed{c.seed}" / "manifest.json").exists()}
    if not (a.train_export or find_export(Path(a.results), stage_fps(train)["references"])):
        todo[TRAIN] = train
    partial.save_unexported(todo, root, Path(a.partial), console)


def score(bdirs: list[Path], a, console) -> None:
    """grpo, the probe at each training seed and the beside rows, held-out, on every seed (cached)."""
    for b in bdirs:
        evaluate(b, B, {}, "held-out", console=console)
        for s in range(a.trainings):
            evaluate(b, A, {"seed": str(s)}, "held-out", console=console)
        for name in BESIDE:
            evaluate(b, name, {}, "held-out", console=console)


def save_estimates(bdirs: list[Path], path: Path) -> int:
    """The per-state estimates the test reads (held-out: A, B and the beside rows, every training, every seed) in
    one file to commit, each row with its build's fingerprint and the dtype its model passes ran in: from it and
    the exports, `--from-estimates` redoes the test with no sampling and no estimator. Returns the rows written."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    parts = []
    for b in bdirs:
        e = store.read_table(b / "estimates", schema.ESTIMATES)
        e = e.filter(pc.and_(pc.equal(e["protocol"], "held-out"), pc.is_in(e["estimator"], pa.array(KEPT))))
        keys = zip(*(e.column(c).to_pylist() for c in ("estimator", "params_fp", "protocol")))
        e = e.append_column("build_fp", pa.array([store.load_manifest(b).build_fp] * e.num_rows, pa.string()))
        parts.append(e.append_column("compute", pa.array([computed_in(b, k) for k in keys], pa.string())))
    table = pa.concat_tables(parts).sort_by([(c, "ascending") for c in ("build_fp", "estimator", "params_fp",
                                                                       "state_id")])
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf, compression="zstd")
    store.atomic_write_bytes(path, buf.getvalue().to_pybytes())
    return table.num_rows


def stored_views(bdirs: list[Path], path: Path) -> list:
    """Each export's view filled from the saved estimates alone (nothing the builds under ROOT cached). The
    dtype the model passes ran in is checked here from the file, as `check` does from the builds' records."""
    import pyarrow.compute as pc
    try:
        table = store.read_shard(path)
    except Exception as e:  # pyarrow's own error on a damaged or foreign file
        raise UsageError(f"--from-estimates {path}: not a readable Parquet file ({brief(e)})") from None
    missing = [c for c in (*schema.ESTIMATES.names, "build_fp", "compute") if c not in table.column_names]
    if missing:
        raise UsageError(f"--from-estimates {path}: no column {missing[0]} (not a file save_estimates wrote)")
    cols = (table.column(c).to_pylist() for c in ("estimator", "params_fp", "build_fp", "compute"))
    refusal = dtype_refusal(f"--from-estimates {path}: estimates", {f"{n} {p} [{b}]": d for n, p, b, d in zip(*cols)})
    if refusal:  # the plan fixes one dtype
        raise UsageError(refusal)
    views = []
    for b in bdirs:
        fp = store.load_manifest(b).build_fp
        rows = table.filter(pc.equal(table["build_fp"], fp))
        if not rows.num_rows:
            raise UsageError(f"--from-estimates {path}: no estimates of build {fp} ({b})")
        view, index = base_view(b, [])
        add_estimates(view, index, rows)
        views.append(view)
    return views


def test(bdirs: list[Path], stored: Path | None = None) -> dict:
    """The pre-registered test on the pooled seeds, and what is reported beside it; from the builds' stored
    estimates, or from a file save_estimates wrote (`stored`)."""
    views = [load_view(b, read_scores(b)) for b in bdirs] if stored is None else stored_views(bdirs, stored)
    check(views, Allow())  # replicate seeds: the same level mix and dtype, or no pooled test
    view = merge(views)
    key = default_key(view, A, "held-out")[:2]
    r = paired(view, "held-out")[key]
    p = r["p_delta"]
    verdict = scoring.verdict(r["delta_sq"], p)  # one hypothesis: p unadjusted (a family of one)
    se, df = r["delta_sq_se"], int(r["df"])
    per_seed = {}
    for b, v in zip(bdirs, views):
        one = paired(v, "held-out")[default_key(v, A, "held-out")[:2]]
        per_seed[store.load_manifest(b).build_fp] = one["delta_sq"]
    return {"a": A, "b": B, "protocol": "held-out", "states": r["n_states"], "problems": r["n_problems"],
            "seeds": view.seeds, "trainings": r.get("trainings"), "training_seeds": r.get("training_seeds"),
            "training_sd": r.get("training_sd"), "delta_sq": r["delta_sq"], "ci": [r["delta_sq_ci_low"],
            r["delta_sq_ci_high"]], "se": se, "df": r["df"], "p": p, "verdict": verdict,
            "mde_80": power.mde(se, df), "mae": r["mae"], "mae_grpo": r["mae_grpo"], "delta_per_seed": per_seed,
            "beside": [{k: c[k] for k in ("b", "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p_delta")}
                       for c in compare(view, A, list(BESIDE), "held-out")],
            "builds": [store.load_manifest(b).build_fp for b in bdirs]}


def write(res: dict, out: Path, train_fp: str, seconds: float) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    res = {**res, "train_build": train_fp, "machine": describe(),
           "dtype": os.environ.get("SVEB_CPU_DTYPE"), "seconds": round(seconds, 1),
           "date": time.strftime("%Y-%m-%d")}
    (out / "result.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    lo, hi = res["ci"]
    what = {"better": "confirmed: the probe's squared error is lower than grpo's",
            "worse": "the opposite of the hypothesis: the probe's squared error is higher than grpo's",
            "no difference": f"not confirmed: no difference detected (a true |Δ| of {res['mde_80']:.4f} would "
                             f"be detected with 80% power)"}[res["verdict"]]
    lines = [f"# Confirmatory probe test: result ({res['date']})", "",
             "Pre-registered in plan.md (committed before any of these builds was sampled); run once, analysed once "
             "by `benchmarks/confirm.py`.", "",
             f"**{A} − {B}, held-out, {res['states']} states, {res['problems']} problems, seeds "
             f"{','.join(map(str, res['seeds']))}, {res['trainings']} trainings (seeds {res['training_seeds']}): "
             f"Δ sq err {res['delta_sq']:+.4f} [{lo:+.4f}, {hi:+.4f}], p = {res['p']:.3g} (df {res['df']:.0f}): "
             f"{res['verdict']}** — {what}.", "",
             f"MAE {A} {res['mae']:.4f} (mean over trainings), {B} {res['mae_grpo']:.4f}; training sd of Δ "
             f"{res['training_sd']:.4f}; Δ per seed (mean over trainings): "
             + ", ".join(f"{k} {v:+.4f}" for k, v in res["delta_per_seed"].items()) + ".", "",
             "Beside it, not verdicts (training seed 0, unadjusted): "
             + "; ".join(f"{A} − {c['b']} {c['delta_sq']:+.4f} [{c['delta_sq_ci_low']:+.4f}, "
                         f"{c['delta_sq_ci_high']:+.4f}], p {c['p_delta']:.3g}" for c in res["beside"]) + ".", "",
             f"Builds {', '.join(res['builds'])} (exports/), train build {res['train_build']}; compute dtype "
             f"{res['dtype']}; CPU flags {res['machine']}; {res['seconds']:.0f} s this run."]
    path = out / "result.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(a, engine=None, model_dir=None) -> Path:
    console = Console(stderr=True)
    check_dtype(a.dtype)
    if getattr(a, "save_partial", False):
        save_partial(a, console)
        return Path(a.partial)
    t0 = time.perf_counter()
    if getattr(a, "from_estimates", None):
        bdirs, train_fp, stored = redo_inputs(a)
    else:
        bdirs, tb = sample(a, console, engine, model_dir)
        score(bdirs, a, console)
        stored, train_fp = None, store.load_manifest(tb).build_fp
        n = save_estimates(bdirs, Path(a.out) / "estimates.parquet")
        console.print(f"{n} per-state estimates -> {Path(a.out) / 'estimates.parquet'}")
    res = test(bdirs, stored)
    if not np.isfinite(res["p"]):
        raise UsageError(f"the test has no p (states {res['states']}, problems {res['problems']}): too few to test")
    return write(res, Path(a.out), train_fp, time.perf_counter() - t0)


def redo_inputs(a) -> tuple[list[Path], str, Path]:
    """`--from-estimates FILE`: the seeds' exports beside FILE (FILE's folder/exports), checked, and the plan's
    train build fingerprint; nothing is sampled, restored or scored."""
    path = Path(a.from_estimates)
    if not path.is_file():
        raise UsageError(f"--from-estimates {path}: no such file")
    tests, train = configs(a)
    bdirs = []
    for cfg in tests:
        exp = path.parent / "exports" / f"number-seed{cfg.seed}"
        if not (exp / "manifest.json").exists():
            raise UsageError(f"--from-estimates {path}: no export {exp} of seed {cfg.seed} beside it")
        verify(exp)
        bdirs.append(exp)
    return bdirs, stage_fps(train)["references"], path
