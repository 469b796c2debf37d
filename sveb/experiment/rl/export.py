"""An RL run's policy as a model folder (`sveb rl-export`): the run's base model with a checkpoint's trained
parameters, written as the vLLM engine's reloads write it (policy.write_policy), so `sveb build --model DIR` and
`sveb eval --model DIR` take it like any local model. POLICY_FILE records where it came from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sveb.core.errors import UsageError, brief
from sveb.experiment.rl import checkpoint
from sveb.store.files import hash_file

POLICY_FILE = "sveb_policy.json"  # provenance: not a weight file, so not in the folder's weights hash


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    hash_file(h, path)
    return h.hexdigest()


def run_config(run: Path) -> dict:
    """The run's config.json; a missing folder or file is a one-line error naming the path."""
    if not run.is_dir():
        raise UsageError(f"{run}: no such run folder (a `sveb rl --out` folder)")
    path = run / "config.json"
    if not path.is_file():
        raise UsageError(f"{path}: missing; {run} is not a `sveb rl` run folder")
    try:
        cfg = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UsageError(f"{path}: not a JSON config (a `sveb rl` run writes one)") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("model"), str):
        raise UsageError(f"{path}: names no base model")
    return cfg


def checkpoint_file(run: Path, step: int | None) -> tuple[int, Path]:
    """(step, policy.pt) of the newest checkpoint, or of `step`; one line naming the path when there is none."""
    newest = checkpoint.latest_step(run)
    if not newest:
        raise UsageError(f"{run / 'ckpt'}: no checkpoint (the run has not finished a step)")
    step = newest if step is None else step
    path = run / "ckpt" / f"step-{step}" / "policy.pt"
    if not path.is_file():
        raise UsageError(f"{path}: no such checkpoint (only the newest is kept: step {newest})")
    return step, path


def export_policy(run: str | Path, out: str | Path, step: int | None = None) -> dict:
    """Write the run's policy at `step` (default: the newest) to the new folder `out`; its provenance record."""
    import torch
    from transformers import AutoModelForCausalLM

    from sveb.core.models import resolve
    from sveb.engines.base import HFTokenizer
    from sveb.experiment.rl.policy import write_policy
    from sveb.lm.policy_update import copy_params
    from sveb.store import staged_dir
    run, out = Path(run), Path(out)
    cfg = run_config(run)
    step, ckpt = checkpoint_file(run, step)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: exists and is not an empty folder; pass a new folder")
    base = resolve(cfg["model"])
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    # fp32, as the run trained it (sveb.experiment.rl.policy.hf_policy): the master weights, not a bf16 copy
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    try:
        copy_params(model, state["params"])
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"{ckpt}: does not fit the base model {cfg['model']} ({brief(e)})") from None
    record = {"run": str(run.resolve()), "step": step, "base_model": cfg["model"], "base_path": base,
              "checkpoint_sha256": _sha256(ckpt), "trained_parameters": len(state["params"]),
              "baseline": cfg.get("baseline"), "seed": cfg.get("seed"), "dtype": "float32"}
    with staged_dir(out) as tmp:  # the folder appears whole or not at all
        write_policy(model, HFTokenizer(base).tok, tmp)
        (tmp / POLICY_FILE).write_text(json.dumps(record, indent=2, sort_keys=True))
    return record
