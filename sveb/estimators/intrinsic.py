"""Intrinsic signals of the policy at a prefix, the cheap baselines any value method should beat:
- `logprob`: the mean log-probability of the prefix's response tokens under the policy (at the build's sampling
  temperature: the distribution they were drawn from); raw read-out exp(mean), the tokens' geometric-mean probability;
- `entropy`: the mean next-token entropy over the prefix: the distributions that drew its t tokens and the one at
  the cut (t + 1 of them); raw read-out exp(-mean);
- `intrinsic`: a logistic combination of both with the cut's position t / max_tokens, fitted on the train build
  (calibrated only). The position is over the sampling budget, not the rollout's own length T: T is known only
  once the rollout ends, and its length tells of its outcome (a loop runs to the budget and fails).
At t = 0 no response token is read: the mean log-probability is 0 (nothing improbable seen yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sveb.core.config import BuildConfig
from sveb.core.errors import UsageError
from sveb.estimators.base import Context
from sveb.estimators.lm_signal import Prefix, SignalEstimator


def log_softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, np.float64) / max(temperature, 1e-6)
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def token_logprobs(logits: np.ndarray, ids, start: int, temperature: float = 1.0) -> np.ndarray:
    """log p(ids[j] | ids[:j]) for j >= start, from a causal model's logits [len(ids), V] over ids."""
    lp = log_softmax(logits, temperature)
    j = np.arange(start, len(ids))
    return lp[j - 1, np.asarray(ids)[start:]] if len(j) else np.zeros(0)


def entropies(logits: np.ndarray, start: int, temperature: float = 1.0) -> np.ndarray:
    """Next-token entropy (nats) at positions start-1 .. end: the distributions of ids[start:] and the next one."""
    lp = log_softmax(logits[start - 1:], temperature)
    return -(np.exp(lp) * lp).sum(-1)


def mean_or_zero(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else 0.0


def temperature_of(manifest: dict) -> float:
    """The build's sampling temperature; 1 for greedy sampling (0), where no distribution drew the tokens."""
    t = BuildConfig.from_manifest(manifest).sampling.temperature
    return float(t) if t > 0 else 1.0


_STATS: dict[tuple, tuple[float, float]] = {}  # (model, dtype, temperature, prompt length, ids) -> the two means
_STATS_MAX = 200_000  # two floats and the ids each: bounded all the same


@dataclass
class _PolicySignal(SignalEstimator):
    readout: str = "calibrated"
    train_split = True
    reads_tokens = True  # the policy's log-probs of the response's token ids

    def load(self, build, ctx: Context) -> None:
        from sveb.estimators.lm_read import compute_dtype, load_model, resolved
        from sveb.lm.checkpoints import resident
        path = resolved(build.manifest.model)
        self._key = ("intrinsic", path, compute_dtype())
        self._lm = resident(self._key, lambda: load_model(path))
        self._temperature = temperature_of(build.manifest)

    def stats(self, p: Prefix) -> tuple[float, float]:
        """(mean log-probability, mean entropy) of a prefix; one pass serves logprob, entropy and intrinsic."""
        from sveb.estimators.lm_read import token_stats
        ids = p.prompt_ids + p.response_ids
        key = (*self._key, self._temperature, len(p.prompt_ids), ids)
        if key not in _STATS:
            if len(_STATS) >= _STATS_MAX:
                _STATS.clear()
            lp, ent = token_stats(self._lm, ids, len(p.prompt_ids), self._temperature)
            _STATS[key] = (mean_or_zero(lp), mean_or_zero(ent))
        return _STATS[key]


@dataclass
class LogProb(_PolicySignal):
    """readout (calibrated | raw: exp of the mean), C (the calibration's L2 strength 1/C), train_build."""
    description = "the prefix's mean token log-probability under the policy, calibrated on the train build"

    def signals(self, p: Prefix) -> np.ndarray:
        return np.array([self.stats(p)[0]])

    def raw(self, s: np.ndarray) -> float:
        return float(np.exp(s[0]))


@dataclass
class Entropy(_PolicySignal):
    """readout (calibrated | raw: exp of minus the mean), C, train_build."""
    description = "the policy's mean next-token entropy over the prefix, calibrated on the train build"

    def signals(self, p: Prefix) -> np.ndarray:
        return np.array([self.stats(p)[1]])

    def raw(self, s: np.ndarray) -> float:
        return float(np.exp(-s[0]))


@dataclass
class Intrinsic(_PolicySignal):
    """readout (calibrated only), C, train_build."""
    description = ("logistic combination of the prefix's mean log-probability, mean entropy and position "
                   "t / max_tokens, fitted on the train build")

    def load(self, build, ctx: Context) -> None:
        if self.readout != "calibrated":
            raise UsageError(f"-P readout={self.readout}: intrinsic is a fitted combination; only calibrated")
        super().load(build, ctx)

    def signals(self, p: Prefix) -> np.ndarray:
        lp, ent = self.stats(p)
        return np.array([lp, ent, len(p.response_ids) / max(p.max_tokens, 1)])
