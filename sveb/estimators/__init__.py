"""Lazy estimator registry: a name maps to "module:Class"; the module is imported only when used.

Each estimator class is a dataclass whose fields are its parameters (`-P key=value` on the CLI).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import re
from typing import Any

from sveb.config import fingerprint

REGISTRY: dict[str, str] = {
    "grpo": "sveb.estimators.grpo:GroupMean",
    "mcs-1": "sveb.estimators.mcs:MonteCarlo",
    "mcs-2": "sveb.estimators.mcs:MonteCarlo",
    "mcs-3": "sveb.estimators.mcs:MonteCarlo",
    "mcs-4": "sveb.estimators.mcs:MonteCarlo",
    "numca": "sveb.estimators.numca:Numca",
    "hista": "sveb.estimators.hista:Hista",
    "shear": "sveb.estimators.shear:Shear",
    "ppo-1": "sveb.estimators.ppo:PPO1",
    "ppo-n": "sveb.estimators.ppo:PPON",
}

DESCRIPTIONS: dict[str, str] = {
    "grpo": "group mean of the G rollout rewards",
    "mcs-k": "mean of k independent continuations of the state (k = 1..4)",
    "numca": "mean reward of rollouts sharing the prefix's set of numbers (Numca)",
    "hista": "1/d-weighted kNN over EMA-compressed hidden-state histories (Hista)",
    "shear": "1/d-weighted rollouts by min span Wasserstein distance (SHEAR)",
    "ppo-1": "PPO critic trained on a disjoint problem set",
    "ppo-n": "PPO critic trained on the benchmark's own rollouts",
}


class UnknownEstimator(ValueError):
    pass


def available() -> list[str]:
    return list(REGISTRY)


def _class_for(name: str) -> type:
    if name not in REGISTRY:
        near = difflib.get_close_matches(name, REGISTRY, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; known: {', '.join(REGISTRY)}"
        raise UnknownEstimator(f"unknown estimator '{name}'{hint}")
    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def _coerce(value: str, like: Any, key: str, name: str) -> Any:
    try:
        if isinstance(like, bool):
            if value.lower() in ("1", "true", "yes"):
                return True
            if value.lower() in ("0", "false", "no"):
                return False
            raise ValueError(value)
        if isinstance(like, int):
            return int(value)
        if isinstance(like, float) or like is None and re.fullmatch(r"-?[\d.e+-]+", value):
            return None if value.lower() == "none" else float(value)
        return None if value.lower() == "none" else value
    except ValueError:
        raise ValueError(f"-P {key}={value}: not a valid {type(like).__name__} for estimator '{name}'") from None


def make(name: str, params: dict[str, str] | None = None):
    """Build an estimator from its name and string parameters (unknown keys are an error)."""
    cls = _class_for(name)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "name"}
    kwargs: dict[str, Any] = {}
    if name.startswith("mcs-"):
        kwargs["k"] = int(name.split("-")[1])
    for key, value in (params or {}).items():
        if key not in fields:
            near = difflib.get_close_matches(key, fields, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(fields) or 'none'})"
            raise ValueError(f"-P {key}: unknown parameter for estimator '{name}'{hint}")
        f = fields[key]
        default = f.default if f.default is not dataclasses.MISSING else None
        kwargs[key] = _coerce(value, default, key, name)
    est = cls(**kwargs)
    est.name = name
    return est


def params_of(est) -> dict[str, Any]:
    return {f.name: getattr(est, f.name) for f in dataclasses.fields(est) if f.init and f.name != "name"}


def params_fp(est) -> str:
    return fingerprint(type(est).__name__, params_of(est))


def params_json(est) -> str:
    return json.dumps(params_of(est), sort_keys=True, default=str)
