"""What every sampling engine shares: requests, completions, the Engine and Tokenizer protocols, the model's
own tokenizer, and the engines' error. The engines (vllm.py, hf.py, scripted.py) import this, never the package."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sveb.core.config import SamplingConfig
from sveb.core.errors import SvebError


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


@dataclass(frozen=True)
class EngineOptions:
    """What a build hands an engine class at start (sveb.engines.registry.start); an engine reads what it needs."""
    model_path: str                     # the resolved --model ("" for an engine that uses no model)
    seed: int = 0
    batch_size: int = 64
    eager: bool = False
    max_model_len: int = 4096
    dtype: str = "bfloat16"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9


class Tokenizer(Protocol):
    def encode_chat(self, messages: list[dict]) -> list[int]: ...
    def decode(self, ids: Sequence[int]) -> str: ...


class Engine(Protocol):
    """Started by the registry (sveb.engines.registry) as `Class.from_options(options)`, else `Class(options)`.
    `generate` returns one completion per request, in order; a request's samples follow from its seed alone."""
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

    def render_chat(self, messages: list[dict]) -> str:
        """The chat template as text (the paper protocol appends a prefix to it, then re-tokenises)."""
        return self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def encode(self, text: str) -> list[int]:
        """Text to ids; no special tokens added (a rendered chat template already holds its own)."""
        return [int(i) for i in self.tok.encode(text, add_special_tokens=False)]


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
