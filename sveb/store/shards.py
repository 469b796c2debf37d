"""Sharded Parquet tables: `<root>/<model_slug>/<domain>/<build_fp>/<table>/part-NNNNN.parquet`.

A shard is written to a temp file, fsynced and renamed, so it exists whole or not at all.
It counts as done only if its metadata carries the current stage fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sveb.core.errors import brief
from sveb.store.files import StoreError, atomic_write_bytes

FP_KEY = b"sveb_fp"


def build_dir(root: str | Path, model_slug: str, domain: str, build_fp: str) -> Path:
    return Path(root) / model_slug / domain / build_fp


def shard_path(table_dir: Path, index: int | str) -> Path:
    name = f"part-{index:05d}" if isinstance(index, int) else f"part-{index}"
    return table_dir / f"{name}.parquet"


def write_shard(path: Path, table: pa.Table, fp: str) -> None:
    """Write a shard atomically, its metadata carrying the fingerprint it was made under."""
    meta = dict(table.schema.metadata or {})
    meta[FP_KEY] = fp.encode()
    buf = pa.BufferOutputStream()  # shards are small (a few problems or states): serialise in memory
    pq.write_table(table.replace_schema_metadata(meta), buf)
    atomic_write_bytes(path, buf.getvalue().to_pybytes())


def shard_fp(path: Path) -> str | None:
    """The fingerprint a shard was written with; None if missing or unreadable."""
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return None
    return meta.get(FP_KEY, b"").decode() or None


def shard_done(path: Path, fp: str) -> bool:
    return path.exists() and shard_fp(path) == fp


def read_shard(path: Path) -> pa.Table:
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError, KeyError, IndexError, TypeError) as e:  # corrupt bytes
        raise StoreError(f"{path}: unreadable Parquet shard ({type(e).__name__}: {brief(e, 160)}); delete it and "
                         f"rerun the command that wrote it (an export: export or import it again)") from None


def read_table(table_dir: Path, schema: pa.Schema | None = None, fp: str | None = None) -> pa.Table:
    """All shards of a table (only those carrying `fp` when given), concatenated in name order."""
    paths = sorted(Path(table_dir).glob("part-*.parquet"))
    tables = [read_shard(p) for p in paths if fp is None or shard_fp(p) == fp]
    if not tables:
        if schema is None:
            raise StoreError(f"{table_dir}: no shards")
        return schema.empty_table()
    tables = [t.replace_schema_metadata(None) for t in tables]
    try:
        if schema is not None:
            tables = [t.select(schema.names).cast(schema) for t in tables]
        return pa.concat_tables(tables)
    except (pa.ArrowException, ValueError, KeyError, TypeError) as e:
        raise StoreError(f"{table_dir}: its shards do not have the table's columns ({type(e).__name__}: "
                         f"{brief(e, 160)})") from None


# Key columns that order each table's rows for its content hash (shard layout must not change the hash).
CONTENT_KEYS = {"problems": ("problem_id",), "rollouts": ("problem_id", "rollout_idx"), "states": ("state_id",),
                "references": ("state_id",), "screens": ("problem_id", "rollout_idx")}
CONTENT_TABLES = ("problems", "rollouts", "states", "references")


def table_hash(table_dir: Path, keys: tuple[str, ...] | None = None) -> str:
    """sha256 of a table's rows in key order, each row as canonical JSON: the same rows give the same hash
    whatever the shard layout, the Parquet writer or the metadata."""
    rows = read_table(table_dir).to_pylist()
    keys = keys or CONTENT_KEYS.get(Path(table_dir).name) or ()
    if keys:
        try:
            rows.sort(key=lambda r: tuple(r[k] for k in keys))
        except (KeyError, TypeError):
            raise StoreError(f"{table_dir}: rows without a usable {', '.join(keys)} key") from None
    h = hashlib.sha256()
    for r in rows:
        h.update(json.dumps(r, sort_keys=True, separators=(",", ":"), default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def content_hash(bdir: Path, tables: tuple[str, ...] = CONTENT_TABLES) -> str:
    """One hash of a build's data (problems, rollouts, states, references): what a trained estimator's cache,
    an export and a result bundle are keyed on, never the build's name or path."""
    lines = [f"{t}:{table_hash(Path(bdir) / t)}" for t in tables]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
