"""The score row: one estimator's per-state estimates against the references, every metric of the table
(sveb.core.metrics) that is computed from them. The evaluator, the pooled views and the board all call it, so a
row is assembled in one place."""

from __future__ import annotations

import numpy as np

from sveb.core import metrics
from sveb.score import calibration, choices, ranks, rollout_eq, scoring


def neighbour_values(est, ref, n_ref: int, problems, rollouts=None, t=None, own=None, pos=None,
                     protocol=None) -> dict:
    """k_eq and the metrics neighbouring benchmarks read (sveb.score.rollout_eq, ranks, calibration, choices).
    own: the own rollout's reward per state (AUROC, held-out only); pos: t / T per state (siblings)."""
    problems = np.asarray(problems)
    top1, chance, sets = choices.sibling_top1(est, ref, problems, pos)
    f1, drops = choices.drop_f1(est, ref, problems, rollouts, t)
    return {**rollout_eq.k_eq(est, ref, n_ref, problems), **ranks.rank_metrics(est, ref, n_ref, problems),
            **calibration.calibration(est, ref, n_ref), "auroc_own": choices.auroc_own(est, own, protocol),
            "sibling_top1": top1, "sibling_chance": chance, "sibling_sets": sets, "drop_f1": f1,
            "drop_rollouts": drops}


def metric_values(est, ref, n_ref: int, problems, rollouts=None, t=None, shift=None, own=None, pos=None,
                  protocol=None) -> dict:
    """Every computed metric of the table, in the order scoring lays them out, then those the table computes
    itself (`Metric.compute`)."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    out = {**scoring.score(est, ref, n_ref, problems, rollouts=rollouts, t=t),
           **scoring.own_shift_stats(np.full(len(ref), np.nan) if shift is None else shift),
           **neighbour_values(est, ref, n_ref, problems, rollouts, t, own, pos, protocol)}
    for m in metrics.METRICS:
        if m.compute is not None:
            out[m.name] = float(m.compute(est, ref)) if len(ref) else float("nan")
    return out


def score_row(ident: dict, est, ref, n_ref: int, problems, rollouts=None, t=None, shift=None,
              seconds: float | None = None, own=None, pos=None) -> dict:
    """The identity (model, domain, build, estimator, settings, protocol...), the metrics, the seconds spent."""
    return {**ident, **metric_values(est, ref, n_ref, problems, rollouts, t, shift, own, pos, ident.get("protocol")),
            "seconds": seconds}


def of_build(ident: dict, data, est, shift, seconds: float | None = None) -> dict:
    """The score row of per-state estimates given in the order of a build's states (a BuildData)."""
    states = data.states
    ref = np.array([data.references[s["state_id"]]["value"] for s in states], dtype=float)
    n_ref = int(data.references[states[0]["state_id"]]["n_ref"]) if states else 20
    return score_row(ident, est, ref, n_ref, np.array([s["problem_id"] for s in states]),
                     rollouts=np.array([s["rollout_idx"] for s in states]), t=np.array([s["t"] for s in states]),
                     shift=shift, seconds=seconds, own=own_rewards(data), pos=positions(states))


def own_rewards(data) -> np.ndarray:
    """Per state, the final reward of the rollout it was cut from (NaN where that rollout is not in the build)."""
    reward = {(pid, r["rollout_idx"]): float(r["reward"]) for pid, rs in data.rollouts.items() for r in rs}
    return np.array([reward.get((s["problem_id"], s["rollout_idx"]), np.nan) for s in data.states], dtype=float)


def positions(states: list[dict]) -> np.ndarray:
    """Per state, t / T: how far into its rollout it was cut (NaN where T is unknown)."""
    return np.array([s["t"] / s["T"] if s.get("T") else np.nan for s in states], dtype=float)
