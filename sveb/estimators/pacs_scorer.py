"""PACS's trainable policy (sveb.estimators.pacs): pi_theta is the policy model with its top `train_layers`
decoder layers and final norm trainable; it gives every response token's log-ratio to pi_ref (the frozen
policy), trains with PACS's loss one group per optimizer step, and resumes from checkpoints as ppo's critic."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from sveb.core.config import fingerprint
from sveb.estimators.pacs_loss import pacs_group
from sveb.lm.critic import Critic, Seq, pad_right, token_batches

LOGIT_TOKENS = 2048  # tokens per forward through the LM head (their logits are tokens x vocab floats)
GRAD_BYTES = 2 << 30  # a group's fp32 head outputs (tokens x vocab) autograd may hold for one backward pass


@dataclass(frozen=True)
class PacsConfig:
    model: str
    beta: float = 1.0
    lr: float = 1e-4
    epochs: int = 1
    batch: int = 1              # groups per optimizer step
    grad_accum: int = 1
    train_layers: int = 2
    seed: int = 0
    weight_decay: float = 0.01
    weight: str = "balanced"    # the loss's class weights (pacs_loss.WEIGHTS)
    temperature: float = 1.0    # log pi = log_softmax(logits / temperature), pi_theta's and pi_ref's


# SVEB's loss before `weight` and `temperature` existed: its checkpoints keep their fingerprint (and group order)
LEGACY = {"weight": "none", "temperature": 1.0}


@dataclass(frozen=True)
class PSeq(Seq):
    targets: tuple[int, ...] = ()   # the response tokens (the log-probabilities are theirs)
    group: str = ""


def make_pseq(key: tuple, group: str, prompt, response, reward: float) -> PSeq:
    return PSeq(key, tuple(prompt) + tuple(response[:-1]), len(prompt), len(response), float(reward),
                tuple(response), group)


class PacsScorer(Critic):
    """The policy with its top layers trainable; fit() trains them with PACS's loss (resume as the critic)."""

    def _load_body(self, path: str) -> nn.Module:
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
        try:
            lm = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype),
                                                      attn_implementation="sdpa")
        finally:
            hf_logging.enable_progress_bar()
        head = lm.get_output_embeddings()
        # log-probabilities in fp32 whatever the body's dtype: the trained norm hands the head fp32, and
        # bf16 logits round a log-ratio's tiny differences away (one fp32 copy of the head: vocab x d)
        self.head_weight = head.weight.detach().to(self.device, torch.float32)
        self.head_bias = None if head.bias is None else head.bias.detach().to(self.device, torch.float32)
        self._ref: dict[tuple, torch.Tensor] = {}
        return lm.get_decoder().to(self.device).eval()

    def use_features(self, fn) -> None:
        if (fn is None) != (self.features_fn is None):
            self._ref.clear()  # reference log-probs computed from the other source's features
        super().use_features(fn)

    def fingerprint(self, data_key: str) -> str:
        """As the critic's, the config without the fields at their LEGACY values (SVEB's former loss keeps its fp)."""
        from dataclasses import asdict
        cfg = {k: v for k, v in asdict(self.cfg).items() if not (k in LEGACY and v == LEGACY[k])}
        shared = self.features_fn is not None
        source = ("shared-pass", getattr(self.features_fn, "dtype", None)) if shared else "own-pass"
        return fingerprint("critic", data_key, cfg, source, self.device, self.dtype)

    def _logprobs(self, seqs: Sequence[PSeq]) -> list[torch.Tensor]:
        """log pi(o_t | q, o_<t) at the config's temperature of each response token, [T] per rollout (with grad
        where enabled)."""
        out = {}
        for batch in token_batches(seqs, LOGIT_TOKENS, self.device):
            with self._amp():
                h = self.model.top(pad_right(self.features(batch)))
            # the batch's response positions through the head in one product: per rollout, ~30-row products
            # ran the head at a fifth of the speed (docs/timings.md)
            rows = torch.cat([h[i, s.prompt_len - 1: s.prompt_len - 1 + s.T] for i, s in enumerate(batch)]).float()
            logits = nn.functional.linear(rows, self.head_weight, self.head_bias) / self.cfg.temperature
            tgt = torch.tensor([t for s in batch for t in s.targets], device=logits.device)[:, None]
            lp = torch.log_softmax(logits, -1).gather(1, tgt)[:, 0]
            for s, part in zip(batch, torch.split(lp, [s.T for s in batch])):
                out[s.key] = part
        return [out[s.key] for s in seqs]

    @contextlib.contextmanager
    def _initial(self):
        """The untrained policy (pi_ref) for the duration, whatever is loaded now."""
        trainable = self.model.trainable()
        saved = {k: v.clone() for k, v in trainable.state_dict().items()}
        self.model.reset()
        try:
            yield
        finally:
            trainable.load_state_dict(saved)

    @torch.no_grad()
    def reference(self, seqs: Sequence[PSeq]) -> list[torch.Tensor]:
        T = self.cfg.temperature
        missing = [s for s in seqs if (s.key, T) not in self._ref]
        if missing:
            with self._initial():
                for s, lp in zip(missing, self._logprobs(missing)):
                    self._ref[s.key, T] = lp
        return [self._ref[s.key, T] for s in seqs]

    @torch.no_grad()
    def prefix_scores(self, seqs: Sequence[PSeq]) -> dict[tuple, np.ndarray]:
        """{key: [r(0), r(1), ..., r(T)]}, r(t) = beta * sum of the first t log-ratios."""
        ref = self.reference(seqs)
        out = {}
        for s, lp, lr in zip(seqs, self._logprobs(seqs), ref):
            d = (lp - lr).double().cpu().numpy() * self.cfg.beta
            out[s.key] = np.concatenate([[0.0], np.cumsum(d)])
        self.release_features()
        return out

    def _before_training(self, seqs: Sequence[Seq]) -> None:
        self.reference(seqs)

    def _steps(self, seqs: Sequence[PSeq], rng: np.random.Generator) -> list[list[PSeq]]:
        groups: dict[str, list[PSeq]] = {}
        for s in seqs:
            groups.setdefault(s.group, []).append(s)
        names = [g for g in sorted(groups) if len(groups[g]) >= 2]  # RLOO needs another rollout
        order = [names[i] for i in rng.permutation(len(names))]
        per = self.cfg.batch * self.cfg.grad_accum
        return [[s for g in order[a:a + per] for s in groups[g]] for a in range(0, len(order), per)]

    def _backward(self, step: Sequence[PSeq]) -> tuple[float, int]:
        """Eq. 8 over the step's groups: the log-ratio sums x_i give, by pacs_group, each rollout's coefficient
        c_i = dL/dx_i, and sum_i c_i x_i is backpropagated. A group whose head outputs fit GRAD_BYTES keeps one
        forward's graph for it; a larger one takes x from a no-grad pass, then backpropagates one rollout at a
        time (one forward more, its memory one rollout's). The step's loss is the mean of its groups' (the
        authors: one group per micro-batch)."""
        groups: dict[str, list[PSeq]] = {}
        for s in step:
            groups.setdefault(s.group, []).append(s)
        total = 0.0
        for members in groups.values():
            ref = self.reference(members)
            whole = sum(s.T for s in members) * self.head_weight.shape[0] * 4 <= GRAD_BYTES
            with contextlib.nullcontext() if whole else torch.no_grad():
                xs = [(lp - lr).sum() for lp, lr in zip(self._logprobs(members), ref)]
            _, loss, c = pacs_group([float(x.detach()) for x in xs], [s.reward for s in members], self.cfg.beta,
                                    self.cfg.weight == "balanced")
            total += loss
            if whole:
                (sum(float(ci) * x for ci, x in zip(c, xs)) / len(groups)).backward()
                continue
            for s, ci, lr in zip(members, c, ref):
                (lp,) = self._logprobs([s])
                (float(ci) * (lp - lr).sum() / len(groups)).backward()
        return total, len(groups)

