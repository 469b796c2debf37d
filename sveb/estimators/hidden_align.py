"""Hidden-Align as a value estimator (Hidden-Align, "Right Makes Might", Sec. 2's observation).

The paper finds that at the anchor token (the token just before the answer marker) the last-layer
hidden states of correct rollouts converge (cosine similarity ~0.84). Turned into a value estimator:

  u_j   = h_j[anchor_j] - m          anchor vector of group member j, m = mean anchor of the members
  c+    = sum_j r_j u_j / sum_j r_j,  c- = sum_j (1 - r_j) u_j / sum_j (1 - r_j)   (reward-weighted)
  q     = h_i[t - 1] - m             the state's hidden state at its prefix's last token
  D     = cos(q, c+) - cos(q, c-)
  V     = sigmoid(w0 + w1 D + w2 logit(p)),  p = (sum_j r_j + 1/2) / (n + 1)   (members' base rate)

The paper defines no V(s): this value is SVEB's construction from its observation.
(w0, w1, w2) is a logistic regression fitted on a `--split train` build (rollouts cut at 1/4, 1/2, 3/4
of their length, label = the rollout's reward, centroids without the rollout itself); without one, the
fixed fallback (0, FIXED_SLOPE, 1): the base rate moved by the similarity difference, slope not fitted
(calibration=auto falls back with a console line saying why, and diagnostics' `calibration` says so).
`-P similarity=false` is the ablation without D, calibrated the same way (w1 = 0; w0, w2 fitted on the
same cuts; fixed: V = p): what the similarity term adds over a calibrated base rate.
A state with t = 0, or a group without a correct or without an incorrect member, has D = 0 (fixed: V = p).
Held-out: the group lacks the state's own rollout, so neither the centroids nor p see its outcome.
`diagnostics()` reports the fitted weights, the paper's number (mean pairwise cosine similarity of the raw
anchor vectors among correct and among incorrect rollouts, every rollout of the build) and, per state,
whether its prefix reaches its own rollout's anchor token (t >= the marker's token index): `reaches_anchor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sveb.core.errors import EvalError
from sveb.core.models import resolve
from sveb.estimators.base import Context, Estimator, ProblemGroup, State, TrainBuild, as_context, group_for

FIXED_SLOPE = 4.0
CUTS = (0.25, 0.5, 0.75)        # where train-build rollouts are cut for the calibration fit


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0


def mean_pairwise_cos(vs: list[np.ndarray]) -> float:
    """Mean cosine similarity over distinct pairs (NaN below two vectors)."""
    if len(vs) < 2:
        return float("nan")
    x = np.stack(vs).astype(np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    s = x @ x.T
    n = len(vs)
    return float((s.sum() - np.trace(s)) / (n * (n - 1)))


def features(anchors: np.ndarray, rewards: np.ndarray, q: np.ndarray | None) -> tuple[float, float]:
    """(D, logit p) for a query against members' anchor vectors [n, d]; D = 0 where undefined."""
    n = len(rewards)
    p = (float(rewards.sum()) + 0.5) / (n + 1)
    lp = float(np.log(p / (1 - p)))
    pos, neg = float(rewards.sum()), float((1 - rewards).sum())
    if q is None or n == 0 or pos <= 0 or neg <= 0:
        return 0.0, lp
    m = anchors.mean(0)
    u = anchors - m
    c_pos, c_neg = (rewards @ u) / pos, ((1 - rewards) @ u) / neg
    return cos(q - m, c_pos) - cos(q - m, c_neg), lp


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> np.ndarray:
    """Weights w of P(y=1) = sigmoid(w0 + x @ w[1:]), lightly L2-regularised (soft labels allowed)."""
    from scipy.optimize import minimize
    X = np.column_stack([np.ones(len(x)), x])

    def loss(w):
        z = X @ w
        nll = np.mean(np.logaddexp(0, z) - y * z)
        return nll + l2 * float(w[1:] @ w[1:]), X.T @ (sigmoid(z) - y) / len(y) + np.r_[0, 2 * l2 * w[1:]]
    return minimize(loss, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B").x


def calibrate(x: np.ndarray, y: np.ndarray, similarity: bool = True) -> np.ndarray:
    """(w0, w1, w2) of V = sigmoid(w0 + w1 D + w2 logit p) fitted on rows x = [D, logit p]; without the
    similarity term (the ablation) the same fit on logit p alone, w1 = 0."""
    if similarity:
        return fit_logistic(x, y)
    w = fit_logistic(x[:, 1:], y)
    return np.array([w[0], 0.0, w[1]])


class AnchorFinder:
    """Response-token index of the answer marker's last occurrence, through the model's tokenizer; for a
    model without tokenizer files, the same relative character position (exact for character tokens)."""

    def __init__(self, model: str, marker: str):
        self.marker, self.tok, self.note = marker, None, ""
        try:
            from transformers import AutoTokenizer
            self.tok = AutoTokenizer.from_pretrained(resolve(model))
        except Exception as e:  # no tokenizer files (e.g. a test model): the proportional fallback
            self.tok = None
            self.note = (f"no tokenizer for {model} ({type(e).__name__}): anchors placed at the marker's "
                         f"relative character position")

    def __call__(self, ids: Sequence[int], text: str) -> int:
        T = len(ids)
        c = text.rfind(self.marker)
        if c < 0 or T == 0:
            return T  # no marker: the anchor is the last token
        if self.tok is None:
            return min(T, int(c * T / max(len(text), 1)))
        lo, hi = 0, T  # the first j whose decoded prefix ids[:j+1] reaches past character c
        while lo < hi:
            mid = (lo + hi) // 2
            if len(self.tok.decode(list(ids[: mid + 1]), skip_special_tokens=True)) > c:
                hi = mid
            else:
                lo = mid + 1
        return min(lo, T)


@dataclass
class HiddenAlign(Estimator):
    """marker: the answer marker (its token's predecessor is the anchor); calibration: auto (a `--split
    train` build of the model and domain if one exists, else fixed), fixed, or a build dir/fp prefix;
    layer: the hidden layer (-1 = last)."""
    description = ("SVEB's construction from Hidden-Align's observation (the paper defines no V(s)): similarity "
                   "to the correct vs incorrect anchor-token centroids, calibrated")
    grid = {"layer": ["-1", "-2", "-4"], "calibration": ["auto", "fixed"], "similarity": ["true", "false"]}

    marker: str = "\\boxed"
    calibration: str = "auto"
    layer: int = -1
    similarity: bool = True
    needs_hidden = True
    constructed = True

    def train_spec(self) -> tuple[str, bool] | None:
        """The calibration build: none when fixed; under auto the newest train build if one exists."""
        if self.calibration == "fixed":
            return None
        return ("", False) if self.calibration == "auto" else (self.calibration, True)

    def cache_key(self, bdir, manifest, ctx: Context | None = None) -> str:
        """The calibration build's content hash (new data invalidates stored scores), or "fixed"."""
        return ctx.train.key if ctx is not None and ctx.train is not None else "fixed"

    def prepare(self, build, ctx: Context | None = None) -> None:
        """Without a context (a test's fake build): no calibration build, as if none were found."""
        ctx = as_context(ctx)
        console, train = ctx.console, ctx.train
        self._anchor = AnchorFinder(build.manifest.model, self.marker)
        self._anchors: dict[tuple, np.ndarray] = {}
        self._anchor_at: dict[tuple, int] = {}
        self._reaches: dict[str, bool] = {}
        self._sims: dict[str, tuple[list[float], list[float]]] = {}
        self._notes = [self._anchor.note] if self._anchor.note else []
        self._w = np.array([0.0, FIXED_SLOPE if self.similarity else 0.0, 1.0])
        self._source = "fixed"
        if train is not None:
            self._w, n = self._fit(train, ctx)
            self._source = f"train build {train.bdir.name} ({n} cuts)"
        elif self.calibration == "auto":  # the fallback changes the values: say so
            self._source = "fixed (auto: no --split train build of this model and domain)"
            self._notes.append(f"no --split train build of {build.manifest.model} / {build.manifest.domain} "
                               f"under the root: fixed weights, not fitted")
        if console is not None:
            for note in self._notes:
                console.print(f"{self.name}: {note}")
            w = self._w
            console.print(f"{self.name}: V = sigmoid({w[0]:.3f} + {w[1]:.3f} D + {w[2]:.3f} logit p), "
                          f"weights from {self._source}")

    def _fit(self, tb: TrainBuild, ctx: Context) -> tuple[np.ndarray, int]:
        train = tb.data()
        provider = ctx.hidden.provider(self, train)  # the train build's hidden states (already disjoint: checked)
        X, y = [], []
        for pid in sorted(train.rollouts):
            group = group_for(train, pid, provider(pid, train.rollouts[pid]))
            for r in group.rollouts:
                others = group.without(r.rollout_idx)
                anchors, rewards = self._member_anchors(pid, others)
                h = group.hidden(r.rollout_idx)
                for f in CUTS:
                    t = int(f * len(h))
                    X.append(features(anchors, rewards, h[t - 1].astype(np.float64) if t >= 1 else None))
                    y.append(r.reward)
        if (self.similarity and sum(d != 0 for d, _ in X) < 4) or len(set(y)) < 2:
            raise _error(f"{self.name}: training build {tb.bdir} has too few usable cuts ({len(X)}) to calibrate; "
                         f"pass -P calibration=fixed")
        return calibrate(np.array(X), np.array(y), self.similarity), len(X)

    def _member_anchors(self, pid: str, group: ProblemGroup) -> tuple[np.ndarray, np.ndarray]:
        vs = []
        for r in group.rollouts:
            key = (pid, r.rollout_idx)
            if key not in self._anchors:
                h = group.hidden(r.rollout_idx)
                a = self._anchor(r.response_token_ids, r.response_text)
                self._anchors[key] = h[max(a - 1, 0)].astype(np.float64) if len(h) else None
            vs.append(self._anchors[key])
        keep = [i for i, v in enumerate(vs) if v is not None]
        rewards = np.array([group.rollouts[i].reward for i in keep], dtype=np.float64)
        return (np.stack([vs[i] for i in keep]) if keep else np.zeros((0, 1))), rewards

    def _diagnose(self, pid: str, group: ProblemGroup) -> None:
        everyone = ProblemGroup(group.problem, group.all_rollouts or group.rollouts, hidden_fn=group.hidden_fn)
        anchors, rewards = self._member_anchors(pid, everyone)
        self._sims[pid] = (mean_pairwise_cos([a for a, r in zip(anchors, rewards) if r >= 0.5]),
                           mean_pairwise_cos([a for a, r in zip(anchors, rewards) if r < 0.5]))

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        if getattr(self, "_w", None) is None:
            raise RuntimeError(f"{self.name}: call prepare(build data) before estimate()")
        pid = states[0].problem_id if states else ""
        if states and pid not in self._sims:
            self._diagnose(pid, group)
        anchors, rewards = self._member_anchors(pid, group)
        out = np.empty(len(states))
        for k, s in enumerate(states):
            h = group.hidden(s.rollout_idx)
            q = h[min(s.t, len(h)) - 1].astype(np.float64) if s.t >= 1 and len(h) and self.similarity else None
            d, lp = features(anchors, rewards, q)
            out[k] = float(sigmoid(self._w[0] + self._w[1] * d + self._w[2] * lp))
            self._reaches[s.state_id] = s.t >= self._anchor_index(pid, group.rollout(s.rollout_idx))
        return out

    def _anchor_index(self, pid: str, r) -> int:
        """Response tokens up to and including the rollout's anchor token (the marker's token index, >= 1)."""
        key = (pid, r.rollout_idx)
        if key not in self._anchor_at:
            self._anchor_at[key] = max(self._anchor(r.response_token_ids, r.response_text), 1)
        return self._anchor_at[key]

    def diagnostics(self) -> dict[str, object]:
        pos = [a for a, _ in self._sims.values() if a == a]
        neg = [b for _, b in self._sims.values() if b == b]
        return {"anchor_cos_correct": float(np.mean(pos)) if pos else float("nan"),
                "anchor_cos_incorrect": float(np.mean(neg)) if neg else float("nan"),
                "problems": len(self._sims), "calibration": self._source, "similarity": self.similarity,
                "weights": [round(float(x), 4) for x in self._w],
                "w_intercept": float(self._w[0]), "w_similarity": float(self._w[1]), "w_base_logit": float(self._w[2]),
                "notes": list(self._notes),
                "states_reaching_anchor": int(sum(self._reaches.values())),
                "states_before_anchor": int(len(self._reaches) - sum(self._reaches.values())),
                "reaches_anchor": dict(sorted(self._reaches.items()))}


def _error(msg: str) -> Exception:
    return EvalError(msg)
