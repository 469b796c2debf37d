"""An estimator built from its registered name and `-P` strings, and its parameters read back (for fingerprints
and tables)."""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from typing import Any

from sveb.core.config import fingerprint
from sveb.core.errors import UsageError
from sveb.estimators.registry import entries, entry


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
        raise UsageError(f"-P {key}={value}: not a valid {type(like).__name__} for estimator '{name}'") from None


def make(name: str, params: dict[str, str] | None = None):
    """Build an estimator from its name and string parameters (unknown or preset keys are an error)."""
    from sveb.estimators.base import Estimator  # numpy: registry lookups stay light
    e = entry(name)
    cls = e.load()
    if not (isinstance(cls, type) and issubclass(cls, Estimator) and dataclasses.is_dataclass(cls)):
        raise UsageError(f"estimator '{name}': {e.target} must be a @dataclass subclass of "
                         f"sveb.estimators.base.Estimator")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and f.name != "name"}
    kwargs: dict[str, Any] = dict(e.preset)
    for key, value in (params or {}).items():
        if key in e.preset:
            raise UsageError(f"-P {key}: fixed to {e.preset[key]} by the name '{name}'; choose another name "
                             f"instead ({', '.join(n for n, x in entries().items() if x.target == e.target)})")
        if key not in fields:
            near = difflib.get_close_matches(key, fields, n=1)
            hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(fields) or 'none'})"
            raise UsageError(f"-P {key}: unknown parameter for estimator '{name}'{hint}")
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
