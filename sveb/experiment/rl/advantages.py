"""Per-token advantages from values at cut states (pure numpy).

Token j of a response is drawn at the state of its first j tokens, so its baseline is the value of the last cut
c <= j; tokens before the first cut take `before` (the group's held-out mean). A = R - baseline.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def token_baseline(T: int, cuts: Sequence[tuple[int, float]], before: float) -> np.ndarray:
    """The baseline under each of T response tokens: the value of the last cut at or before it, else `before`."""
    out = np.full(T, float(before))
    for t, v in sorted(cuts):
        if not 0 <= t <= T:
            raise ValueError(f"cut at t={t} outside a response of {T} tokens")
        out[t:] = v
    return out


def token_advantages(reward: float, T: int, cuts: Sequence[tuple[int, float]], before: float) -> np.ndarray:
    """R - V(last cut before the token), per response token."""
    return float(reward) - token_baseline(T, cuts, before)


def held_out_mean(rewards: Sequence[float], i: int) -> float:
    """Mean reward of every rollout but the i-th (0.5 when there is no other: no information)."""
    r = np.asarray(rewards, dtype=float)
    return float((r.sum() - r[i]) / (len(r) - 1)) if len(r) > 1 else 0.5
