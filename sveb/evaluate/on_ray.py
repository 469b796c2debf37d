"""Estimators on a Ray cluster (`sveb eval --ray`): one job per problem group on the actors of
sveb.sample.distributed (each group's estimate depends on that group alone, so the values are the local ones)."""

from __future__ import annotations

from sveb.core.records import BuildData
from sveb.evaluate.protocols import estimate_all
from sveb.sample.distributed import RayOptions, RayRunner


def _nothing():
    return None


def eval_group(get, est, data, protocol: str, own: bool):
    """One problem group's estimates on a worker: its hidden states first (extracted and cached unless
    the store has them; memory bounded by the group), then the estimator."""
    hs = get()
    provider = None
    if hs is not None:
        for pid in data.problems:
            hs.ensure(pid, data.rollouts[pid])
        provider = hs.provider()
    return estimate_all(est, data, protocol, provider, own, progress=False)


def estimate_on_ray(est, data, protocol: str, own: bool, hidden_factory, opts: RayOptions, console=None):
    """protocols.estimate_all's values, shifts and seconds, one job per problem group on Ray actors."""
    import numpy as np
    runner = RayRunner(opts, hidden_factory or _nothing, console)
    try:
        jobs = []
        for pid in sorted(data.problems):
            idx = [i for i, s in enumerate(data.states) if s["problem_id"] == pid]
            if not idx:
                continue
            states = [data.states[i] for i in idx]
            sub = BuildData(data.bdir, data.manifest, {pid: data.problems[pid]}, {pid: data.rollouts[pid]}, states,
                            {}, {s["state_id"]: data.extras.get(s["state_id"], ()) for s in states})
            jobs.append((idx, runner.submit(eval_group, est, sub, protocol, own)))
        values, shift = np.full(len(data.states), np.nan), np.full(len(data.states), np.nan)
        seconds = 0.0
        for idx, h in jobs:
            v, d, sec = runner.result(h)
            values[idx], shift[idx] = v, d
            seconds += sec
    finally:
        runner.close()
    return values, shift, seconds
