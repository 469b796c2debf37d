"""An RL run's folder: config.json (a resume with another config is refused), log.jsonl (one row a step, rewritten
atomically), and ckpt/step-K/ (the trained parameters and the optimizer state; appears whole or not at all; only the
newest is kept)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

from sveb.core.errors import UsageError
from sveb.store import atomic_write_bytes


def check_config(out: Path, cfg: dict) -> None:
    """Write config.json, or check that the one there matches (except `steps`: a run may be extended)."""
    path = out / "config.json"
    cfg = json.loads(json.dumps(cfg))  # tuples as lists, as they are read back
    if path.exists():
        old = json.loads(path.read_text())
        diff = sorted(k for k in set(old) | set(cfg) if k != "steps" and old.get(k) != cfg.get(k))
        if diff:
            k = diff[0]
            raise UsageError(f"{path}: this run was made with {k}={old.get(k)!r}, now {cfg.get(k)!r}; "
                             f"resume with the same settings or choose another --out")
    atomic_write_bytes(path, json.dumps(cfg, indent=2, sort_keys=True).encode())


def latest_step(out: Path) -> int:
    done = [int(m.group(1)) for p in (out / "ckpt").glob("step-*")
            if (m := re.fullmatch(r"step-(\d+)", p.name)) and (p / "meta.json").exists()]
    return max(done, default=0)


def save(out: Path, step: int, state: dict, meta: dict) -> None:
    import torch
    ckpt = out / "ckpt"
    tmp, final = ckpt / f".step-{step}.partial", ckpt / f"step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(tmp / "policy.pt", buf.getvalue())
    atomic_write_bytes(tmp / "meta.json", json.dumps(meta).encode())
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in ckpt.glob("step-*"):
        if old != final:
            shutil.rmtree(old, ignore_errors=True)


def load(out: Path, step: int) -> dict:
    import torch
    return torch.load(out / "ckpt" / f"step-{step}" / "policy.pt", map_location="cpu", weights_only=True)


def read_log(out: Path, upto: int) -> list[dict]:
    path = out / "log.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r["step"] <= upto]


def write_log(out: Path, rows: list[dict]) -> None:
    atomic_write_bytes(out / "log.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode())
