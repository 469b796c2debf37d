"""A board's add as one step: the bundle folders placed whole, and what the add changed put back on failure."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from sveb import store
from sveb.core.errors import SvebError


def place(folder: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp-"))
    try:
        store.make_shared(tmpdir, directory=True)
        for name in ("bundle.json", "estimates.parquet"):
            shutil.copyfile(folder / name, tmpdir / name)
        tmpdir.rename(dest)  # the bundle is on the board once this folder exists whole
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


class Undo:
    """What an add may change, as it was before: undo() puts it back (files restored, folders it made removed)."""

    def __init__(self, board: Path, keys: list[str]):
        self.files = {p: p.read_bytes() if p.is_file() else None for p in
                      [board / n for n in ("board.json", "scores.parquet", "scores.csv")]
                      + [board / "scored" / f"{k}.json" for k in keys]}
        # an empty leftover folder counts as absent: place() renames the new bundle over it
        self.made = [d for d in (board / "bundles" / k for k in keys) if not d.is_dir() or not any(d.iterdir())]
        self.dirs = [d for d in (board / "bundles", board / "scored", board) if not d.exists()]  # deepest first

    def __call__(self) -> None:
        # best effort, every step tried: a restore that fails (a full disk, often the add's own failure) must not
        # hide the error being undone nor skip the steps after it
        for p, data in self.files.items():
            try:
                if data is None:
                    p.unlink(missing_ok=True)
                elif not p.is_file() or p.read_bytes() != data:
                    store.atomic_write_bytes(p, data)
            except (OSError, SvebError):
                pass
        for d in self.made:
            shutil.rmtree(d, ignore_errors=True)
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass  # not there, or holds what this add did not write
