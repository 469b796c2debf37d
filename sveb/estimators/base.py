"""What every estimator sees, and the contract the evaluator holds it to.

An estimator never sees reference rewards. The protocol is applied by the caller:
under `held-out` the group passed in lacks the state's own rollout.

An estimator is a @dataclass subclass of `Estimator` whose fields are its parameters
(`-P key=value` on the CLI). The evaluator calls, in order: `cache_key(bdir, manifest)` (part of the
stored scores' fingerprint), `prepare(build, console)` once per build, `estimate(group, states)`
once per problem (held-out: once per state), then `diagnostics()`. Only `estimate` must be written.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

import numpy as np

if TYPE_CHECKING:
    from rich.console import Console

    from sveb.builds import BuildData


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
class PrefixHidden:
    """A hidden-state source that stops one rollout at its first t positions (a held-out state's own rollout).
    `source` is the shared source behind it, so a memo keyed on the source survives per-state subgroups."""
    source: HiddenFn
    own: int
    t: int

    def __call__(self, rollout_idx: int) -> np.ndarray:
        h = self.source(rollout_idx)
        return h[: self.t] if rollout_idx == self.own else h


def hidden_source(fn: HiddenFn | None) -> HiddenFn | None:
    """The shared source behind a (possibly per-state) hidden-state function."""
    return fn.source if isinstance(fn, PrefixHidden) else fn


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
        """The group less one member; that rollout stays reachable by `rollout()` but its reward is absent (NaN)."""
        kept = tuple(r for r in self.rollouts if r.rollout_idx != rollout_idx)
        everyone = tuple(replace(r, reward=float("nan")) if r.rollout_idx == rollout_idx else r
                         for r in self.all_rollouts or self.rollouts)
        return replace(self, rollouts=kept, all_rollouts=everyone)

    def held_out(self, state: "State") -> "ProblemGroup":
        """What a held-out estimate of `state` receives, by construction: the group less the state's own rollout,
        whose reward is absent (NaN) and whose tokens, text and hidden states stop at the prefix (t tokens), so
        neither its outcome nor its future can be read, only the prefix the state is."""
        own, t = state.rollout_idx, state.t
        cut = tuple(replace(r, response_token_ids=r.response_token_ids[:t], response_text=state.prefix_text,
                            reward=float("nan")) if r.rollout_idx == own else r
                    for r in self.all_rollouts or self.rollouts)
        hidden_fn = None if self.hidden_fn is None else PrefixHidden(self.hidden_fn, own, t)
        return replace(self, rollouts=tuple(r for r in self.rollouts if r.rollout_idx != own), all_rollouts=cut,
                       hidden_fn=hidden_fn)


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
