"""PPO's critic as a state-value estimator (Hista/Numca paper, Sec. 4.2), in its two regimes.

ppo-1: the critic at PPO's first epoch, which never saw the problems it values: trained on the
       rollouts of a disjoint problem set (a `--split train` build of the same model and domain).
ppo-n: the critic after the first epoch: trained on the benchmark's own rollouts for `epochs` epochs.

The critic (sveb.lm.critic) is trained once per build, not per problem, as PPO trains one critic over its
data; checkpoints live under the training build (`<build>/critics/<fp>/epoch-K/`) and are reused.
Values are the head's outputs clipped to [0, 1] (the estimator contract: a value is a probability).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sveb.core.config import fingerprint
from sveb.core.errors import UsageError
from sveb.core.models import resolve
from sveb.estimators.base import Context, Estimator, ProblemGroup, State, need_context
from sveb.lm.checkpoints import build_key, resident
from sveb.lm.critic import Critic, CriticConfig, Seq, gae_targets, make_seq

__all__ = ["PPO1", "PPON", "gae_targets"]


def _seq(build_fp: str, row: dict, through_end: bool = False) -> Seq:
    key = (build_fp, row["problem_id"], row["rollout_idx"])
    # through the end: another key, so the critic's feature cache never serves the shorter sequence's features
    return make_seq(key + ("through end",) if through_end else key, row["prompt_token_ids"],
                    row["response_token_ids"], row["reward"], through_end)


@dataclass
class _PPO(Estimator):
    critic_model: str = ""      # "" = the build's policy model
    lam: float = 1.0            # GAE lambda (paper: 1.0 and 0.95; Fig. 2 uses 1.0)
    gamma: float = 1.0
    lr: float = 3e-4
    epochs: int = 2
    batch: int = 8              # rollouts per micro-batch
    grad_accum: int = 1
    train_layers: int = 2       # top decoder layers trained (+ final norm + head); the rest frozen
    seed: int = 0
    needs_training = True

    def cache_key(self, bdir: Path, manifest: dict, ctx: Context | None = None) -> str:
        return "clipped"  # scores stored before values were clipped are recomputed

    def critic_config(self, data) -> CriticConfig:
        return CriticConfig(model=self.critic_model or data.manifest.model, lam=self.lam, gamma=self.gamma,
                            lr=self.lr, epochs=self.epochs, batch=self.batch, grad_accum=self.grad_accum,
                            train_layers=self.train_layers, seed=self.seed)

    def prepare(self, data, ctx: Context | None = None) -> None:
        """Validate and remember the build; critics are trained on first use (the protocol decides which)."""
        if self.epochs < 1 or self.batch < 1 or self.grad_accum < 1:
            raise UsageError(f"{self.name}: epochs, batch and grad_accum must be >= 1")
        ctx = need_context(self, ctx)
        self._data, self._console, self._hidden = data, ctx.console, ctx.hidden
        self._values: dict[object, dict[str, float]] = {}
        self._shared = ctx.hidden.shared(-(self.train_layers + 1))
        self._shared.add(data.manifest.build_fp, data.bdir, data.rollouts)
        self._check(data, ctx)

    def _check(self, data, ctx: Context) -> None:
        pass

    def _get_critic(self) -> Critic:
        """The process's resident critic body (fit() resets its trained part, so results do not depend on
        what it trained before); not kept on the estimator, so loading pacs's model drops it."""
        cfg = self.critic_config(self._data)
        path = resolve(cfg.model)
        critic = resident(("critic", path, cfg.train_layers), lambda: Critic(cfg, path))
        critic.cfg = cfg
        # the policy's own pass has these layers; any other model runs its own
        critic.use_features(self._shared if self._hidden.is_policy(path) else None)
        return critic

    def _value_states(self, critic: Critic, states: list[dict]) -> dict[str, float]:
        data, bfp = self._data, self._data.manifest.build_fp
        rows = {(r["problem_id"], r["rollout_idx"]): r for pid in {s["problem_id"] for s in states}
                for r in data.rollouts[pid]}
        ends: dict[tuple, bool] = {}  # (problem, rollout) -> whether a state holds its whole response (t = T)
        for s in states:
            k = (s["problem_id"], s["rollout_idx"])
            ends[k] = ends.get(k, False) or s["t"] >= len(rows[k]["response_token_ids"])
        seqs = {k: _seq(bfp, rows[k], through_end=ends[k]) for k in sorted(ends)}
        vals = critic.values(list(seqs.values()))
        return {s["state_id"]: float(np.clip(vals[seqs[s["problem_id"], s["rollout_idx"]].key][s["t"]], 0.0, 1.0))
                for s in states}

    def _mode(self, state: State, held_out: bool):
        return "all"

    def _fit(self, mode) -> dict[str, float]:
        raise NotImplementedError

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        if getattr(self, "_data", None) is None:
            raise RuntimeError(f"{self.name}: call prepare(build data) before estimate()")
        members = {r.rollout_idx for r in group.rollouts}
        out = np.empty(len(states))
        for i, s in enumerate(states):
            mode = self._mode(s, s.rollout_idx not in members)
            if mode not in self._values:
                self._values[mode] = self._fit(mode)
            out[i] = self._values[mode][s.state_id]
        return out


