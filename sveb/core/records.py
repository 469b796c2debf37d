"""The data types of the read side: a build in memory (`BuildData`) and what an estimator receives from it, one
problem's group of rollouts (`ProblemGroup`, `Rollout`) and the states to value (`State`).

`sveb.store.builds` fills them from the store; `sveb.estimators.base` hands them on to estimators (plugins import them
from there). This module imports nothing of sveb but the typed manifest a BuildData carries (sveb.core.manifest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sveb.core.manifest import Manifest


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
    extra_rewards: tuple[float, ...] = ()   # independent continuations: () unless the estimator reads references


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


class GroupHidden:
    """One group's hidden states: called with a rollout index, its [T, d] response-position states; `prompt()`
    the [P, d] states of the prompt the group's rollouts share, `start()` the index of the token that starts the
    response (the token ending `<|im_start|>assistant`). Both are computed on first use (Hista reads them)."""

    def __init__(self, arrays: dict[int, np.ndarray], prompt: Callable[[], np.ndarray] | None = None,
                 start: Callable[[], int] | None = None):
        self.arrays, self._prompt_fn, self._start_fn = arrays, prompt, start
        self._prompt: np.ndarray | None = None
        self._start: int | None = None

    def __call__(self, rollout_idx: int) -> np.ndarray:
        return self.arrays[rollout_idx]

    def prompt(self) -> np.ndarray | None:
        if self._prompt is None and self._prompt_fn is not None:
            self._prompt = self._prompt_fn()
        return self._prompt

    def start(self) -> int | None:
        if self._start is None and self._start_fn is not None:
            self._start = int(self._start_fn())
        return self._start


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

    def without(self, rollout_idx: int) -> ProblemGroup:
        """The group less one member; that rollout stays reachable by `rollout()` but its reward is absent (NaN)."""
        kept = tuple(r for r in self.rollouts if r.rollout_idx != rollout_idx)
        everyone = tuple(replace(r, reward=float("nan")) if r.rollout_idx == rollout_idx else r
                         for r in self.all_rollouts or self.rollouts)
        return replace(self, rollouts=kept, all_rollouts=everyone)

    def held_out(self, state: State) -> ProblemGroup:
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


@dataclass
class BuildData:
    bdir: Path
    manifest: Manifest  # a plain dict given (a test's, a plugin's) is typed on the way in
    problems: dict[str, dict]
    rollouts: dict[str, list[dict]]
    states: list[dict]
    references: dict[str, dict] = field(default_factory=dict)  # the evaluator's alone: estimators get public()
    extras: dict[str, tuple[float, ...]] = field(default_factory=dict)  # independent draws (MCS@k baselines)

    def __post_init__(self):
        self.manifest = Manifest.of(self.manifest)

    def public(self, extra_draws: bool = False) -> BuildData:
        """What an estimator receives: no reference draws or values, and the extra independent draws only with
        `extra_draws` (a declared reference-scale estimator: sveb.estimators.base.view_for)."""
        return replace(self, references={}, extras=dict(self.extras) if extra_draws else {})


def group_for(data: BuildData, pid: str, hidden_fn: HiddenFn | None = None) -> ProblemGroup:
    """One problem's whole group of rollouts (no protocol applied), with its hidden-state source."""
    rolls = tuple(Rollout(r["rollout_idx"], tuple(r["prompt_token_ids"]), tuple(r["response_token_ids"]),
                          r["response_text"], float(r["reward"])) for r in data.rollouts[pid])
    return ProblemGroup(data.problems[pid], rolls, rolls, hidden_fn)
