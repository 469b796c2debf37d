"""The policy's training step, pure torch: which parameters train, per-token log-probs of a sampled response, the
REINFORCE loss with per-token advantages given from outside, and the spread of the per-rollout gradients.

One update per sampled batch (on-policy): PPO's ratio is then 1 and its clip never binds, so PPO-clip with one
epoch is this REINFORCE step; more epochs would multiply the update, the dearest part on a CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sample:
    """One rollout to learn from: its prompt and response token ids and one advantage per response token."""
    prompt: tuple[int, ...]
    response: tuple[int, ...]
    advantages: np.ndarray


def layers_of(model):
    """The decoder layers of a causal LM (Llama-style: model.model.layers)."""
    body = getattr(model, "model", model)
    layers = getattr(body, "layers", None)
    if layers is None:
        raise TypeError(f"{type(model).__name__}: no decoder layers at .model.layers")
    return body, layers


def trainable_names(model, train_layers: int) -> list[str]:
    """Names of the parameters a step updates: every one (train_layers 0), else the top train_layers decoder layers
    and the final norm. The output head stays frozen when it is tied to the input embeddings (SmolLM2's is):
    training it would move every layer's input."""
    if train_layers <= 0:
        return [n for n, _ in model.named_parameters()]
    body, layers = layers_of(model)
    if train_layers > len(layers):
        raise ValueError(f"--train-layers {train_layers}: the model has {len(layers)} layers")
    prefix = next(n for n, m in model.named_modules() if m is layers)
    first = len(layers) - train_layers
    keep = [f"{prefix}.{i}." for i in range(first, len(layers))]
    norm = next((n for n, m in model.named_modules() if m is getattr(body, "norm", None)), None)
    if norm:
        keep.append(norm + ".")
    return [n for n, _ in model.named_parameters() if any(n.startswith(k) for k in keep)]


def select(model, train_layers: int) -> list:
    """Set requires_grad on exactly the trainable parameters; return them in named_parameters order."""
    names = set(trainable_names(model, train_layers))
    out = []
    for n, p in model.named_parameters():
        p.requires_grad_(n in names)
        if n in names:
            out.append(p)
    return out


def response_logprobs(model, prompt: Sequence[int], response: Sequence[int]):
    """log pi(response_t | prompt, response_<t) for every response token, a [T] fp32 tensor."""
    import torch
    ids = torch.tensor([list(prompt) + list(response)], dtype=torch.long, device=model.device)
    P, T = len(prompt), len(response)
    logits = model(input_ids=ids).logits[0, P - 1:P + T - 1].float()
    return torch.log_softmax(logits, -1).gather(1, ids[0, P:P + T, None])[:, 0]


def reinforce_loss(logp, advantages, scale: float):
    """-sum_t A_t log pi_t / scale: a constant scale (the token budget), so no rollout's length weighs its tokens."""
    import torch
    return -(torch.as_tensor(advantages, dtype=logp.dtype, device=logp.device) * logp).sum() / scale


def grad_spread(sq_norms: float, mean_grad_sq: float, n: int) -> float:
    """Trace of the per-rollout gradients' covariance: mean ||g_i||^2 - ||mean g||^2 (the batch gradient's
    variance is this / n)."""
    return max(0.0, sq_norms / n - mean_grad_sq) if n else 0.0


class PolicyUpdate:
    """AdamW on the selected parameters of `model` (fp32 master weights; `amp` bf16 autocast for the passes)."""

    def __init__(self, model, train_layers: int = 2, lr: float = 1e-5, weight_decay: float = 0.0,
                 max_grad_norm: float = 1.0, scale: float = 1.0, amp: str | None = None):
        import torch
        self.model, self.scale, self.max_grad_norm, self.amp = model, scale, max_grad_norm, amp
        self.params = select(model, train_layers)
        self.opt = torch.optim.AdamW(self.params, lr=lr, weight_decay=weight_decay)

    def _autocast(self):
        import torch
        if self.amp == "bfloat16":
            return torch.autocast(self.model.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def state_dict(self) -> dict:
        names = set(trainable_names_of(self.model, self.params))
        return {"params": {n: p.detach().clone() for n, p in self.model.named_parameters() if n in names},
                "opt": self.opt.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        copy_params(self.model, state["params"])
        self.opt.load_state_dict(state["opt"])

    def step(self, samples: Sequence[Sample]) -> dict:
        """One optimizer step on the mean of the per-rollout gradients; rollouts whose advantages are all 0 add a
        zero gradient without a pass. Returns loss, grad_var (grad_spread), grad_norm (before clipping), n."""
        import torch
        self.model.train()
        acc = [torch.zeros_like(p) for p in self.params]
        sq, loss_sum = 0.0, 0.0
        for s in samples:
            if len(s.response) == 0 or not np.any(s.advantages):
                continue
            for p in self.params:
                p.grad = None
            with self._autocast():
                logp = response_logprobs(self.model, s.prompt, s.response)
            loss = reinforce_loss(logp, s.advantages, self.scale)
            loss.backward()
            loss_sum += float(loss.detach())
            for a, p in zip(acc, self.params):
                if p.grad is not None:
                    g = p.grad.detach().float()
                    sq += float((g * g).sum())
                    a.add_(g)
        n = len(samples)
        mean_sq = 0.0
        for a, p in zip(acc, self.params):
            a.div_(max(n, 1))
            mean_sq += float((a * a).sum())
            p.grad = a.to(p.dtype)
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)) if self.max_grad_norm \
            else mean_sq ** 0.5
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.model.eval()
        return {"loss": loss_sum / max(n, 1), "grad_var": grad_spread(sq, mean_sq, n), "grad_norm": norm, "n": n}


def copy_params(model, params: dict) -> None:
    """Copy a checkpoint's trained parameters (name -> tensor) into `model`; a name or shape the model does not have
    is a ValueError naming it (a checkpoint of another model)."""
    import torch
    own = dict(model.named_parameters())
    for n, v in params.items():
        if n not in own:
            raise ValueError(f"parameter {n} is not in the model")
        if tuple(own[n].shape) != tuple(v.shape):
            raise ValueError(f"parameter {n} has shape {tuple(v.shape)}, the model's {tuple(own[n].shape)}")
    with torch.no_grad():
        for n, v in params.items():
            own[n].copy_(v)


def trainable_names_of(model, params: Sequence) -> list[str]:
    ids = {id(p) for p in params}
    return [n for n, p in model.named_parameters() if id(p) in ids]
