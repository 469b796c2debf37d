"""What an estimate costs, beside how accurate it is. Pure functions over a build's rows.

- extra sampled tokens per state: tokens an estimator samples beyond the group's rollouts. MCS@k samples k
  continuations of each state. The build keeps their rewards, not their lengths, but the rest of the state's
  own rollout (T - t tokens) is one draw from the very same distribution: the same policy continued the same
  token prefix under the same sampling settings and budget (a continuation at t gets max_tokens - t). So
  k * mean(T - t) over the states is an unbiased estimate of MCS@k's mean tokens per state. A reference-scale
  estimator that reads k of the build's extra draws (`reads_references` with a `k`: mcs-eb-k, mcs-cv-k) costs
  what MCS@k costs. Group-based estimators sample nothing: 0.
- forward-pass tokens per state: a hidden-state estimator runs the policy over every rollout of the group
  (prompt + response tokens), shared by the group's states; a trained one also reads its training data.
- seconds per state: the estimator's own time on the values (`seconds` of the evaluation), per state.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MCS_TARGET = "sveb.estimators.mcs:MonteCarlo"
# The stages that sample a build, as its jobs time them (sveb.sample.jobs.stage_clock): its sampling cost
BUILD_STAGES = ("screening", "rollouts", "references")


def continuation_tokens(states: Iterable[dict]) -> float:
    """Mean tokens of one continuation of a state: the mean of T - t (the rest of each state's own rollout)."""
    rest = [s["T"] - s["t"] for s in states]
    return float(sum(rest) / len(rest)) if rest else float("nan")


def rollout_tokens(rollouts: dict[str, list[dict]]) -> int:
    """Tokens one forward pass over every rollout reads: prompt + response, summed."""
    return sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for rs in rollouts.values() for r in rs)


def draws_k(target: str, params: dict, reads_references: bool = False) -> bool:
    """Whether the estimator's `k` is a number of continuations per state: MCS@k's (default 1), or the k extra
    draws a reference-scale estimator reads (mcs-eb-k, mcs-cv-k)."""
    return target == MCS_TARGET or (reads_references is True and "k" in params)


def mcs_k(target: str, params: dict, reads_references: bool = False) -> int:
    """The number of continuations an estimator samples per state (draws_k's k), else 0."""
    return int(params.get("k", 1)) if draws_k(target, params, reads_references) else 0


def cost_figures(*, target: str, params: dict, needs_hidden: bool, states: list[dict],
                 rollouts: dict[str, list[dict]], seconds: float, prepare_seconds: float | None = None,
                 train_tokens: int | None = None, reads_references: bool = False) -> dict:
    """The cost columns of one estimator on one build. `train_tokens`: forward tokens of its training data
    (None: not trained); `prepare_seconds`: its prepare() time (training where it trains there)."""
    n = len(states)
    per = (lambda x: x / n) if n else (lambda x: float("nan"))
    forward = rollout_tokens(rollouts) if needs_hidden else 0
    return {
        "extra_tokens_per_state": (mcs_k(target, params, reads_references) * continuation_tokens(states) if n
                                   else float("nan")),
        "forward_tokens_per_state": per(forward + (train_tokens or 0)),
        "train_tokens": train_tokens,
        "seconds": seconds,
        "seconds_per_state": per(seconds) if seconds is not None and math.isfinite(seconds) else float("nan"),
        "prepare_seconds": prepare_seconds,
    }
