"""The critic's model: an LM body with a zero-initialised linear value head whose top `train_layers` decoder
layers (and final norm) train while the bottom stays frozen, and the body's loading (sveb.lm.critic trains it)."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from sveb.core.errors import UsageError


@contextlib.contextmanager
def _swapped(body: nn.Module, layers, norm: nn.Module):
    """Run the body's own forward (rotary, causal mask) over a slice of its layers."""
    old_layers, old_norm = body.layers, body.norm
    body.layers, body.norm = nn.ModuleList(layers), norm
    try:
        yield body
    finally:
        body.layers, body.norm = old_layers, old_norm


class ValueModel(nn.Module):
    def __init__(self, body: nn.Module, train_layers: int):
        super().__init__()
        if not (hasattr(body, "layers") and hasattr(body, "norm")):
            raise UsageError(f"critic body {type(body).__name__} has no .layers/.norm (need a Llama/Qwen/Mistral-style "
                             f"model)")
        n = len(body.layers)
        if not 0 <= train_layers <= n:
            raise UsageError(f"train_layers={train_layers}: the critic body has {n} layers")
        self.body, self.n_train, self.split = body, train_layers, n - train_layers
        self.head = nn.Linear(body.config.hidden_size, 1, device=next(body.parameters()).device)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        body.requires_grad_(False)
        for p in self.trainable().parameters():
            p.data = p.data.float()     # fp32 master weights even over a bf16 body
            p.requires_grad_(True)
        self._init = {k: v.clone() for k, v in self.trainable().state_dict().items()}

    def trainable(self) -> nn.ModuleDict:
        mods: dict[str, nn.Module] = {"head": self.head}
        if self.n_train:
            mods["upper"] = self.body.layers[self.split:]
            mods["norm"] = self.body.norm
        return nn.ModuleDict(mods)

    def reset(self) -> None:
        self.trainable().load_state_dict(self._init)

    def lower(self, ids: torch.Tensor) -> torch.Tensor:
        """Frozen part: input of the first trained layer ([B, L, d]); the final hidden state if none."""
        norm = nn.Identity() if self.n_train else self.body.norm
        with _swapped(self.body, self.body.layers[: self.split], norm) as b:
            return b(input_ids=ids, use_cache=False).last_hidden_state

    def top(self, feats: torch.Tensor) -> torch.Tensor:
        if not self.n_train:
            return feats
        with _swapped(self.body, self.body.layers[self.split:], self.body.norm) as b:
            return b(inputs_embeds=feats, use_cache=False).last_hidden_state

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.head(self.top(feats)).squeeze(-1).float()


def default_dtype(device: str) -> str:
    """A critic body's dtype, picked as the hidden pass's and vLLM's (sveb.core.device.pick_dtype): bf16 on a GPU
    or a CPU with native bf16 (avx512_bf16, AMX: the top layers' forward and backward 1.6x faster than fp32,
    docs/timings.md), fp32 elsewhere (bf16 is emulated there). The trained weights stay fp32 (autocast)."""
    from sveb.core.device import pick_dtype  # per call: tests patch sveb.core.device
    return "bfloat16" if device == "cuda" else pick_dtype("auto")


def load_body(path: str, device: str, dtype: str | None = None) -> nn.Module:
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging
    dtype = getattr(torch, dtype or default_dtype(device))
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the unused lm_head weights are expected
    hf_logging.disable_progress_bar()
    try:
        body = AutoModel.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
    finally:
        hf_logging.set_verbosity(level)
        hf_logging.enable_progress_bar()
    return body.to(device).eval()
