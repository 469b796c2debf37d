"""The policy a real run trains and samples: the hf engine's own model (fp32 weights; bf16 autocast where the
compute dtype is bf16), so an update is what the next step samples from, with nothing reloaded, or a vLLM engine
that reloads the trained weights in place after each update (`ReloadingVLLM`); and the number
domain's problems: a train pool from the train split, the held-out set from the test split (both seed 0, so every
baseline and seed of a study sees the same data)."""

from __future__ import annotations

from sveb.core.config import SamplingConfig
from sveb.engines import Request


class AutocastEngine:
    """An engine whose generate runs under bf16 autocast (the weights stay fp32 for the optimizer)."""

    def __init__(self, engine):
        self.engine, self.tokenizer = engine, engine.tokenizer

    def generate(self, requests: list[Request], params: SamplingConfig, desc: str = ""):
        import torch
        with torch.autocast("cpu" if self.engine.device == "cpu" else "cuda", dtype=torch.bfloat16):
            return self.engine.generate(requests, params, desc)


def hf_policy(model: str, dtype: str, batch_size: int = 64):
    """(engine, model): the hf engine on the resolved model in fp32, the model being the engine's own object."""
    from sveb.core.models import resolve
    from sveb.engines.hf import HFEngine
    eng = HFEngine(resolve(model), batch_size=batch_size, dtype="float32")
    return (AutocastEngine(eng) if dtype == "bfloat16" else eng), eng.model


def write_policy(model, tokenizer, folder) -> None:
    """The policy as a model folder every loader reads: config.json, safetensors in the model's own dtype (fp32: the
    trained master weights) and the tokenizer with its chat template. What vLLM reloads and `sveb rl-export`
    writes."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


class ReloadingVLLM:
    """vLLM sampling from a copy of the policy: `refresh(model)` writes the trained weights (and the tokenizer) to
    `weights` (0.4-0.6 s) and reloads them into the running engine in place (`VLLMEngine.reload_weights`, about a
    second; it replaced a restart on them, 20-30 s, which also grew the process by ~1 GB a restart until a 24-step
    run ran out of memory)."""

    def __init__(self, model_path: str, dtype: str, weights: str, max_model_len: int = 2048):
        from sveb.engines.vllm import VLLMEngine
        self.weights = weights
        self.engine = VLLMEngine(model_path, max_model_len=max_model_len, dtype=dtype)
        self.tokenizer = self.engine.tokenizer

    def generate(self, requests: list[Request], params: SamplingConfig, desc: str = ""):
        return self.engine.generate(requests, params, desc)

    def close(self) -> None:
        self.engine.close()

    def refresh(self, model) -> None:
        write_policy(model, self.tokenizer.tok, self.weights)
        self.engine.reload_weights(self.weights)


def vllm_policy(model: str, dtype: str, weights: str):
    """(engine, model): vLLM on the resolved model, and the policy as a separate fp32 transformers model."""
    import torch
    from transformers import AutoModelForCausalLM

    from sveb.core.device import torch_device
    from sveb.core.models import resolve
    path = resolve(model)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(torch_device()).eval()
    return ReloadingVLLM(path, dtype, weights), policy


def number_pools(train_size: int, eval_size: int, domain: str = "number") -> tuple[list[dict], list[dict]]:
    """(train pool, held-out set): builtin problems of the train and test splits, seed 0."""
    from sveb.data_builders.load import load_problems
    train, _ = load_problems(domain, "builtin", train_size, 0, "train")
    held, _ = load_problems(domain, "builtin", eval_size, 0, "test")
    return train, held
