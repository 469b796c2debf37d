"""The estimator registry (registry.py: one entry per estimator carries everything the rest of SVEB reads about it;
modules are imported only when an estimator is built) and an estimator built from a name and `-P` strings
(params.py)."""

from sveb.estimators.params import make, params_fp, params_json, params_of
from sveb.estimators.registry import (
    BASELINE,
    BUILTIN,
    CAPABILITIES_FILE,
    CONSTRUCTED,
    DECLARED,
    DEFAULT_CAPS,
    GROUP,
    ROLES,
    Entry,
    UnknownEstimator,
    entries,
    entry,
    grid,
    is_variant,
    names,
    rank,
    role_of,
)
