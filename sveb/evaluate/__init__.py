"""Run one estimator over a build under one protocol, store its estimates and scores (run.py); the protocols,
ablations, collapse checks and conformance runs in their modules."""

from sveb.evaluate.run import (
    compute_kind,
    diagnostics_line,
    evaluate,
    own_measurable,
    params_dict,
    print_build_info,
    record_prepare,
)
