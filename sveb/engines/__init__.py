"""Sampling engines behind one Protocol, on token ids.

A request is (prompt token ids, seed) and yields one completion; n samples of a prompt are n
requests with n derived seeds, so each sample is reproducible on its own. A state's continuation
is requested with prompt ids + its first t response ids: text is never re-tokenised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from sveb.config import SamplingConfig

ENGINES = ("vllm", "hf", "scripted")


@dataclass(frozen=True)
class Request:
    prompt_token_ids: tuple[int, ...]
    seed: int


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


def make_engine(name: str, model_path: str, seed: int = 0, batch_size: int = 64, eager: bool = False) -> Engine:
    if name == "vllm":
        from sveb.engines.vllm import VLLMEngine
        return VLLMEngine(model_path, seed=seed, enforce_eager=eager)
    if name == "hf":
        from sveb.engines.hf import HFEngine
        return HFEngine(model_path, batch_size=batch_size)
    if name == "scripted":
        raise ValueError("--engine scripted is for tests; construct ScriptedEngine directly")
    raise ValueError(f"--engine {name}: unknown engine (known: vllm, hf)")
