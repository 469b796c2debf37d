"""Decisions an estimate is used for, as neighbouring benchmarks score them. Pure numpy.

- auroc_own: AUROC of the estimate for the state's own rollout's final success (ProcessBench / PRMBench read
  threshold-free classification scores). The label is the rollout's actual outcome, not the reference, so no
  reference noise enters; it is meaningful under the held-out protocol only (in-group, the estimate may see the
  outcome it is scored on). Its ceiling is below 1: the outcome is a Bernoulli draw of the true value.
- sibling_top1: VinePPO's choice among siblings. Siblings are the states of one problem cut at the same stage of
  their rollouts (the same of SIBLING_BINS equal bins of t / T; SVEB cuts t uniformly per rollout, so equal t
  across rollouts almost never happens). Per set of at least two siblings whose references are not all equal:
  the share of the estimator's highest that are among the reference's highest (ties split); the chance rate of
  a random pick, |reference's highest| / |set|, beside it.
- drop_f1: value-drop localisation (ProcessBench's first error, defined by values, no human labels). On each
  rollout with at least two cut states in t order, the reference's first drop is the first step where it falls
  by at least DROP between consecutive cuts; the estimator's is its largest fall, if at least DROP. F1 is
  ProcessBench's: the harmonic mean of the accuracy on rollouts with a reference drop (the estimator's drop is at
  that step) and on rollouts without one (the estimator has none).
Neither top-1 nor drop F1 is corrected for the reference's noise: its noise makes some reference choices and
drops wrong, which pulls both towards chance for every estimator alike; compare estimators on the same states.
"""

from __future__ import annotations

import numpy as np

SIBLING_BINS = 2
DROP = 0.3


def auroc(score: np.ndarray, label: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties 1/2 (Mann-Whitney); NaN without both classes."""
    s, y = np.asarray(score, float), np.asarray(label, bool)
    pos, neg = s[y], s[~y]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    order = np.sort(neg)
    below = np.searchsorted(order, pos, "left")
    ties = np.searchsorted(order, pos, "right") - below
    return float((below + 0.5 * ties).sum() / (len(pos) * len(neg)))


def auroc_own(est: np.ndarray, own_reward: np.ndarray | None, protocol: str | None) -> float:
    """AUROC of the estimate for the own rollout's success (reward > 0.5); NaN unless the protocol is held-out
    and every state's own reward is known."""
    if protocol != "held-out" or own_reward is None:
        return float("nan")
    r = np.asarray(own_reward, float)
    return auroc(est, r > 0.5) if len(r) and np.isfinite(r).all() else float("nan")


def _sets(keys: list[tuple]) -> list[np.ndarray]:
    codes: dict = {}
    inv = np.array([codes.setdefault(k, len(codes)) for k in keys], int)
    return [np.flatnonzero(inv == c) for c in range(len(codes))]


def sibling_top1(est: np.ndarray, ref: np.ndarray, problems, pos: np.ndarray | None,
                 bins: int = SIBLING_BINS) -> tuple[float, float, int]:
    """(top-1 rate, chance rate, sets used): siblings are one problem's states in one bin of pos = t / T."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    if pos is None or len(est) == 0:
        return float("nan"), float("nan"), 0
    b = np.clip(np.floor(np.asarray(pos, float) * bins), 0, bins - 1)
    hits, chance = [], []
    for idx in _sets(list(zip(problems, b))):
        r, e = ref[idx], est[idx]
        if len(idx) < 2 or np.ptp(r) == 0:
            continue
        best_r, best_e = r == r.max(), e == e.max()
        hits.append((best_r & best_e).sum() / best_e.sum())
        chance.append(best_r.sum() / len(idx))
    if not hits:
        return float("nan"), float("nan"), 0
    return float(np.mean(hits)), float(np.mean(chance)), len(hits)


def drop_f1(est: np.ndarray, ref: np.ndarray, problems, rollouts, t, drop: float = DROP) -> tuple[float, int]:
    """(F1, rollouts used) of value-drop localisation; NaN when no rollout has two cuts, or either class is
    empty (F1 needs both accuracies)."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    if rollouts is None or t is None or len(est) == 0:
        return float("nan"), 0
    t = np.asarray(t, float)
    with_drop, without = [], []
    for idx in _sets(list(zip(problems, rollouts))):
        if len(idx) < 2:
            continue
        idx = idx[np.argsort(t[idx], kind="stable")]
        dr, de = np.diff(ref[idx]), np.diff(est[idx])
        fell = dr <= -drop + 1e-9  # references are k/n: 0.4 - 0.7 must count as a fall of 0.3
        first = int(np.argmax(fell)) if fell.any() else None
        largest = int(np.argmin(de)) if de.min() <= -drop + 1e-9 else None
        (with_drop if first is not None else without).append(largest == first)
    if not with_drop or not without:
        return float("nan"), len(with_drop) + len(without)
    a, b = float(np.mean(with_drop)), float(np.mean(without))
    return (2 * a * b / (a + b) if a + b > 0 else 0.0), len(with_drop) + len(without)
