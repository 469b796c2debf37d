"""What every estimator sees: one problem's group of rollouts and the states to value.

An estimator never sees reference rewards. The protocol is applied by the caller:
under `held-out` the group passed in lacks the state's own rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class Rollout:
    rollout_idx: int
    prompt_token_ids: tuple[int, ...]
    response_token_ids: tuple[int, ...]
    response_text: str
    reward: float


@dataclass(frozen=True)
class State:
    state_id: str
    problem_id: str
    rollout_idx: int
    t: int                                  # response tokens in the prefix
    prefix_text: str                        # decoded first t response tokens
    extra_rewards: tuple[float, ...] = ()   # independent continuations (MCS@k baselines only)


# hidden(rollout_idx) -> [T, d] float array of response-position hidden states
HiddenFn = Callable[[int], np.ndarray]


@dataclass(frozen=True)
class ProblemGroup:
    problem: dict[str, Any]
    rollouts: tuple[Rollout, ...]                        # the group members
    all_rollouts: tuple[Rollout, ...] = ()               # every rollout of the problem
    hidden_fn: HiddenFn | None = field(default=None, compare=False)

    @property
    def rewards(self) -> np.ndarray:
        return np.array([r.reward for r in self.rollouts], dtype=np.float64)

    def rollout(self, rollout_idx: int) -> Rollout:
        """Any rollout of the problem, member or not (a held-out state's own rollout)."""
        for r in self.all_rollouts or self.rollouts:
            if r.rollout_idx == rollout_idx:
                return r
        raise KeyError(rollout_idx)

    def hidden(self, rollout_idx: int) -> np.ndarray:
        """Last-layer hidden states at the response positions of a rollout, [T, d]."""
        if self.hidden_fn is None:
            raise RuntimeError("this estimator needs hidden states, but none were provided")
        return self.hidden_fn(rollout_idx)

    def without(self, rollout_idx: int) -> "ProblemGroup":
        kept = tuple(r for r in self.rollouts if r.rollout_idx != rollout_idx)
        return replace(self, rollouts=kept, all_rollouts=self.all_rollouts or self.rollouts)


class Estimator(Protocol):
    name: str
    needs_hidden: bool

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray: ...


def group_mean(group: ProblemGroup) -> float:
    """Mean reward of the group; 0.5 for an empty group (no information)."""
    r = group.rewards
    return float(r.mean()) if len(r) else 0.5
