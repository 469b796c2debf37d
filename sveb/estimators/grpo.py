"""GRPO's baseline: every state of a problem gets the group's mean reward."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean


@dataclass
class GroupMean(Estimator):
    description = "group mean of the G rollout rewards"
    role = "baseline"

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        return np.full(len(states), group_mean(group))
