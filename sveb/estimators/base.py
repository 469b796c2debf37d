"""What every estimator sees, and the contract the evaluator holds it to.

An estimator never sees reference rewards. The protocol is applied by the caller:
under `held-out` the group passed in lacks the state's own rollout.

An estimator is a @dataclass subclass of `Estimator` whose fields are its parameters
(`-P key=value` on the CLI). The evaluator calls, in order: `cache_key(bdir, manifest)` (part of the
stored scores' fingerprint), `prepare(build, console)` once per build, `estimate(group, states)`
once per problem (held-out: once per state), then `diagnostics()`. Only `estimate` must be written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Sequence

import numpy as np

# The data types an estimator receives live with the read side (sveb.core.records); plugins import them from here.
from sveb.core.records import BuildData, HiddenFn, PrefixHidden, ProblemGroup, Rollout, State, hidden_source

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["BuildData", "Estimator", "HiddenFn", "PrefixHidden", "ProblemGroup", "Rollout", "State", "group_mean",
           "hidden_source"]


class Estimator:
    """Base of every estimator (subclass it as a @dataclass; its fields are the parameters).

    Class-level settings (not parameters): `needs_hidden` (the group carries hidden states of the
    layer `self.layer`), `trains_on_benchmark` (its dependence on a state's own outcome lives in its
    weights, so the own-outcome share is not measurable in-group).
    """

    name: str = ""                          # the registry name, set by sveb.estimators.make
    needs_hidden: ClassVar[bool] = False
    trains_on_benchmark: ClassVar[bool] = False
    layer: int = -1                         # hidden layer read when needs_hidden (a field where tunable)

    def cache_key(self, bdir: Path, manifest: dict) -> str:
        """What besides the build and the parameters decides the values (e.g. a training build's name)."""
        return ""

    def prepare(self, build: "BuildData", console: "Console | None" = None) -> None:
        """Called once per build before any estimate (validate, find training data, load a model)."""

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        """One value in [0, 1] per state, from the group's rollouts (their rewards) and the states."""
        raise NotImplementedError(f"{type(self).__name__}.estimate")

    def diagnostics(self) -> dict[str, object]:
        """Per-build numbers worth printing beside the scores (after every estimate of a run)."""
        return {}


def group_mean(group: ProblemGroup) -> float:
    """Mean reward of the group; 0.5 for an empty group (no information)."""
    r = group.rewards
    return float(r.mean()) if len(r) else 0.5