@dataclass
class PPO1(_PPO):
    """PPO-1: trained on a disjoint problem set (`-P train_build=<dir|fp prefix>`, else found under the
    same root), evaluated on the benchmark's states. Unaffected by the protocol: the critic never saw
    any benchmark rollout, so in-group and held-out give the same values."""
    description = "PPO critic trained on a disjoint problem set"
    train_build: str = ""
    train_split = True

    def cache_key(self, bdir: Path, manifest: dict, ctx: Context | None = None) -> str:
        """The training build this run uses (its content), so a new training build invalidates stored scores."""
        return ctx.train.key + "-clipped" if ctx is not None and ctx.train is not None else ""

    def _check(self, data, ctx: Context) -> None:
        self._train = ctx.train
        self._train_bdir, self._train_pids = ctx.train.bdir, ctx.train.problems

    def _fit(self, mode) -> dict[str, float]:
        tb = self._train_bdir
        bfp = self._train.build_fp
        rows = self._train.data().rollouts
        self._shared.add(bfp, tb, rows)
        seqs = [_seq(bfp, r) for pid in sorted(rows) for r in rows[pid]]
        critic = self._get_critic()
        critic.fit(seqs, tb / "critics", fingerprint(self._train.key, self._train_pids), self._console)
        return self._value_states(critic, self._data.states)


@dataclass
class PPON(_PPO):
    """PPO-N: trained on the benchmark's own rollouts (all problems, one critic), `epochs` epochs.

    in-group: one critic trained on every rollout values every state.
    held-out: the state's own rollout must be unseen, so rollouts are split into `folds` folds by
    rollout_idx % folds; a state of a fold-k rollout is valued by the critic trained on every other
    fold (2 folds: each critic sees half of each group, G/2 rollouts, vs GRPO's G-1 under held-out).
    Total training cost ~ one full critic; the frozen features are shared by all critics."""
    description = "PPO critic trained on the benchmark's own rollouts"
    folds: int = 2
    trains_on_benchmark = True  # in-group, its own-outcome dependence lives in the weights

    def _check(self, data, ctx: Context) -> None:
        if self.folds < 2:
            raise UsageError(f"{self.name}: folds={self.folds}: need at least 2")

    def _mode(self, state: State, held_out: bool):
        return state.rollout_idx % self.folds if held_out else "all"

    def _fit(self, mode) -> dict[str, float]:
        data = self._data
        bfp = data.manifest.build_fp
        used = lambda idx: mode == "all" or idx % self.folds != mode  # noqa: E731
        seqs = [_seq(bfp, r) for pid in sorted(data.rollouts) for r in data.rollouts[pid] if used(r["rollout_idx"])]
        key = fingerprint(build_key(data.bdir), sorted(data.rollouts),
                          "all" if mode == "all" else f"without fold {mode} of {self.folds}")
        critic = self._get_critic()
        critic.fit(seqs, data.bdir / "critics", key, self._console)
        states = [s for s in data.states if mode == "all" or s["rollout_idx"] % self.folds == mode]
        return self._value_states(critic, states)
