"""A build as one handle (`Build`): its folder, its manifest parsed once, its tables read on first use.

Everything that reads a finished build (evaluate, the context an estimator gets, the train build it learns on, an
export) passes one Build along instead of a path that each step reopens; functions that take a build accept a path
too (`Build.of`), so older callers and plugins keep working.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from sveb.store import manifest as manifests
from sveb.store.files import atomic_write_bytes
from sveb.store.manifest import Manifest
from sveb.store.shards import read_shard, read_table, shard_done, shard_path, write_shard

# The tables a complete build never rewrites (kept once read); scores, estimates and the rest are read afresh
FROZEN_TABLES = ("problems", "rollouts", "states", "references", "screens", "hista_noise")


class Build(os.PathLike):
    """One build. `path` its folder, `manifest` its typed manifest (read on first use, then kept), `table(name)`
    a table's rows (a frozen table kept once read). str() and os.fspath() give the folder, so messages and
    path-taking helpers read it as before."""

    def __init__(self, path: str | Path, manifest: Manifest | None = None):
        self.path = Path(path)
        self._manifest = manifest
        self._tables: dict[tuple, pa.Table] = {}

    @classmethod
    def of(cls, build: Build | str | Path) -> Build:
        """A Build as given, or the build at a folder."""
        return build if isinstance(build, Build) else cls(build)

    @property
    def manifest(self) -> Manifest:
        if self._manifest is None:
            self._manifest = manifests.load_manifest(self.path)
        return self._manifest

    @property
    def name(self) -> str:
        return self.path.name

    def at(self, path: str | Path) -> Build:
        """The same build seen at another folder (a read-only build's writable mirror): its manifest kept."""
        return self if Path(path) == self.path else Build(path, self._manifest)

    def table(self, name: str, schema: pa.Schema | None = None) -> pa.Table:
        """All rows of one table (sveb.store.read_table: the schema's columns, or an empty table without shards)."""
        key = (name, schema)
        if key in self._tables:
            return self._tables[key]
        t = read_table(self.path / name, schema)
        if name in FROZEN_TABLES:
            self._tables[key] = t
        return t

    def stored(self, folder: str, key: str, fp: str) -> list[dict] | None:
        """The rows of a result shard (scores, estimates) stored under fingerprint fp; None if not (yet)."""
        path = shard_path(self.path / folder, key)
        return read_shard(path).to_pylist() if shard_done(path, fp) else None

    def stored_any(self, folder: str, key: str) -> list[dict]:
        """The rows of a result shard whatever fingerprint it was stored under ([] if there is none)."""
        path = shard_path(self.path / folder, key)
        return read_shard(path).to_pylist() if path.exists() else []

    def store(self, folder: str, key: str, table: pa.Table, fp: str) -> None:
        """Write a result shard (atomically, carrying fp)."""
        write_shard(shard_path(self.path / folder, key), table, fp)

    def write(self, rel: str, data: bytes) -> None:
        """Write a file of the build's results (diagnostics, timings) atomically."""
        atomic_write_bytes(self.path / rel, data)

    def __eq__(self, other) -> bool:
        return isinstance(other, Build) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __truediv__(self, other: str) -> Path:
        return self.path / other

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Build({str(self.path)!r})"
