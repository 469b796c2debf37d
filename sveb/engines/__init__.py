"""Sampling engines behind one Protocol, on token ids.

A request is (prompt token ids, seed) and yields one completion; n samples of a prompt are n
requests with n derived seeds, so each sample is reproducible on its own. A state's continuation
is requested with prompt ids + its first t response ids: text is never re-tokenised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from sveb.config import SamplingConfig
from sveb.errors import SvebError

ENGINES = ("vllm", "hf", "scripted")


@dataclass(frozen=True)
class Request:
    prompt_token_ids: tuple[int, ...]
    seed: int
    max_tokens: int | None = None   # this request's budget; None: the sampling config's max_tokens

    def budget(self, params: SamplingConfig) -> int:
        return params.max_tokens if self.max_tokens is None else self.max_tokens


class EngineError(SvebError, ValueError):
    """A request the engine cannot serve as asked (e.g. it does not fit the context)."""


@dataclass(frozen=True)
class Completion:
    token_ids: tuple[int, ...]
    finish_reason: str          # "stop" (eos) or "length"


class Tokenizer(Protocol):
    def encode_chat(self, messages: list[dict]) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


class Engine(Protocol):
    tokenizer: Tokenizer

    def generate(self, requests: Sequence[Request], params: SamplingConfig, desc: str = "") -> list[Completion]: ...


class HFTokenizer:
    """The model's own tokenizer and chat template (shared by the vllm and hf engines)."""

    def __init__(self, path: str):
        from transformers import AutoTokenizer
        self.tok = AutoTokenizer.from_pretrained(path)
        self.eos_token_id = self.tok.eos_token_id

    def encode_chat(self, messages: list[dict]) -> list[int]:
        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # some versions return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


def model_context(model_path: str) -> int | None:
    """The model's context length from its config.json (None if it does not say)."""
    import json
    from pathlib import Path
    cfg = Path(model_path) / "config.json"
    if not cfg.exists():
        return None
    c = json.loads(cfg.read_text())
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        if isinstance(c.get(key), int):
            return c[key]
    return None


def make_engine(name: str, model_path: str, seed: int = 0, batch_size: int = 64, eager: bool = False,
                max_model_len: int = 4096, dtype: str = "bfloat16", tensor_parallel_size: int = 1,
                gpu_memory_utilization: float = 0.9) -> Engine:
    if name == "vllm":
        from sveb.engines.vllm import VLLMEngine
        return VLLMEngine(model_path, seed=seed, max_model_len=max_model_len, enforce_eager=eager, dtype=dtype,
                          tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization)
    if name == "hf":
        from sveb.engines.hf import HFEngine
        return HFEngine(model_path, batch_size=batch_size, dtype=dtype)
    if name == "scripted":
        raise EngineError("--engine scripted is for tests; construct ScriptedEngine directly")
    raise EngineError(f"--engine {name}: unknown engine (known: vllm, hf)")
