"""A long build's sampled shards carried across fresh clones. A protocol setting (benchmarks/protocols.py) can take
longer than one working session, and `sveb_data/` is not kept with the repository: `save` copies what a build
has sampled so far into a folder that is committed (benchmarks/protocols.py --save-partial), and `load` puts it
back under a new root before the build runs, which then keeps every shard whose fingerprint is the one it
would write and samples the rest (sveb.sample.pipeline). A shard sampled under another dtype, model or config
has another fingerprint, so it is never mixed in: it is sampled again. Only the sampled tables travel, never
the estimators' caches (hidden states, features, critics), nor the manifest: the build writes its own, and a
carried file is never read as anything but a shard, whose fingerprint decides whether it is used."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

SAMPLED = ("candidates", "problems", "screens", "rollouts", "states", "references")
SAVED = "saved.json"  # what the shards were sampled under (dtype, CPU flags): read to warn, never to decide


class PartialError(Exception):
    """Carried shards a run would not use: stop before hours of sampling start over beside them."""


def shards(bdir: Path) -> list[Path]:
    """A build's sampled shards (written whole by the store: a half-written one is a .tmp- file)."""
    out = []
    for table in SAMPLED:
        out += sorted(p for p in (bdir / table).glob("part-*.parquet") if p.is_file())
    return out


def save(bdirs: list[Path], root: Path, dest: Path, saved: dict | None = None) -> int:
    """Copy each build's sampled files to DEST at their path under ROOT (DEST is replaced whole, so shards the
    builds have since deleted do not linger), with SAVED (what they were sampled under) as saved.json; the number
    of shards copied."""
    root = Path(root).resolve()
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    for bdir in bdirs:
        for f in shards(Path(bdir)):
            target = tmp / f.resolve().relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
            n += 1
    if n == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    (tmp / SAVED).write_text(json.dumps({**(saved or {}), "shards": n}, indent=1))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return n


def save_unexported(todo: dict, root: Path, dest: Path, console) -> None:
    """`--save-partial` for builds by key (export name -> BuildConfig): what each has sampled under ROOT, copied to
    DEST/<key>/ with the dtype and CPU flags it was sampled under; says per key how many shards it saved."""
    from sveb.core.device import describe
    from sveb.sample.jobs import dtype_of
    from sveb.sample.rules import locate
    for key, cfg in todo.items():
        bdir = locate(cfg, root)
        saved = {"dtype": dtype_of(cfg), "cpu_flags": describe()}
        n = save([bdir], root, dest / key, saved) if bdir.exists() else 0
        console.print(f"{key}: {n} sampled shards saved to {dest / key}" if n else
                      f"{key}: nothing sampled yet under {root}")


def check_dtype(src: Path, dtype: str) -> None:
    """Raise if SRC's shards were sampled under another dtype than this run's: their fingerprints could not match,
    so the run would sample the setting from scratch and then delete them."""
    try:
        had = json.loads((Path(src) / SAVED).read_text()).get("dtype")
    except (OSError, ValueError, AttributeError):
        return  # no record (or an unreadable one): the fingerprints still decide, shard by shard
    if had and had != dtype:
        raise PartialError(f"{src}: its shards were sampled in {had}; this run samples in {dtype} and would use none "
                           f"of them: pass --dtype {had} (or delete {src} to start over)")


def load(src: Path, root: Path) -> int:
    """Copy SRC's files under ROOT where ROOT has none at that path (what a run here has written wins); the number
    of shards copied. Only the files `save` writes are taken: anything else in SRC is left out."""
    if not src.is_dir():
        return 0
    n = 0
    for f in sorted(src.rglob("part-*.parquet")):
        rel = f.relative_to(src)
        target = Path(root) / rel
        if len(rel.parts) < 2 or rel.parts[-2] not in SAMPLED or not f.is_file() or f.is_symlink() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        n += 1
    return n


def take(src: Path, root: Path, dtype: str, console, label: str) -> int:
    """Carried shards under SRC put under ROOT before a build samples (check_dtype first: a folder of another dtype
    stops the run); says how many were taken, as `label`'s."""
    check_dtype(src, dtype)
    n = load(src, root)
    if n:
        console.print(f"{label}: {n} sampled shards taken from {src}")
    return n
