"""The types and ranges of every bundle.json field that reaches a board's scores table, checked before anything
is written: one wrong type (a number where a string goes) would make the whole table unwritable, for good."""

from __future__ import annotations

import json
import math

from sveb.core.cost import draws_k

MAX_STR = 1000  # any name, target or version longer than this is not one
MAX_SECONDS = 1e9  # ~31 years
MAX_TOKENS = 2 ** 53  # exact in a float; well inside int64
MAX_K = 10 ** 6


def _show(x) -> str:
    return json.dumps(x, default=str)[:40]


def _string(x, field: str, optional: bool = True) -> str | None:
    if (x is None and optional) or (isinstance(x, str) and (optional or x) and len(x) <= MAX_STR):
        return None
    return f"{field} is {_show(x)}, not a string{' or null' if optional else ''} of up to {MAX_STR} characters"


def checked_number(x, field: str, top: float, integer: bool = False, low: float = 0,
                   optional: bool = True) -> str | None:
    if x is None and optional:
        return None
    if (isinstance(x, (int, float)) and not isinstance(x, bool) and low <= x <= top and math.isfinite(x)
            and (not integer or float(x).is_integer())):  # the range first: an int past a float's range fails it
        return None
    top_ = str(top) if isinstance(top, int) else f"{top:g}"
    return (f"{field} is {_show(x)}, not {'an integer' if integer else 'a number'} in [{low:g}, {top_}]"
            f"{' or null' if optional else ''}")


def problem(meta: dict) -> str | None:
    """The first field of a bundle.json (its form already checked by read_bundle) that cannot go into the
    scores table, as 'FIELD is VALUE, not ...'; None when all can."""
    est = meta["estimator"]
    prov = est.get("provenance") or {}
    msgs = [_string(est["name"], "estimator.name", optional=False), _string(est.get("target"), "estimator.target"),
            _string(est.get("params_fp"), "estimator.params_fp"),
            _string(meta["build"]["content_hash"], "build.content_hash", optional=False),
            _string(meta.get("sveb_version"), "sveb_version"),
            *(_string(prov.get(k), f"estimator.provenance.{k}") for k in ("kind", "distribution", "version"))]
    if not isinstance(est.get("needs_hidden"), (bool, type(None))):
        msgs.append(f"estimator.needs_hidden is {_show(est['needs_hidden'])}, not true, false or null")
    if draws_k(est.get("target") or "", est.get("params") or {}, est.get("reads_references")):  # k: extra tokens
        msgs.append(checked_number(est["params"].get("k", 1), "estimator.params.k", MAX_K, True, low=1, optional=False))
    for proto, cost in sorted((meta.get("cost") or {}).items()):
        for key, top, integer in (("seconds", MAX_SECONDS, False), ("prepare_seconds", MAX_SECONDS, False),
                                  ("train_tokens", MAX_TOKENS, True)):
            msgs.append(checked_number((cost or {}).get(key), f"cost.{proto}.{key}", top, integer))
    return next((m for m in msgs if m), None)


def culprit(rows: list[dict], cols: list[str]) -> str:
    """Which column and bundle stop a scores table from being built (a board an older SVEB let a bad bundle into)."""
    import pyarrow as pa
    for c in cols:
        vals = [r.get(c) for r in rows]
        try:
            pa.array(vals)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            kinds = [type(v).__name__ for v in vals if v is not None]
            odd = min(set(kinds), key=kinds.count)  # the rarer type is the intruder
            r = next(r for r in rows if type(r.get(c)).__name__ == odd)
            return f"column {c} holds {_show(r.get(c))} from bundle {r.get('bundle')}"
    return "a value of no single type"
