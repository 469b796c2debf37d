"""Critic checkpoints and the one resident critic model: `<ckpt>/epoch-K/` holds the trainable weights, the optimizer
state (the newest epoch only) and meta.json; an epoch directory appears whole or not at all."""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sveb.core.device import empty_cache
from sveb.store import CONTENT_TABLES, atomic_write_bytes, content_hash


def latest_epoch(ckpt: Path) -> int:
    done = [int(m.group(1)) for p in ckpt.glob("epoch-*") if (m := re.fullmatch(r"epoch-(\d+)", p.name))
            and (p / "meta.json").exists()]
    return max(done, default=0)


def load_epoch(ckpt: Path, epoch: int, trainable, opt, device: str) -> None:
    """Load epoch-K's weights into trainable and, unless opt is None, its optimizer state into opt."""
    import torch
    last = ckpt / f"epoch-{epoch}"
    trainable.load_state_dict(torch.load(last / "critic.pt", map_location=device, weights_only=True))
    if opt is not None:
        opt.load_state_dict(torch.load(last / "optim.pt", map_location=device, weights_only=True))


def save_epoch(ckpt: Path, epoch: int, trainable, opt, meta: dict) -> None:
    """epoch-K/ appears whole (renamed from a temp dir) or not at all; only its optimizer state is kept."""
    import torch
    tmp, final = ckpt / f".epoch-{epoch}.partial", ckpt / f"epoch-{epoch}"
    shutil.rmtree(tmp, ignore_errors=True)
    for name, obj in (("critic.pt", trainable.state_dict()), ("optim.pt", opt.state_dict())):
        buf = io.BytesIO()
        torch.save(obj, buf)
        atomic_write_bytes(tmp / name, buf.getvalue())
    atomic_write_bytes(tmp / "meta.json", json.dumps(meta).encode())
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    (ckpt / f"epoch-{epoch - 1}" / "optim.pt").unlink(missing_ok=True)


_CONTENT: dict[tuple, str] = {}


def build_key(bdir: Path) -> str:
    """A training build's identity for a trained estimator's cache: the hash of its contents
    (`store.content_hash`), never its name or path. Memoised while none of its table files changes."""
    files = sorted(p for t in CONTENT_TABLES for p in (Path(bdir) / t).rglob("*") if p.is_file())
    memo = (str(Path(bdir).resolve()), tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files))
    if memo not in _CONTENT:
        _CONTENT[memo] = content_hash(bdir)
    return _CONTENT[memo]


# The one critic-like model kept loaded in this process (ppo's critic or pacs's scorer): an eval of both
# holds one policy copy at a time, and `-e ppo-n --protocol in-group --protocol held-out` loads it once.
_RESIDENT: dict[tuple, object] = {}
T = TypeVar("T")


def resident(key: tuple, make: Callable[[], T]) -> T:
    """The loaded model for key, made after the previous one (another key) is dropped and its memory freed."""
    if key not in _RESIDENT:
        release_resident()
        _RESIDENT[key] = make()
    return _RESIDENT[key]


def release_resident() -> None:
    _RESIDENT.clear()
    empty_cache()
