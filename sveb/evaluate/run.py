"""Run one estimator over a build under one protocol, store its estimates and scores; the console lines and the
`-P` flags of the commands that do."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from rich.console import Console

from sveb.core import schema
from sveb.core.config import fingerprint
from sveb.core.errors import EvalError, UsageError
from sveb.core.records import BuildData
from sveb.estimators import entry, make, params_fp, params_json
from sveb.estimators.base import Estimator, call_cache_key, call_prepare, runs_model, view_for
from sveb.evaluate.context import context_for
from sveb.evaluate.on_ray import estimate_on_ray
from sveb.evaluate.protocols import check_protocol, estimate_all
from sveb.lm.hidden import HiddenStates
from sveb.store import Build, atomic_write_bytes
from sveb.store.builds import load_build
from sveb.store.export import check_weights
from sveb.store.hista_json import refusal


def own_measurable(est: Estimator, protocol: str) -> bool:
    """Whether flipping a reward in the group shows the estimator's whole dependence on it. Not for a
    critic trained on the benchmark's own rollouts under in-group: its dependence is in its weights."""
    return not (protocol == "in-group" and est.trains_on_benchmark)


def compute_kind() -> str:
    """Where and in which dtype the model's passes and critics compute here ("cpu-bfloat16"): part of the stored
    scores' key of every estimator that reads the model, so a score computed in fp32 is not served as bf16's."""
    from sveb.core.device import pick_dtype, torch_device  # per call: tests patch sveb.core.device
    return f"{torch_device()}-{pick_dtype('auto')}"


def evaluate(bdir: Build | Path, name: str, params: dict[str, str] | None = None, protocol: str = "held-out",
             force: bool = False, console: Console | None = None,
             hidden_options: dict | None = None, ray=None) -> dict:
    """Score one estimator on a build (a Build handle, or its folder); `ray` (sveb.sample.distributed.RayOptions):
    hidden states and estimates per problem group on Ray actors (the same values: each group's estimate depends on
    that group alone)."""
    console = console or Console(stderr=True)
    check_protocol(protocol)
    est = make(name, params)
    pfp = params_fp(est)
    build = Build.of(bdir)
    bdir, manifest = build.path, build.manifest
    why = refusal(name, manifest, entry(name))  # by its declared capabilities
    if why:  # an imported hista-json build: text and mean references only
        raise EvalError(why)
    ctx = context_for(est, build, console=console)  # its train build found and checked here
    extra = call_cache_key(est, bdir, manifest, ctx)  # e.g. ppo-1's training build
    if runs_model(est):  # the model computes in the machine's pick (bf16 or fp32)
        extra = f"{extra}|{compute_kind()}"
    # 2000, 0: the bootstrap settings scores once had; kept in the fingerprint so stored estimates stay current
    fp = fingerprint(manifest.build_fp, name, pfp, protocol, 2000, 0, extra, schema.SCHEMA_VERSION)
    sfp = fingerprint(fp, schema.SCORES_VERSION)  # a new scores version recomputes rows, not estimates
    key = f"{name}-{pfp}-{protocol}"
    diag_path = bdir / "diagnostics" / f"{key}.json"
    if not force and (stored := build.stored("scores", key, sfp)) is not None:
        if diag_path.exists():
            import json
            console.print(f"{name} ({protocol}) diagnostics: {diagnostics_line(json.loads(diag_path.read_text()))}",
                          soft_wrap=True)
        return stored[0]
    if not force and (est_rows := build.stored("estimates", key, fp)) is not None:  # estimates current, score row
        old = build.stored_any("scores", key)  # from an older version
        seconds = old[0].get("seconds", float("nan")) if old else float("nan")
        ident = {"estimator": name, "params_fp": pfp, "params": params_json(est), "protocol": protocol}
        return _write_scores(build, key, sfp, ident, est_rows, load_build(build), seconds)
    if est.needs_hidden or est.needs_training or est.reads_tokens:  # it runs the policy on the build's token ids:
        # the export's weights, or refused
        check_weights(build)
    full = load_build(build)
    data = view_for(est, full)  # blind: no reference data, the extra draws only for a reference-scale estimator
    t0 = time.perf_counter()
    call_prepare(est, data, ctx)
    record_prepare(bdir / "timings" / f"{key}.json", time.perf_counter() - t0,
                    compute_kind() if runs_model(est) else None)
    if ray is not None and est.needs_training:
        # a trained estimator fits one model per build: per-group actors would each train it again
        console.print(f"{name}: trains one model per build, so it runs here rather than on Ray actors")
        ray = None
    if ray is not None:  # each group's estimate depends on that group alone: the same values
        from functools import partial
        factory = partial(HiddenStates, bdir.absolute(), manifest.model, layer=est.layer,
                          **(hidden_options or {})) if est.needs_hidden else None
        values, shift, seconds = estimate_on_ray(est, data, protocol, own_measurable(est, protocol), factory, ray,
                                                 console)
    else:
        provider = ctx.hidden.provider(est, data, hidden_options)
        values, shift, seconds = estimate_all(est, data, protocol, provider, own=own_measurable(est, protocol))
    diag = est.diagnostics()  # on Ray, only what the driver's copy of the estimator knows
    if diag:  # per-build numbers an estimator reports beside its scores (e.g. hidden-align's anchor similarity)
        import json
        atomic_write_bytes(diag_path, json.dumps(diag, indent=2).encode())
        console.print(f"{name} ({protocol}) diagnostics: {diagnostics_line(diag)}", soft_wrap=True)
    pj = params_json(est)
    est_rows = [{"state_id": s["state_id"], "problem_id": s["problem_id"], "estimator": name, "params_fp": pfp,
                 "params": pj, "protocol": protocol, "value": float(v), "own_shift": float(d)}
                for s, v, d in zip(data.states, values, shift)]
    build.store("estimates", key, pa.Table.from_pylist(est_rows, schema=schema.ESTIMATES), fp)
    ident = {"estimator": name, "params_fp": pfp, "params": pj, "protocol": protocol}
    return _write_scores(build, key, sfp, ident, est_rows, full, seconds)


