"""The shared shape of the estimators that read a model at the prefix alone (judge, prm, logprob, entropy,
intrinsic): per state a small vector of signals from one forward pass over what the state holds (the problem,
the prompt's ids, the first t response ids, their text), then a read-out: `raw` (the estimator's own map of its
signals to [0, 1]) or `calibrated` (a logistic map fitted on the train build's states and their Monte-Carlo
references: sveb.estimators.calibrate). Nothing past the cut and no reward of the group is read, so the values
are held-out safe by construction, and the same under both protocols.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sveb.core.config import BuildConfig
from sveb.core.errors import UsageError
from sveb.estimators.base import Context, Estimator, ProblemGroup, State, need_context
from sveb.estimators.calibrate import Calibration, fit, labels

READOUTS = ("raw", "calibrated")


@dataclass(frozen=True)
class Prefix:
    """What a state holds: its problem (question), the policy's prompt ids, its first t response ids and text."""
    problem: dict
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    text: str
    max_tokens: int


@dataclass
class SignalEstimator(Estimator):
    """Subclasses set `readout`, `train_build`, `C` as fields and write `load(build, ctx)`, `signals(prefix)` and
    `raw(signals)`."""
    loads_model = True  # a forward pass of the policy (or the judge's, the PRM's model): values follow the dtype
    readout: str = "raw"
    C: float = 1.0
    train_build: str = ""

    def train_spec(self) -> tuple[str, bool] | None:
        """The train build only for the calibrated read-out (then required)."""
        return (str(self.train_build or ""), True) if self.readout == "calibrated" else None

    def cache_key(self, bdir, manifest: dict, ctx: Context | None = None) -> str:
        return ctx.train.key if ctx is not None and ctx.train is not None and self.readout == "calibrated" else ""

    def load(self, build, ctx: Context) -> None:
        """Load the model(s) and check the parameters."""

    def signals(self, p: Prefix) -> np.ndarray:
        raise NotImplementedError

    def raw(self, s: np.ndarray) -> float:
        raise NotImplementedError

    def prepare(self, build, ctx: Context | None = None) -> None:
        if self.readout not in READOUTS:
            raise UsageError(f"-P readout={self.readout}: expected one of {', '.join(READOUTS)}")
        if self.C <= 0:
            raise UsageError(f"-P C={self.C}: expected a positive number")
        if self.readout == "calibrated":
            ctx = need_context(self, ctx)
        else:
            ctx = ctx if isinstance(ctx, Context) else Context()
        self._memo: dict[tuple, np.ndarray] = {}
        self._cal: Calibration | None = None
        self._max_tokens = BuildConfig.from_manifest(build.manifest).sampling.max_tokens
        self._diag: dict = {}
        self.load(build, ctx)
        if self.readout == "calibrated":
            if ctx.train is None:
                raise UsageError(f"{self.name or type(self).__name__}: readout=calibrated needs a --split train build "
                                 "(-P train_build=<dir>), or -P readout=raw")
            t0 = time.perf_counter()
            X, y, n = self.train_rows(ctx.train.data(references=True))
            self._cal = fit(X, y, n, self.C)
            self._diag = {"train states": len(X), "train seconds": round(time.perf_counter() - t0, 1),
                          "slope": [round(float(c), 4) for c in self._cal.coef]}

    def train_rows(self, data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(signals, mean reward, draws) of every train state with a reference."""
        mt = BuildConfig.from_manifest(data.manifest).sampling.max_tokens
        rows = {(pid, r["rollout_idx"]): r for pid, rs in data.rollouts.items() for r in rs}
        X, y, n = [], [], []
        for s in data.states:
            ref = data.references.get(s["state_id"])
            if ref is None:
                continue
            r = rows[(s["problem_id"], s["rollout_idx"])]
            p = Prefix(data.problems[s["problem_id"]], tuple(r["prompt_token_ids"]),
                       tuple(r["response_token_ids"][: s["t"]]), s["prefix_text"], mt)
            X.append(self._signals(p))
            yi, ni = labels(ref)
            y.append(yi)
            n.append(ni)
        return np.array(X, np.float64).reshape(len(X), -1), np.array(y), np.array(n)

    def _signals(self, p: Prefix) -> np.ndarray:
        key = (p.problem.get("problem_id", p.problem.get("question")), p.prompt_ids, p.response_ids)
        if key not in self._memo:
            self._memo[key] = np.atleast_1d(np.asarray(self.signals(p), np.float64))
        return self._memo[key]

    def value(self, s: np.ndarray) -> float:
        v = float(self._cal.predict(s)[0]) if self._cal is not None else float(self.raw(s))
        return float(np.clip(v, 0.0, 1.0))  # a non-finite value stays so: the evaluator refuses it

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        out = np.empty(len(states))
        for j, st in enumerate(states):
            r = group.rollout(st.rollout_idx)  # held-out: cut at the prefix; only the first t ids are read
            p = Prefix(group.problem, tuple(r.prompt_token_ids), tuple(r.response_token_ids[: st.t]),
                       st.prefix_text, self._max_tokens)
            out[j] = self.value(self._signals(p))
        return out

    def diagnostics(self) -> dict[str, object]:
        return dict(self._diag)
