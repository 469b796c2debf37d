"""`sveb submit`: run (or reuse) one estimator's evaluation on a build and write its result bundle."""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from sveb import store
from sveb.board.bundle import build_identity, check_out, dist_version, machine, now, provenance, write_bundle
from sveb.core.cost import cost_figures, rollout_tokens
from sveb.core.errors import EvalError
from sveb.estimators import entry, make, params_fp, params_of
from sveb.evaluate import evaluate
from sveb.evaluate.protocols import check_protocol
from sveb.store.builds import load_build, load_rollouts
from sveb.store.train_builds import train_build_of


def _prepare_seconds(bdir: store.Build | Path, key: str) -> float | None:
    path = bdir / "timings" / f"{key}.json"
    try:
        return float(json.loads(path.read_text())["prepare_seconds"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # evaluated before timings were recorded


def _train_tokens(est, entry, build: store.Build) -> int | None:
    """Forward tokens of a trained estimator's training data: a disjoint train build's rollouts, or (ppo-n)
    the benchmark build's own. None for an estimator that does not train."""
    if not entry.needs_training:
        return None
    if entry.train_split:
        tb = train_build_of(build, getattr(est, "train_build", ""), est.name)
        return rollout_tokens(load_rollouts(tb.path))
    return rollout_tokens(load_rollouts(build.path))


def submit(bdir: store.Build | Path, name: str, params: dict[str, str], protocols: list[str], out: Path,
           archive: str | None = None, force: bool = False,
           console: Console | None = None) -> Path:
    """Evaluate (or reuse the stored evaluation of) `name` on `bdir` (a Build, or its folder) under each protocol;
    write the bundle."""
    console = console or Console(stderr=True)
    build = store.Build.of(bdir)  # opened once: every step below reads the manifest parsed here
    check_out(out, archive)
    for p in protocols:
        check_protocol(p)
    est = make(name, params)
    e = entry(name)
    pfp = params_fp(est)
    ident = build_identity(build)  # before the run: an edited export fails here, not after hours of estimating
    t0 = time.perf_counter()
    score_rows = {p: evaluate(build, name, params, p, force=force, console=console) for p in protocols}
    wall = time.perf_counter() - t0
    rows = []
    for p in protocols:
        shard = store.shard_path(build / "estimates", f"{name}-{pfp}-{p}")
        got = store.read_shard(shard).to_pylist()
        if not got:
            raise EvalError(f"{shard}: no estimates stored for {name} ({p}); rerun with --force")
        rows += [{"state_id": r["state_id"], "protocol": p, "value": r["value"], "own_shift": r["own_shift"]}
                 for r in got]
    data = load_build(build, references=False)
    train_tokens = _train_tokens(est, e, build)
    resolved = json.loads(json.dumps(params_of(est), default=str))
    cost = {p: cost_figures(target=e.target, params=resolved, needs_hidden=bool(est.needs_hidden),
                            states=data.states, rollouts=data.rollouts, seconds=score_rows[p].get("seconds"),
                            prepare_seconds=_prepare_seconds(build, f"{name}-{pfp}-{p}"), train_tokens=train_tokens,
                            reads_references=bool(e.reads_references))
            for p in protocols}
    meta = {
        "estimator": {"name": name, "target": e.target, "params": resolved, "params_fp": pfp, "role": e.role,
                      "needs_hidden": bool(est.needs_hidden), "needs_training": e.needs_training,
                      "reads_references": bool(e.reads_references),  # handed the build's extra draws
                      "provenance": provenance(e)},
        "protocols": list(protocols),
        "build": ident,
        "sveb_version": dist_version("sveb"),
        "machine": machine(),
        "created": now(),
        "wall_seconds": wall,
        "cost": cost,
    }
    return write_bundle(out, meta, rows, archive)
