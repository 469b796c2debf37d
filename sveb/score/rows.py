"""The score row: one estimator's per-state estimates against the references, every metric of the table
(sveb.core.metrics) that is computed from them. The evaluator, the pooled views and the board all call it, so a
row is assembled in one place."""

from __future__ import annotations

import numpy as np

from sveb.core import metrics
from sveb.score import scoring


def metric_values(est, ref, n_ref: int, problems, rollouts=None, t=None, shift=None) -> dict:
    """Every computed metric of the table, in the order scoring lays them out, then those the table computes
    itself (`Metric.compute`)."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    out = {**scoring.score(est, ref, n_ref, problems, rollouts=rollouts, t=t),
           **scoring.own_shift_stats(np.full(len(ref), np.nan) if shift is None else shift)}
    for m in metrics.METRICS:
        if m.compute is not None:
            out[m.name] = float(m.compute(est, ref)) if len(ref) else float("nan")
    return out


def score_row(ident: dict, est, ref, n_ref: int, problems, rollouts=None, t=None, shift=None,
              seconds: float | None = None) -> dict:
    """The identity (model, domain, build, estimator, settings, protocol...), the metrics, the seconds spent."""
    return {**ident, **metric_values(est, ref, n_ref, problems, rollouts, t, shift), "seconds": seconds}


def of_build(ident: dict, data, est, shift, seconds: float | None = None) -> dict:
    """The score row of per-state estimates given in the order of a build's states (a BuildData)."""
    states = data.states
    ref = np.array([data.references[s["state_id"]]["value"] for s in states], dtype=float)
    n_ref = int(data.references[states[0]["state_id"]]["n_ref"]) if states else 20
    return score_row(ident, est, ref, n_ref, np.array([s["problem_id"] for s in states]),
                     rollouts=np.array([s["rollout_idx"] for s in states]), t=np.array([s["t"] for s in states]),
                     shift=shift, seconds=seconds)
