"""Sampling engines behind one Protocol, on token ids.

A request is (prompt token ids, seed) and yields one completion; n samples of a prompt are n
requests with n derived seeds, so each sample is reproducible on its own. A state's continuation
is requested with prompt ids + its first t response ids: text is never re-tokenised.
"""

from __future__ import annotations

from sveb.engines.base import Completion, Engine, EngineError, HFTokenizer, Request, Tokenizer, model_context
from sveb.engines.hf import HFEngine
from sveb.engines.vllm import VLLMEngine

__all__ = ["ENGINES", "Completion", "Engine", "EngineError", "HFTokenizer", "Request", "Tokenizer", "make_engine",
           "model_context"]

ENGINES = ("vllm", "hf", "scripted")


def make_engine(name: str, model_path: str, seed: int = 0, batch_size: int = 64, eager: bool = False,
                max_model_len: int = 4096, dtype: str = "bfloat16", tensor_parallel_size: int = 1,
                gpu_memory_utilization: float = 0.9) -> Engine:
    if name == "vllm":
        return VLLMEngine(model_path, seed=seed, max_model_len=max_model_len, enforce_eager=eager, dtype=dtype,
                          tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization)
    if name == "hf":
        return HFEngine(model_path, batch_size=batch_size, dtype=dtype)
    if name == "scripted":
        raise EngineError("--engine scripted is for tests; construct ScriptedEngine directly")
    raise EngineError(f"--engine {name}: unknown engine (known: vllm, hf)")
