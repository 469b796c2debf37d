"""Frozen configs. Fields listed in `NOT_IN_FP` change speed, never results."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

# Knobs that do not change results are excluded from fingerprints.
NOT_IN_FP = {"engine", "batch_size", "tensor_parallel_size", "gpu_memory_utilization", "workers", "root", "eager"}


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 512


@dataclass(frozen=True)
class BuildConfig:
    domain: str = "number"
    model: str = "smollm2-135m"
    source: str = "builtin"
    split: str = "test"            # "train" builds a disjoint problem set (for PPO-1)
    problems: int = 8              # kept after the difficulty filter
    oversample: int = 4            # candidates drawn = problems * oversample
    rollouts: int = 40             # G
    states_per_problem: int = 2    # S
    step_pairs: bool = False       # cut states in pairs t1 < t2 of one rollout (step-advantage sign agreement)
    mc: int = 20                   # n_ref continuations per state
    mc_extra: int = 4              # independent continuations for MCS@k baselines
    min_acc: float = 0.1
    max_acc: float = 0.8
    screen: int = 8                # screening rollouts per candidate, apart from the G (none when the filter is open)
    min_novel_numbers: int = -1    # number domain: -1 = 4 for hub/file sources (the paper), 0 for builtin
    fields: tuple[tuple[str, str], ...] = ()  # --field KEY=COLUMN mappings for a file with its own columns
    min_tests: int = -1            # code problems: fewest tests kept; -1 = 6 for verifiable-coding, else 1
    seed: int = 0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    dtype: str = "auto"            # compute dtype; auto: from the hardware (see sveb.lm.device). Changes samples.
    protocol: str = "sveb"         # "sveb" | "paper" (the Hista/Numca authors' protocol, sveb/sample/paper.py): in the
    #                                stage fingerprints only when "paper", so SVEB's builds keep theirs
    # speed-only knobs
    engine: str = "vllm"
    batch_size: int = 64
    workers: int = 4
    eager: bool = False            # vLLM without compilation: faster start, slower decoding
    tensor_parallel_size: int = 1  # vLLM: GPUs one engine spans (--tp)
    gpu_memory_utilization: float = 0.9  # vLLM on a GPU: share of its memory the engine takes


def fingerprint(*parts: object) -> str:
    """Stable 12-hex hash of JSON-able parts (dataclasses minus the NOT_IN_FP fields)."""

    def clean(x: object) -> object:
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return {f.name: clean(getattr(x, f.name)) for f in dataclasses.fields(x) if f.name not in NOT_IN_FP}
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in sorted(x.items())}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    blob = json.dumps([clean(p) for p in parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def derive_seed(*parts: object) -> int:
    """A 31-bit seed from any parts (global seed, fingerprint, ids)."""
    blob = json.dumps([str(p) for p in parts])
    return int.from_bytes(hashlib.sha256(blob.encode()).digest()[:4], "little") & 0x7FFFFFFF