def record_prepare(path: Path, seconds: float, compute: str | None = None) -> None:
    """prepare()'s wall time (training, for an estimator that trains there): a cost a result bundle reports; and,
    for an estimator that reads the model, where and in which dtype it computed (a table refuses to mix them:
    sveb.score.pool_checks)."""
    import json
    atomic_write_bytes(path, json.dumps({"prepare_seconds": seconds, **({"compute": compute} if compute else {})}
                                              ).encode())


def _write_scores(build: Build, key: str, sfp: str, ident: dict, est_rows: list[dict], data: BuildData,
                  seconds: float) -> dict:
    """The score row of one estimator's stored estimates (in any order) against the build's references."""
    by_id = {r["state_id"]: r for r in est_rows}
    missing = [s["state_id"] for s in data.states if s["state_id"] not in by_id]
    if missing:
        raise EvalError(f"{build}: {len(missing)} states have no stored estimate (e.g. "
                        f"{missing[0]}); rerun `sveb eval` with --force")
    from sveb.score.rows import of_build  # scipy
    values = np.array([by_id[s["state_id"]]["value"] for s in data.states], dtype=float)
    shift = np.array([by_id[s["state_id"]]["own_shift"] for s in data.states], dtype=float)
    m = build.manifest
    ident = {"model": m.model, "domain": m.domain, "build_fp": m.build_fp, **ident}
    row = of_build(ident, data, values, shift, seconds)
    build.store("scores", key, pa.Table.from_pylist([row], schema=schema.SCORES), sfp)
    return row


def diagnostics_line(diag: dict) -> str:
    """Diagnostics for the console; a per-state mapping is counted, not listed (it stays in the JSON file)."""
    def show(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return f"<{len(v)} per-state entries>" if isinstance(v, dict) else str(v)
    return ", ".join(f"{k}={show(v)}" for k, v in diag.items())


def print_build_info(bdir: Build | Path, console: Console) -> None:
    """What a reader of the scores must know about the build: its size and how much the budget cut off."""
    build = Build.of(bdir)
    m = build.manifest
    tr = m.truncated
    cut = ", ".join(f"{tr[k]:.1%} of {k}" for k in ("rollouts", "references") if isinstance(tr.get(k), (int, float)))
    console.print(f"build {build.name}: {m.n_problems} problems, {m.n_states} states"
                  + (f"; cut off by the token budget: {cut}" if cut else ""))


def params_dict(pairs: list[str]) -> dict[str, str]:
    """`-P key=value` flags -> dict, with a clear error for a malformed one."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise UsageError(f"-P {p}: expected key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
