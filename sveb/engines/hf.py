"""transformers `generate` engine: batched, left padding. For machines without vLLM.

Sampling seeds are applied per batch (transformers has no per-request generator), so its
samples depend on the batch size; vLLM's do not.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.progress import track

from sveb.core.config import SamplingConfig
from sveb.engines.base import Completion, EngineOptions, HFTokenizer, Request


class HFEngine:
    fingerprint = "hf/batch={batch_size}"   # padded batches change its numerics: the batch size counts
    uses_model = True

    @classmethod
    def from_options(cls, o: EngineOptions) -> HFEngine:
        return cls(o.model_path, batch_size=o.batch_size, dtype=o.dtype)

    def __init__(self, model_path: str, batch_size: int = 32, dtype: str = "bfloat16"):
        import torch
        from transformers import AutoModelForCausalLM

        from sveb.core.device import torch_device  # per call: tests patch sveb.core.device
        self.tokenizer = HFTokenizer(model_path)
        self.device = torch_device()
        # dtype at load time, never .to(dtype): that would also cast RoPE's inv_freq
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        self.model = model.to(self.device).eval()
        self.batch_size = batch_size
        self.pad_id = self.tokenizer.tok.pad_token_id or self.tokenizer.eos_token_id

    def generate(self, requests: Sequence[Request], params: SamplingConfig, desc: str = "") -> list[Completion]:
        import torch
        out: list[Completion] = []
        batches = [requests[i:i + self.batch_size] for i in range(0, len(requests), self.batch_size)]
        for batch in track(batches, description=desc or "generating (hf)"):
            width = max(len(r.prompt_token_ids) for r in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, r in enumerate(batch):
                ids[i, width - len(r.prompt_token_ids):] = torch.tensor(r.prompt_token_ids)
                mask[i, width - len(r.prompt_token_ids):] = 1
            torch.manual_seed(batch[0].seed)
            with torch.no_grad():
                gen = self.model.generate(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device), do_sample=True,
                    temperature=params.temperature, top_p=params.top_p, top_k=0,
                    max_new_tokens=max(r.budget(params) for r in batch), pad_token_id=self.pad_id)
            # one generate per batch with the largest budget, each row cut to its own: sampling is
            # causal, so a row's first b tokens are what a budget of b would have given
            eos = self.tokenizer.eos_token_id
            for r, row in zip(batch, gen[:, width:].tolist()):
                row = row[: r.budget(params)]
                if eos in row:
                    out.append(Completion(tuple(row[:row.index(eos)]), "stop"))
                else:
                    out.append(Completion(tuple(row), "length"))
        return out
