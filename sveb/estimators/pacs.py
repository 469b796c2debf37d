"""PACS's implicit critic as a state-value estimator (PACS, Sec. 3.4, eq. 6-8).

PACS scores a response by the policy itself: r(o) = beta * sum_t [log pi_theta(o_t | q, o_<t) -
log pi_ref(o_t | q, o_<t)] (eq. 7), RLOO-centred in its group: psi_i = r_i - mean_{j != i} r_j (eq. 6),
and trains pi_theta with the cross-entropy of sigma(psi_i) against the final reward R_i (eq. 8); the loss, with
the authors' class-balanced weights (`-P weight=balanced`, their default) or without (`none`), is
sveb.estimators.pacs_loss.pacs_group. Log-probabilities are taken at `logprob_temperature` (default: the build's
sampling temperature, as the authors take them at the rollout temperature).

As a value estimator: pi_ref is the build's policy model, pi_theta the same model with the top
`train_layers` decoder layers and the final norm trained (the layers ppo-1 trains; the LM head stays
frozen, it is tied to the input embeddings) with eq. 8 on the rollouts of a disjoint `--split train`
build, one group per optimizer step. A state (prefix of t response tokens of rollout i) is valued

  psi_i(t) = r_i(t) - mean_{j != i, j in group} r_j(min(t, T_j)),   r(t) = beta * sum_{u < t} log-ratio,

the baseline taken over the other rollouts' prefixes of the same length (SVEB's construction; at t >= T_i
`-P final_baseline=full` takes the others' full sums, the authors' sequence-level psi: pacs_loss.prefix_psi).
pi_ref is the build's policy, at training and at read-out (docs/estimators.md#pacs). PACS defines no V(s); the value
is SVEB's construction from its signal psi (`-P value=...`):
  calibrated (default): V = sigma(logit p + psi_i(t)), p = the mean reward of the group's rollouts other
      than i (held-out: the group received, which lacks i), clipped to [1/(2n), 1 - 1/(2n)] for n such
      rollouts (half a rollout either way; 1/2 when n = 0). psi is read as a log-odds shift of the state
      relative to its group, added to the problem's leave-one-out log-odds: at t = 0 psi = 0 and V = p.
  sigmoid: V = sigma(psi_i(t)), PACS's training target as it stands. Its RLOO baseline centres it at 1/2
      whatever the problem's success rate, so most of its error is a level offset.
A state's own reward is never read (calibrated reads only the other members'), so its outcome cannot leak.
Checkpoints and resume as ppo's critic (sveb.lm.critic): `<train build>/critics/<fp>/epoch-K/`. The trainable
policy (its log-probabilities, training step and read-out): pacs_scorer.py.
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
from sveb.estimators.pacs_loss import (  # noqa: F401
    FINAL_BASELINES,
    VALUES,
    WEIGHTS,
    base_rate,
    logprob_temperature,
    pacs_value,
    prefix_psi,
    read_lengths,
    rloo_coefficients,
)
from sveb.estimators.pacs_scorer import PacsConfig, PacsScorer, make_pseq
from sveb.lm.checkpoints import resident

# The last build's prefix scores: they never read the group's rewards, so both protocols share them
_SCORED: dict[tuple, dict] = {}


@dataclass
class PACS(Estimator):
    """beta (1, the paper's); lr, epochs, batch (groups per step), grad_accum, train_layers, seed: the
    training; weight: balanced (the authors' class-balanced BCE) or none; logprob_temperature (None = the
    build's sampling temperature); policy_model ("" = the build's model); train_build (found under the root if
    ""); final_baseline: full (at t >= T the others' full sums) or truncated (their same-length prefixes);
    value: calibrated (sigma(logit p + psi), p the group's leave-one-out success rate) or sigmoid (sigma(psi))."""
    description = ("SVEB's construction from PACS's signal (PACS defines no V(s)): sigma(logit of the group's "
                   "leave-one-out success rate + the policy's RLOO-centred log-ratio), trained on a disjoint "
                   "problem set")
    grid = {"beta": ["0.1", "0.5", "1", "2", "10"], "lr": ["3e-5", "3e-4"]}

    beta: float = 1.0
    lr: float = 1e-4
    epochs: int = 1
    batch: int = 1
    grad_accum: int = 1
    train_layers: int = 2
    seed: int = 0
    policy_model: str = ""
    train_build: str = ""
    value: str = "calibrated"
    weight: str = "balanced"
    logprob_temperature: float | None = None
    final_baseline: str = "full"
    needs_training = True
    train_split = True
    constructed = True

    def __post_init__(self):
        if self.weight is None:   # `-P weight=none` arrives as None (sveb.estimators.params)
            self.weight = "none"

    def cache_key(self, bdir: Path, manifest: dict, ctx: Context | None = None) -> str:
        """The train build's content hash: a new training build invalidates stored scores."""
        return ctx.train.key if ctx is not None and ctx.train is not None else ""

    def prepare(self, build, ctx: Context | None = None) -> None:
        if self.epochs < 0 or self.batch < 1 or self.grad_accum < 1:
            raise UsageError(f"{self.name}: epochs must be >= 0, batch and grad_accum >= 1")
        if self.value not in VALUES:
            raise UsageError(f"-P value={self.value}: {self.name}'s value is one of {', '.join(VALUES)}")
        for key, val, allowed in (("weight", self.weight, WEIGHTS),
                                  ("final_baseline", self.final_baseline, FINAL_BASELINES)):
            if val not in allowed:
                raise UsageError(f"-P {key}={val}: {self.name}'s {key} is one of {', '.join(allowed)}")
        ctx = need_context(self, ctx)
        train = ctx.train
        self._temperature, note = logprob_temperature(self.logprob_temperature, build.manifest, train.manifest)
        if note:
            ctx.print(f"[yellow]{self.name}: {note}[/]")
        self._train, self._train_build, self._hidden = (train.bdir, train.problems), train, ctx.hidden
        self._data, self._console, self._scores = build, ctx.console, None

    def _scorer(self, builds: list[tuple[str, Path, dict]]) -> PacsScorer:
        """The loaded scorer; its frozen features come from the builds' shared hidden-state pass
        (sveb.lm.hidden) when the policy is the build's model, as ppo's critic's do."""
        cfg = PacsConfig(self.policy_model or self._data.manifest.model, self.beta, self.lr, self.epochs,
                         self.batch, self.grad_accum, self.train_layers, self.seed,
                         weight=self.weight, temperature=self._temperature)
        path = resolve(cfg.model)
        scorer = resident(("pacs", path, cfg.train_layers), lambda: PacsScorer(cfg, path))
        scorer.cfg = cfg
        fn = None
        if self._hidden.is_policy(path):
            fn = self._hidden.shared(-(cfg.train_layers + 1))
            for fp, bdir, rows in builds:
                fn.add(fp, bdir, rows)
        scorer.use_features(fn)
        return scorer

    def _fit_and_score(self) -> dict[tuple, np.ndarray]:
        tb, pids = self._train
        tfp = self._train_build.build_fp
        rows = self._train_build.data().rollouts
        seqs = [make_pseq((tfp, r["problem_id"], r["rollout_idx"]), r["problem_id"], r["prompt_token_ids"],
                          r["response_token_ids"], r["reward"]) for pid in sorted(rows) for r in rows[pid]]
        data, bfp = self._data, self._data.manifest.build_fp
        scorer = self._scorer([(tfp, tb, rows), (bfp, data.bdir, data.rollouts)])
        if self.epochs:
            scorer.fit(seqs, tb / "critics", fingerprint("pacs", self._train_build.key, pids), self._console)
        else:
            scorer.model.reset()
        # each rollout's log-ratios only as far as its group's states read them (the key carries the length:
        # the scorer caches features and reference log-probs by key); past it NaN, which no state reads
        out, bench = {}, []
        # the states by problem, gathered once (a scan per problem grew as problems x states)
        cuts: dict[str, list] = {}
        for s in data.states:
            cuts.setdefault(s["problem_id"], []).append((s["rollout_idx"], s["t"]))
        for pid in sorted(data.rollouts):
            T = {r["rollout_idx"]: len(r["response_token_ids"]) for r in data.rollouts[pid]}
            # under `full`, which reads at least what `truncated` does: both share these scores (_SCORED)
            read = read_lengths(T, cuts.get(pid, []))
            for r in data.rollouts[pid]:
                i = r["rollout_idx"]
                out[pid, i] = np.r_[0.0, np.full(T[i], np.nan)]
                if read[i]:
                    bench.append(make_pseq((bfp, pid, i, read[i]), pid, r["prompt_token_ids"],
                                           r["response_token_ids"][: read[i]], r["reward"]))
        for k, v in scorer.prefix_scores(bench).items():
            out[k[1], k[2]][: len(v)] = v
        return out

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        if getattr(self, "_data", None) is None:
            raise RuntimeError(f"{self.name}: call prepare(build data) before estimate()")
        if self._scores is None:
            from dataclasses import astuple, replace
            key = (self._data.manifest.build_fp, self._train_build.key, tuple(self._train[1]),
                   astuple(replace(self, value="", final_baseline="")))  # nor on how V is made of them
            if key not in _SCORED:
                _SCORED.clear()
                _SCORED[key] = self._fit_and_score()
            self._scores = _SCORED[key]
        empty = np.zeros(1)
        out = np.empty(len(states))
        for k, s in enumerate(states):
            own = self._scores.get((s.problem_id, s.rollout_idx), empty)
            base = [self._scores.get((s.problem_id, r.rollout_idx), empty) for r in group.rollouts
                    if r.rollout_idx != s.rollout_idx]
            psi = prefix_psi(own, base, s.t, self.final_baseline)
            if not np.isfinite(psi):  # a log-ratio past what read_lengths computed: not a state of the build
                raise RuntimeError(f"{self.name}: state {s.state_id} reads log-ratios that were not computed")
            others = [r.reward for r in group.rollouts if r.rollout_idx != s.rollout_idx]
            out[k] = pacs_value(psi, others, self.value)
        return out
