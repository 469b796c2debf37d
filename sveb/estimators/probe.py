"""A value probe on the policy's own hidden states (after ReProbe and POISE): logistic regression from what
is known at a state, without sampling, trained on a disjoint `--split train` build.

Inputs (sveb.estimators.probe_features): the hidden state of `layer` at the prefix (pooled over the last
`window` tokens or the last one), the next-token entropy there and over the window (the LM head on the
same shared pass), the position t, and the group's leave-one-out mean reward (the state's own rollout is
never read beyond t, its reward never). Regimes: `outcome` (every prefix of a train rollout labelled with
that rollout's reward; `prefixes` per rollout) or `mc` (the train build's states with their Monte-Carlo
references, binomial likelihood). `relative`: features centred on the group's, prediction an offset on
the group mean's logit. The fit (sveb.estimators.probe_fit) picks its L2 strength by problem-grouped CV
and is cached under the train build, keyed by the train build's content hash.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sveb.core.config import BuildConfig, derive_seed, fingerprint
from sveb.core.errors import EvalError, UsageError
from sveb.estimators import params_of
from sveb.estimators.base import Context, Estimator, ProblemGroup, State, need_context
from sveb.estimators.probe_features import Tracks, state_row
from sveb.estimators.probe_fit import fit_cv


def chosen_prefixes(T: int, k: int, seed: int) -> list[int]:
    """k distinct seeded positions in 0..T-1 (all of them if k = 0 or k >= T)."""
    if k <= 0 or k >= T:
        return list(range(T))
    return sorted(np.random.default_rng(seed).choice(T, k, replace=False).tolist())


@dataclass
class Probe(Estimator):
    """regime (outcome | mc), relative (0 | 1), offset (1: logit of the group mean as the offset, so the L2
    penalty shrinks towards grpo; 0: only an input; relative implies 1), layer, pool (last | mean), window,
    prefixes (outcome: prefixes per train rollout, 0 = all), max_train (train rows used, 0 = all: the learning
    curve), pca (hidden components, 0 = none), cs (the L2 grid), folds, seed, train_build ("" = found under the
    root)."""
    description = ("logistic value probe on the policy's hidden states, entropy, t and the group's mean, trained on "
                   "a disjoint problem set (labels: each prefix's rollout reward)")
    grid = {"relative": ["0", "1"], "layer": ["-1", "-4", "-8"], "pool": ["last", "mean"],
            "max_train": ["250", "1000", "4000", "0"]}

    regime: str = "outcome"
    relative: bool = True
    offset: bool = True
    layer: int = -1
    pool: str = "last"
    window: int = 8
    prefixes: int = 16
    max_train: int = 0
    pca: int = 64
    cs: str = "0.0001,0.001,0.01,0.1,1,10"
    folds: int = 5
    seed: int = 0
    train_build: str = ""
    needs_training = True
    train_split = True

    def cache_key(self, bdir: Path, manifest: dict, ctx: Context | None = None) -> str:
        """The train build's content hash: a new training build invalidates stored scores."""
        return ctx.train.key if ctx is not None and ctx.train is not None else ""

    def _grid(self) -> list[float]:
        try:
            cs = [float(c) for c in self.cs.split(",") if c.strip()]
        except ValueError:
            cs = []
        if not cs or any(c <= 0 for c in cs):
            raise UsageError(f"-P cs={self.cs}: expected comma-separated positive numbers")
        return cs

    def prepare(self, build, ctx: Context | None = None) -> None:
        if self.regime not in ("outcome", "mc"):
            raise UsageError(f"-P regime={self.regime}: expected outcome or mc")
        if self.pool not in ("last", "mean"):
            raise UsageError(f"-P pool={self.pool}: expected last or mean")
        if self.window < 1 or self.folds < 2 or self.prefixes < 0 or self.max_train < 0 or self.pca < 0:
            raise UsageError(f"{self.name}: need window >= 1, folds >= 2, prefixes, max_train, pca >= 0")
        self._grid()
        ctx = need_context(self, ctx)
        self._train, self._trainb, self._ctx = (ctx.train.bdir, ctx.train.problems), ctx.train, ctx
        self._data, self._console, self._model, self._memo = build, ctx.console, None, (None, set(), {})
        self._max_tokens = BuildConfig.from_manifest(build.manifest).sampling.max_tokens
        self._diag: dict = {}

    def _row(self, own, t, others, others_rewards):
        h, s, logit = state_row(own, t, others, others_rewards, pool=self.pool, window=self.window,
                                max_tokens=self._max_tokens, relative=self.relative)
        return h, s, logit if self._uses_offset() else 0.0

    def _uses_offset(self) -> bool:
        return self.offset or self.relative

    def design(self, tb: Path, pids: list[str], tracks: Tracks) -> dict[str, np.ndarray]:
        """The training rows of the regime: hidden block, scalars, offset, y, n, problem ids."""
        data = self._trainb.data(references=self.regime == "mc")  # tb: the context's train build
        H, S, off, y, n, g = [], [], [], [], [], []
        salt = self._trainb.key
        for pid in pids:
            rows = data.rollouts.get(pid, [])
            reward = {r["rollout_idx"]: float(r["reward"]) for r in rows}
            if self.regime == "outcome":
                lengths = ((r["rollout_idx"], len(r["response_token_ids"])) for r in rows)
                items = [(i, t, reward[i], 1.0) for i, T in lengths
                         for t in chosen_prefixes(T, self.prefixes, derive_seed(self.seed, salt, pid, i))]
            else:
                items = []
                for s in (s for s in data.states if s["problem_id"] == pid):
                    ref = data.references[s["state_id"]]
                    draws = list(ref["mc_rewards"]) + list(ref["extra_rewards"])
                    if draws:
                        items.append((s["rollout_idx"], s["t"], float(np.mean(draws)), float(len(draws))))
            tr = tracks.group(pid, rows, {t for _, t, _, _ in items})
            for i, t, label, trials in items:
                others = [j for j in tr if j != i]
                h, s, o = self._row(tr[i].prefix(t), t, [tr[j] for j in others], [reward[j] for j in others])
                H.append(h), S.append(s), off.append(o), y.append(label), n.append(trials), g.append(pid)
        if not H:
            raise EvalError(f"{self.name}: the train build {tb} gives no training rows for regime {self.regime}")
        out = {"H": np.array(H), "S": np.array(S), "off": np.array(off), "y": np.array(y), "n": np.array(n),
               "groups": np.array(g)}
        if self.max_train and self.max_train < len(y):  # nested subsamples: the learning curve's points
            rng = np.random.default_rng(derive_seed(self.seed, salt, "rows"))
            keep = np.sort(rng.permutation(len(y))[:self.max_train])
            out = {k: v[keep] for k, v in out.items()}
        return out

    def _tracks(self, bdir: Path) -> Tracks:
        return Tracks(self._ctx.hidden.states(bdir), self._data.manifest.model, self.layer, self.window)

    def model(self):
        """The fitted probe: from the train build's cache, else fitted now and cached there."""
        if self._model is not None:
            return self._model
        tb, pids = self._train
        tracks = self._tracks(tb)
        params = {k: v for k, v in params_of(self).items() if k != "train_build"}  # where it is: the hash
        key = fingerprint("probe", self._trainb.key, pids, params, self._data.manifest.model, tracks.dtype)
        path = tb / "probes" / f"{key}.pkl"
        if path.exists():
            blob = pickle.loads(path.read_bytes())
        else:
            t0 = time.perf_counter()
            d = self.design(tb, pids, tracks)
            m = fit_cv(d["H"], d["S"], d["off"], d["y"], d["n"], d["groups"], self._grid(), self.folds, self.pca,
                       self.seed, self._uses_offset())
            blob = {"model": m, "rows": int(len(d["y"])), "problems": len(set(d["groups"])),
                    "train_s": time.perf_counter() - t0}
            self._ctx.write(path, pickle.dumps(blob))
        self._model = blob["model"]
        self._diag = {"C": self._model.C, "cv_logloss": self._model.cv_loss[self._model.C],
                      "train_rows": blob["rows"], "train_problems": blob["problems"], "train_s": blob["train_s"]}
        return self._model

    def _group_tracks(self, pid: str, ts: set[int]):
        """The group's tracks, with the entropies the build's states of `pid` and `ts` read (a state outside the
        build's, e.g. a test's, computes its own)."""
        memo_pid, memo_ts, tracks = self._memo
        if memo_pid != pid or not ts <= memo_ts:  # one problem at a time: estimate_all goes problem by problem
            ts = ts | {s["t"] for s in self._data.states if s["problem_id"] == pid}
            tracks = self._tracks(self._data.bdir).group(pid, self._data.rollouts[pid], ts)
            self._memo = (pid, ts, tracks)
        return tracks

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        if getattr(self, "_data", None) is None:
            raise RuntimeError(f"{self.name}: call prepare(build data) before estimate()")
        model = self.model()
        tr = self._group_tracks(states[0].problem_id, {s.t for s in states}) if states else {}
        H, S, off = [], [], []
        for s in states:
            others = [r for r in group.rollouts if r.rollout_idx != s.rollout_idx]  # never the own outcome
            h, x, o = self._row(tr[s.rollout_idx].prefix(s.t), s.t, [tr[r.rollout_idx] for r in others],
                                [r.reward for r in others])
            H.append(h), S.append(x), off.append(o)
        # one state at a time: a product's rounding depends on the batch's shape, and a state's value must not
        return np.array([float(np.clip(model.predict(h[None], x[None], np.array([o]))[0], 0.0, 1.0))
                         for h, x, o in zip(H, S, off)])

    def diagnostics(self) -> dict[str, object]:
        return dict(self._diag)
