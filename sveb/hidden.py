"""Last-layer (or chosen-layer) hidden states of rollouts, from the model that sampled them.

Computed per problem group with a transformers forward pass over prompt + response ids, kept at the
response positions only, and cached as float16 under `<build>/hidden/<fp>/<problem_id>.npz`, so memory
stays bounded by one group and a second estimator reuses the first one's work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from sveb.config import fingerprint
from sveb.store import atomic_write_bytes

MAX_BATCH_TOKENS = 16384


class HiddenStates:
    def __init__(self, bdir: Path, model: str, layer: int = -1, batch_tokens: int = MAX_BATCH_TOKENS,
                 dtype: str = "auto"):
        from sveb.hardware import pick_dtype
        self.model_spec, self.layer, self.batch_tokens = model, layer, batch_tokens
        self.dtype = pick_dtype(dtype)  # bf16 where native (GPU, avx512_bf16/AMX), else fp32
        self.dir = Path(bdir) / "hidden" / fingerprint("hidden", model, layer, self.dtype)
        self._model = None

    def _load(self):
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM
            from sveb.models import resolve
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
            self._model = AutoModelForCausalLM.from_pretrained(resolve(self.model_spec), dtype=getattr(torch, self.dtype)
                                                               ).to(self.device).eval()
        return self._model

    def compute(self, rollouts: list[dict]) -> dict[int, np.ndarray]:
        """{rollout_idx: [T, d] float16} for one group, batched by token budget."""
        import torch
        model = self._load()
        order = sorted(rollouts, key=lambda r: len(r["prompt_token_ids"]) + len(r["response_token_ids"]))
        out: dict[int, np.ndarray] = {}
        batch: list[dict] = []

        def flush():
            width = max(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for r in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, r in enumerate(batch):  # right padding: causal attention keeps real positions exact
                seq = list(r["prompt_token_ids"]) + list(r["response_token_ids"])
                ids[i, :len(seq)] = torch.tensor(seq)
                mask[i, :len(seq)] = 1
            with torch.no_grad():
                # the body only: the LM head's logits would cost tokens x vocab floats for nothing
                res = model.base_model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                       output_hidden_states=self.layer != -1)
                hs = res.last_hidden_state if self.layer == -1 else res.hidden_states[self.layer]
            for i, r in enumerate(batch):
                p, t = len(r["prompt_token_ids"]), len(r["response_token_ids"])
                out[r["rollout_idx"]] = hs[i, p:p + t].float().cpu().numpy().astype(np.float16)
            batch.clear()

        for r in order:
            width = len(r["prompt_token_ids"]) + len(r["response_token_ids"])
            if batch and width * (len(batch) + 1) > self.batch_tokens:
                flush()
            batch.append(r)
        if batch:
            flush()
        return out

    def ensure(self, pid: str, rollouts: list[dict]) -> dict[int, np.ndarray] | None:
        """Compute and cache a group's hidden states unless cached; the arrays when computed now."""
        path = self.dir / f"{pid}.npz"
        if path.exists():
            return None
        arrays = self.compute(rollouts)
        import io
        buf = io.BytesIO()
        np.savez_compressed(buf, **{f"r{k}": v for k, v in arrays.items()})
        atomic_write_bytes(path, buf.getvalue())
        return arrays

    def group(self, pid: str, rollouts: list[dict]) -> dict[int, np.ndarray]:
        arrays = self.ensure(pid, rollouts)
        if arrays is not None:
            return arrays
        with np.load(self.dir / f"{pid}.npz") as z:
            return {int(k[1:]): z[k] for k in z.files}

    def provider(self, console=None) -> Callable[[str, list[dict]], Callable[[int], np.ndarray]]:
        """pid, rollouts -> hidden_fn(rollout_idx) -> [T, d] float32."""
        def for_problem(pid: str, rollouts: list[dict]):
            arrays = self.group(pid, rollouts)
            return lambda idx: arrays[idx].astype(np.float32)
        return for_problem
