"""MCS@k: mean of k independent continuations of the state itself.

It reads the state's extra draws only, never the reference ones, so its error
against the reference is honest sampling noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sveb.core.errors import EvalError
from sveb.estimators.base import Estimator, ProblemGroup, State


@dataclass
class MonteCarlo(Estimator):
    description = "mean of k independent continuations of the state (MCS@k, for scale)"
    role = "scale"
    reads_references = True                 # the evaluated build's extra draws: no other estimator gets them
    k: int = 1

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        out = np.empty(len(states))
        for i, s in enumerate(states):
            if len(s.extra_rewards) < self.k:
                raise EvalError(
                    f"{self.name} needs {self.k} extra continuations per state, the build has "
                    f"{len(s.extra_rewards)} (rebuild with --mc-extra {self.k})")
            out[i] = float(np.mean(s.extra_rewards[: self.k]))
        return out
