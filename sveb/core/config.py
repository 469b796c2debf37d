"""Frozen configs. Fields listed in `NOT_IN_FP` change speed, never results."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from sveb.core.errors import ConfigError

MAX_TOKENS = 512  # `sveb build`'s default budget per rollout/continuation; also what manifests without one used
PAPER_MAX_TOKENS = 4096  # the Hista/Numca authors' max_length (`--preset paper`, sveb/sample/paper.py)

# The protocol's separate choices (`sveb build --cut/--continuation/--tiers`, sveb/sample/paper.py): each field's
# (SVEB's value, the Hista/Numca authors' value). A field left "" takes its protocol's value.
CHOICES = {"cut": ("token", "space"), "continuation": ("remaining", "full"), "tiers": ("range", "paper")}

# Knobs that do not change results are excluded from fingerprints.
NOT_IN_FP = {"engine", "batch_size", "tensor_parallel_size", "gpu_memory_utilization", "workers", "root", "eager"}


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = MAX_TOKENS


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
    # --exclude paths: problems of earlier builds never drawn (sveb.data_builders.exclude)
    exclude: tuple[str, ...] = ()
    seed: int = 0
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    dtype: str = "auto"            # compute dtype; auto: from the hardware (see sveb.core.device). Changes samples.
    protocol: str = "sveb"         # "sveb" | "paper" (the Hista/Numca authors' protocol, sveb/sample/paper.py): in the
    #                                stage fingerprints only when "paper", so SVEB's builds keep theirs
    cut: str = ""                  # CHOICES: "" = the protocol's; set only where a build departs from it
    continuation: str = ""
    tiers: str = ""
    # speed-only knobs
    engine: str = "vllm"
    batch_size: int = 64
    workers: int = 4
    eager: bool = False            # vLLM without compilation: faster start, slower decoding
    tensor_parallel_size: int = 1  # vLLM: GPUs one engine spans (--tp)
    gpu_memory_utilization: float = 0.9  # vLLM on a GPU: share of its memory the engine takes

    def __post_init__(self):
        """One spelling per protocol, so equal builds share a manifest config and a pool: "paper" when every
        choice is the authors', else "sveb" with each choice that departs from SVEB's set (e.g. protocol "paper"
        with cut "token" is SVEB's with the other two of theirs)."""
        if self.protocol not in ("sveb", "paper"):
            return  # an unknown protocol is a BuildError in sveb.sample.paper.validate
        theirs = self.protocol == "paper"
        picked = {k: getattr(self, k) or CHOICES[k][theirs] for k in CHOICES}
        paper = all(picked[k] == CHOICES[k][1] for k in CHOICES)
        object.__setattr__(self, "protocol", "paper" if paper else "sveb")
        for k in CHOICES:
            object.__setattr__(self, k, "" if paper or picked[k] == CHOICES[k][0] else picked[k])

    def choice(self, name: str) -> str:
        """The value a build uses for one of CHOICES."""
        return getattr(self, name) or CHOICES[name][self.protocol == "paper"]

    @classmethod
    def from_manifest(cls, manifest: dict) -> BuildConfig:
        """The config a build's manifest records (`dataclasses.asdict` of one, sveb/sample/pipeline.py), typed.
        Manifests of older versions lack newer keys and imported ones (sveb/store/hista_io.py) record only a few,
        some as null: a missing or null key takes the field's default, which is what the code reading them
        assumed (split "test", protocol "sveb", max_tokens 512, ...); a key this version does not know is
        ignored; domain and model, where the config lacks them, are the manifest's own. A value of the wrong type
        is a one-line ConfigError naming its key."""
        raw = manifest.get("config") or {}
        if isinstance(raw, dict):
            raw = {k: manifest.get(k) for k in ("domain", "model") if isinstance(manifest.get(k), str)} | raw
        return _typed(cls, raw, "config")


def _typed(cls, raw: object, where: str):
    if not isinstance(raw, dict):
        raise ConfigError(f"manifest {where}: is {json.dumps(raw, default=str)[:40]}, expected an object")
    kw = {}
    for f in dataclasses.fields(cls):
        v = raw.get(f.name)
        if v is None:
            continue
        key = f"{where}.{f.name}"
        if f.name == "sampling":
            kw[f.name] = _typed(SamplingConfig, v, key)
        elif f.name == "fields":  # KEY=COLUMN pairs; JSON has lists for tuples
            if not (isinstance(v, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                       and all(isinstance(x, str) for x in p) for p in v)):
                raise ConfigError(f"manifest {key}: is {json.dumps(v, default=str)[:40]}, expected [key, column] pairs")
            kw[f.name] = tuple(tuple(p) for p in v)
        elif f.name == "exclude":  # paths; JSON has lists for tuples
            if not (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)):
                raise ConfigError(f"manifest {key}: is {json.dumps(v, default=str)[:40]}, expected a list of paths")
            kw[f.name] = tuple(v)
        else:
            kw[f.name] = _checked(v, type(f.default), key)
    return cls(**kw)


def _checked(v: object, want: type, key: str) -> object:
    ok = {bool: lambda x: isinstance(x, bool), int: lambda x: isinstance(x, int) and not isinstance(x, bool),
          float: lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), str: lambda x: isinstance(x, str)}
    if not ok[want](v):
        raise ConfigError(f"manifest {key}: is {json.dumps(v, default=str)[:40]}, expected {want.__name__}")
    return float(v) if want is float else v


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


def protocol_of(manifest: dict) -> str:
    """A build's protocol (sveb/sample/paper.py); builds made before protocols were recorded are SVEB's. A build of
    SVEB's protocol with some of the paper's choices says which: "sveb+cut=space"."""
    cfg = BuildConfig.from_manifest(manifest)
    return "+".join([cfg.protocol] + [f"{k}={getattr(cfg, k)}" for k in CHOICES if getattr(cfg, k)])
