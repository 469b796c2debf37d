"""An SVEB estimator from outside the package: every state of a problem gets the median of its
group's rewards (0.5 for an empty group). Fields of the dataclass are its parameters (-P key=value)."""

from dataclasses import dataclass

import numpy as np

from sveb.estimators.base import Estimator


@dataclass
class GroupMedian(Estimator):
    description = "median of the group's rollout rewards (the example plugin)"
    grid = {"empty": ["0.5", "0.0"]}        # `sveb ablate -e group-median` sweeps this by default

    empty: float = 0.5                      # the value when the group is empty

    def estimate(self, group, states):
        r = group.rewards                   # held-out: the state's own rollout is already left out
        return np.full(len(states), float(np.median(r)) if len(r) else self.empty)
