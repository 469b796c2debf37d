"""The evaluation protocols: one estimator run over every state of a build, problem group by problem group.

`held-out` (the headline) gives each state the group less its own rollout, cut at the prefix; `in-group` (the
paper's) gives every state of a problem the whole group. With own=True each value is also measured again with the
state's own final reward flipped: how far it moves is the estimator's own-outcome shift. `sveb.evaluate` runs this
locally, `sveb.sample.distributed` one group per Ray job.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
from rich.progress import track

from sveb.core.errors import EvalError
from sveb.core.records import BuildData, ProblemGroup
from sveb.estimators.base import Estimator, view_for
from sveb.store.builds import group_for, state_for

PROTOCOLS = ("held-out", "in-group")  # held-out is the headline; in-group is the paper's protocol
PROTOCOL_LABELS = {"held-out": "held-out", "in-group": "in-group (paper; sees own outcome)"}


def flip_own(group: ProblemGroup, rollout_idx: int) -> ProblemGroup:
    """The group with one rollout's final reward flipped (r -> 1 - r), wherever it appears."""
    def flip(rolls):
        return tuple(replace(r, reward=1.0 - r.reward) if r.rollout_idx == rollout_idx else r for r in rolls)
    return replace(group, rollouts=flip(group.rollouts), all_rollouts=flip(group.all_rollouts or group.rollouts))


def check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise EvalError(f"--protocol {protocol}: unknown (known: {', '.join(PROTOCOLS)})")


def _call(est: Estimator, group: ProblemGroup, states: list) -> np.ndarray:
    """est.estimate, held to its contract's shape: one number per state (more or fewer is refused, never cut)."""
    got = est.estimate(group, states)
    try:
        v = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        raise EvalError(f"estimator {est.name} returned {type(got).__name__} for {len(states)} states; expected "
                        f"one number per state") from None
    if v.shape != (len(states),):
        n = v.size if v.ndim <= 1 else f"an array of shape {v.shape}"
        raise EvalError(f"estimator {est.name} returned {n} values for {len(states)} states (problem "
                        f"{states[0].problem_id if states else '?'}); expected one value per state")
    return v


def estimate_all(est: Estimator, data: BuildData, protocol: str, hidden_provider=None,
                 own: bool = False, progress: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """One value per state of the build, in data.states order, and (with own=True) how far each value
    moves when the state's own rollout's final reward is flipped (NaN without it), and the seconds the
    estimator spent on the values alone.

    The own-outcome shift is measured, not assumed: the estimator is run again on the group with the
    state's own reward flipped, under the same protocol (held-out removes that rollout after the flip).
    """
    check_protocol(protocol)
    data = view_for(est, data)  # blind whatever the caller passed: no references, extra draws for scale alone
    by_problem: dict[str, list[int]] = {}
    for i, s in enumerate(data.states):
        by_problem.setdefault(s["problem_id"], []).append(i)
    values, shift = np.full(len(data.states), np.nan), np.full(len(data.states), np.nan)
    seconds = 0.0
    groups = list(by_problem.items())
    for pid, idx in track(groups, description=f"{est.name} ({protocol})", transient=True) if progress else groups:
        hidden_fn = hidden_provider(pid, data.rollouts[pid]) if hidden_provider else None
        group = group_for(data, pid, hidden_fn)
        states = [state_for(data, data.states[i]) for i in idx]
        if protocol == "in-group":
            t0 = time.perf_counter()
            values[idx] = _call(est, group, states)
            seconds += time.perf_counter() - t0
            if own:  # one re-run per rollout that has states: all its states share the flip
                by_roll: dict[int, list[int]] = {}
                for j, s in enumerate(states):
                    by_roll.setdefault(s.rollout_idx, []).append(j)
                for r_idx, js in by_roll.items():
                    moved = _call(est, flip_own(group, r_idx), [states[j] for j in js])
                    for j, v in zip(js, moved):
                        shift[idx[j]] = abs(v - values[idx[j]])
        else:
            for i, s in zip(idx, states):
                t0 = time.perf_counter()
                values[i] = _call(est, group.held_out(s), [s])[0]
                seconds += time.perf_counter() - t0
                if own:
                    shift[i] = abs(_call(est, flip_own(group, s.rollout_idx).held_out(s), [s])[0] - values[i])
    bad = ~np.isfinite(values) | (values < -1e-9) | (values > 1 + 1e-9)
    if bad.any():  # the contract: a value is a probability of success
        raise EvalError(f"estimator {est.name} returned {int(bad.sum())} values that are not finite numbers in "
                        f"[0, 1] (e.g. {values[bad][0]})")
    return values, shift, seconds
