"""The value baseline of an RL step: an SVEB estimator at the cut states, under the held-out protocol.

Each state is valued from `group.held_out(state)`: the state's own rollout is absent from the group, its reward is
NaN and its tokens stop at the prefix, so a rollout's own outcome never enters its own baseline. `none` is the
batch's held-out mean (every other rollout of the step), with no cuts. A noise level adds N(0, noise^2) to every
value, seeded: a baseline made worse on purpose.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sveb.core.errors import UsageError
from sveb.estimators.base import ProblemGroup, State

NONE = "none"


def estimator_for(name: str, params: dict[str, str] | None = None):
    """The registry's estimator for a baseline name; one line for those the loop cannot serve yet."""
    from sveb.estimators import entry, make
    e = entry(name)
    why = [w for w, on in (("hidden states", e.needs_hidden), ("a trained model", e.needs_training),
                           ("a train build", e.train_split)) if on]
    if why:
        raise UsageError(f"--baseline {name}: needs {' and '.join(why)}, which the RL loop does not provide yet "
                         f"(usable: none, grpo, mcs-1..mcs-4 and plugins that read only the group)")
    return make(name, params or {})


def extra_draws(est) -> int:
    """Fresh continuations each state needs (MCS@k reads k of them); 0 for the rest."""
    from sveb.estimators.mcs import MonteCarlo
    return est.k if isinstance(est, MonteCarlo) else 0


@dataclass
class Baseline:
    name: str = "grpo"
    params: dict = field(default_factory=dict)
    noise: float = 0.0

    def __post_init__(self):
        self.est = None if self.name == NONE else estimator_for(self.name, self.params)

    @property
    def cuts(self) -> bool:
        return self.est is not None

    @property
    def extra(self) -> int:
        return 0 if self.est is None else extra_draws(self.est)

    def values(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        """One held-out value per state (each from the group less the state's own rollout)."""
        return np.array([float(self.est.estimate(group.held_out(s), [s])[0]) for s in states], dtype=float)

    def jitter(self, values: np.ndarray, seed: int) -> np.ndarray:
        if not self.noise:
            return values
        rng = random.Random(seed)
        return values + np.array([rng.gauss(0.0, self.noise) for _ in values])
