"""What the board recomputes of a bundle before it accepts it: the build it names (its tables' hashes), every
estimate (one finite value in [0, 1] per state and protocol), the score rows (the same call as `sveb eval`), and
whether a builtin estimator's values reproduce here ("verified") or are taken as declared."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from sveb.board.bundle import BundleError, build_identity
from sveb.board.pool import PROTOCOLS
from sveb.board.pool import clean as _clean
from sveb.core.config import protocol_of
from sveb.core.cost import cost_figures
from sveb.core.errors import SvebError
from sveb.estimators import entry, make, registry
from sveb.estimators.base import as_context, call_prepare, view_for
from sveb.evaluate.protocols import estimate_all
from sveb.store import Build

TOL = 1e-9  # the evaluator's own tolerance on [0, 1] (float noise at the ends)

_idents: dict[tuple, dict] = {}


def identity_of(bdir: Build | Path) -> dict:
    build = Build.of(bdir)
    key = (str(build.path.resolve()), (build / "manifest.json").stat().st_mtime_ns)
    if key not in _idents:
        _idents[key] = build_identity(build)
    return _idents[key]

def validate(meta: dict, table: pa.Table, data) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """protocol -> (values, own shifts) in the build's state order; a BundleError names the first problem."""
    want = meta["build"]["content_hash"]
    ident = identity_of(data.bdir)
    for t, h in (meta["build"].get("tables") or {}).items():
        if ident["tables"].get(t) != h:
            raise BundleError(f"table {t} hash {str(h)[:16]} differs from build {want}'s "
                              f"{ident['tables'].get(t, '')[:16]}")
    order = {s["state_id"]: i for i, s in enumerate(data.states)}
    n = len(order)
    sids, protos, vals, shifts = (table.column(c).to_pylist() for c in ("state_id", "protocol", "value", "own_shift"))
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    seen: set[tuple[str, str]] = set()
    for sid, proto, v, d in zip(sids, protos, vals, shifts):
        if proto not in PROTOCOLS:
            raise BundleError(f"state {sid}: unknown protocol '{proto}' (known: {', '.join(PROTOCOLS)})")
        if sid not in order:
            raise BundleError(f"state {sid} ({proto}) is not a state of build {want}")
        if (sid, proto) in seen:
            raise BundleError(f"state {sid} appears twice under protocol {proto}")
        seen.add((sid, proto))
        if v is None or not math.isfinite(v) or not -TOL <= v <= 1 + TOL:
            raise BundleError(f"value {v} at state {sid} ({proto}) is not a finite number in [0, 1]")
        if d is not None and not math.isnan(d) and not (math.isfinite(d) and -TOL <= d <= 1 + TOL):
            raise BundleError(f"own_shift {d} at state {sid} ({proto}) is not in [0, 1] (or NaN: not measured)")
        arrs = out.setdefault(proto, (np.full(n, np.nan), np.full(n, np.nan)))
        arrs[0][order[sid]] = v
        arrs[1][order[sid]] = np.nan if d is None else d
    if not out:
        raise BundleError("the bundle holds no estimates")
    for proto, (v, _) in out.items():
        if np.isnan(v).any():
            raise BundleError(f"missing state {data.states[int(np.flatnonzero(np.isnan(v))[0])]['state_id']} "
                              f"under protocol {proto} ({int(np.isnan(v).sum())} of {n} missing)")
    return out


def _reported(cost: dict, key: str) -> float | None:
    """A self-reported cost figure (seconds, training): a non-negative number or None; anything else refused."""
    x = (cost or {}).get(key)
    if x is None:
        return None
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x) or x < 0:
        raise BundleError(f"cost.{key} = {x!r}: expected a non-negative number or null")
    return float(x)


def score_rows(meta: dict, values: dict, data, checked: str = "self-declared") -> list[dict]:
    """The board's own score rows, one per protocol: the score row (sveb.score.rows) of the estimates against the
    build's references (the same call as `sveb eval`), with the cost figures recomputed from the build where it can
    be."""
    from sveb.score.rows import of_build  # scipy
    states = data.states
    est = meta["estimator"]
    prov = est.get("provenance") or {}
    out = []
    for proto, (v, shift) in sorted(values.items(), key=lambda kv: PROTOCOLS.index(kv[0])):
        cost = (meta.get("cost") or {}).get(proto) or {}
        seconds = _reported(cost, "seconds")
        train = _reported(cost, "train_tokens")
        ident = {"model": data.manifest.model, "domain": data.manifest.domain,
                 "build_fp": data.manifest.build_fp, "content_hash": meta["build"]["content_hash"],
                 "build_protocol": protocol_of(data.manifest),  # sveb | paper (sveb/core/config.py; issue 31)
                 "estimator": est["name"], "params_fp": est.get("params_fp") or "",
                 "params": json.dumps(est["params"], sort_keys=True), "protocol": proto}
        row = {**of_build(ident, data, v, shift, seconds if seconds is not None else float("nan")),
               **cost_figures(target=est.get("target") or "", params=est["params"],
                              needs_hidden=bool(est.get("needs_hidden")), states=states, rollouts=data.rollouts,
                              seconds=seconds if seconds is not None else float("nan"),
                              prepare_seconds=_reported(cost, "prepare_seconds"),
                              train_tokens=int(train) if train is not None else None,
                              reads_references=bool(est.get("reads_references"))),
               "role": est.get("role"), "reads_references": bool(est.get("reads_references")),
               "provenance": prov.get("kind"), "provenance_check": checked, "distribution": prov.get("distribution"),
               "version": prov.get("version"), "target": est.get("target"), "sveb_version": meta.get("sveb_version"),
               "machine": json.dumps(meta.get("machine") or {}, sort_keys=True), "bundle": meta["key"]}
        out.append({k: _clean(x) for k, x in row.items()})
    return out

def params_args(name: str, pj: str | None) -> dict[str, str]:
    """A stored params JSON back to `-P` strings (the registry coerces them to the fields' types again), less
    the ones the name fixes (mcs-2's k)."""
    preset = entry(name).preset
    return {k: "none" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in json.loads(pj or "{}").items() if k not in preset}


def provenance_check(meta: dict, values: dict, data) -> str:
    """"verified" where the board can reproduce the claim: a builtin estimator (by name and target) that needs no
    model, recomputed here on the build gives the submitted values under every protocol; "self-declared" for
    everything else (a plugin, an import path, a new name claiming builtin, a model-reading estimator)."""
    est = meta["estimator"]
    e = next((x for x in registry.BUILTIN if x.name == est["name"]), None)  # read now: tests add builtins
    if ((est.get("provenance") or {}).get("kind") != "builtin" or e is None or e.target != est.get("target")
            or e.loads_model or e.needs_hidden or e.needs_training):  # by its capabilities: a model is not rerun
        return "self-declared"
    try:
        mine = make(e.name, params_args(e.name, json.dumps(est["params"])))
        public = view_for(mine, data)  # what `sveb eval` hands it: blind unless reference-scale
        call_prepare(mine, public, as_context(None))  # as `sveb eval` does: mcs-eb-k fits its prior over the build here
        for proto, (v, _) in values.items():
            got = estimate_all(mine, public, proto, progress=False)[0]
            if not np.allclose(got, v, rtol=0, atol=1e-9):
                return "self-declared"
    except SvebError:
        return "self-declared"
    return "verified"
