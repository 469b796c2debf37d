"""A build as a frozen dataset: one Parquet file per table, the manifest with a content hash per table, and a
dataset card (README.md) whose YAML header lets Hugging Face `datasets` load each table as a config.

Anyone can score an estimator on an export without sampling: the folder is a build (`sveb eval --build DIR`).
The hashes are those of `sveb.store.table_hash` (rows in key order), so they do not depend on the shard layout,
and an export's `content_hash` equals its source build's. Hidden states are not exported: they are recomputed
from the model, whose weights hash the card states and a hidden-state estimator checks.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sveb import store
from sveb.core.errors import SvebError, brief
from sveb.core.models import resolve
from sveb.store.export_card import card
from sveb.store.files import hash_file
from sveb.store.handle import Build
from sveb.store.hista_json import TOKEN_LEVEL, UNAVAILABLE
from sveb.store.manifest import Manifest

# The tables an export carries (screens: the filter's screening rollouts, where the build has them; hista_noise: an
# imported hista-json file's noise MAEs per state, sveb.store.hista_json).
TABLES = ("problems", "rollouts", "states", "references", "screens", "hista_noise")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


class ExportError(SvebError, ValueError):
    pass


def weight_files(model_dir: str | Path) -> list[Path]:
    """A model directory's weight files, in name order (tokenizer and config files are not weights)."""
    return sorted(p for p in Path(model_dir).rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))


def weights_hash(model_dir: str | Path) -> str:
    """sha256 over a model directory's weight files (name and bytes, in name order): which weights a build's
    hidden states must come from. Tokenizer and config files are not part of it."""
    model_dir = Path(model_dir)
    files = weight_files(model_dir)
    if not files:
        raise ExportError(f"{model_dir}: no weight files ({', '.join(WEIGHT_SUFFIXES)}) to hash")
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(model_dir).as_posix().encode() + b"\0")
        hash_file(h, f)
    return h.hexdigest()


def sveb_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("sveb")
    except PackageNotFoundError:
        return "unknown"


def _table(build: Build, name: str) -> pa.Table:
    """A table's rows as the build holds them (shard order, every column): the export changes no row."""
    return build.table(name).replace_schema_metadata(None)


def _model_dir(model: str) -> str:
    return resolve(model)


def export_build(bdir: Build | Path, out: Path, model_dir: str | Path | None = None) -> Path:
    """Write the build `bdir` as a frozen dataset folder `out` (a new folder: nothing there is overwritten).

    model_dir: the weights the build was sampled with (default: the build's model, resolved)."""

    build, out = Build.of(bdir), Path(out)
    bdir, manifest = build.path, build.manifest
    if not manifest.complete:
        raise ExportError(f"{bdir}: the build is not complete (status {manifest.status}); "
                          f"rerun its `sveb build` first")
    if out.exists() and any(out.iterdir()):
        raise ExportError(f"--out {out}: exists and is not empty; pass a new folder")
    names = [t for t in TABLES if (bdir / t).is_dir() and any((bdir / t).glob("part-*.parquet"))]
    missing = [t for t in store.CONTENT_TABLES if t not in names]
    if missing:
        raise ExportError(f"{bdir}: no {missing[0]} table; not a complete build")
    prev = manifest.export or {}
    kept = {k: v for k, v in prev.items() if k not in ("tables", "content_hash", "model_weights_sha256")}
    if manifest.export_format == "hista-json" and model_dir is None:  # imported text: no weights sampled it here
        weights = None
    else:
        weights = weights_hash(model_dir or _model_dir(manifest.model))
    with store.staged_dir(out) as tmp:  # the folder appears whole or not at all
        tables, info = {}, {}
        for name in names:
            t = _table(build, name)
            (tmp / name).mkdir()
            pq.write_table(t, store.shard_path(tmp / name, 0), compression="zstd")
            tables[name] = t
            info[name] = {"sha256": store.table_hash(tmp / name), "rows": t.num_rows}
        export = {**kept, "tables": info, "content_hash": store.content_hash(tmp), "model_weights_sha256": weights,
                  "sveb_version": sveb_version(), "source_build": bdir.name}
        full = {**manifest.raw, "export": export}
        (tmp / "manifest.json").write_text(json.dumps(full, indent=2, sort_keys=True))
        (tmp / "README.md").write_text(card(full, tables))
    return out


def is_export(bdir: Build | Path) -> bool:
    try:
        return Build.of(bdir).manifest.is_export
    except store.StoreError:
        return False


def _stamp(bdir: Path, names) -> tuple:
    return tuple((n, p.name, p.stat().st_size, p.stat().st_mtime_ns)
                 for n in names for p in sorted((bdir / n).glob("part-*.parquet")))


_verified: dict[Path, tuple] = {}
RACY_S = 2  # seconds: coarser than any file system's timestamp tick


def verify(bdir: Build | Path) -> Manifest:
    """The export's manifest, after checking every table against its content hash; a one-line error names the
    first table that differs (edited, truncated or missing). Checked once per process while files are unchanged."""
    manifest = Build.of(bdir).manifest
    bdir = Path(bdir).resolve()
    tables = check_export_manifest(bdir, manifest)
    stamp = _stamp(bdir, tables)
    if _verified.get(bdir) == stamp:
        return manifest
    for name, want in tables.items():
        if not any((bdir / name).glob("part-*.parquet")):
            raise ExportError(f"{bdir}: table {name} is missing; the export is incomplete")
        try:
            got = store.table_hash(bdir / name)
        except store.StoreError as e:
            raise ExportError(f"{bdir}: table {name} is unreadable ({brief(e, 300)})") from None
        if got != want["sha256"]:
            raise ExportError(f"{bdir}: table {name} does not match its content hash in manifest.json "
                              f"(expected {want['sha256'][:16]}, found {got[:16]}): the export was modified")
    # "racy" files (git's word): a same-size edit within the file system's timestamp tick of the last write
    # leaves (size, mtime) unchanged, so a stamp is trusted only once every file is older than RACY_S
    settled = time.time_ns() - RACY_S * 10**9
    if all(mtime < settled for *_, mtime in stamp):
        _verified[bdir] = stamp
    return manifest


def check_export_manifest(bdir: Path, manifest: dict) -> dict:
    """The export part of a manifest, its form checked: a hash for every content table (an export without them
    would check nothing), only known table names, a content hash that is the one of those table hashes, the
    labels a reader relies on. Returns export.tables."""
    where = f"{bdir}/manifest.json"
    ex = manifest.get("export")
    if not isinstance(ex, dict):
        raise ExportError(f"{where}: no export section; not an SVEB export")
    tables = ex.get("tables")
    if not isinstance(tables, dict) or not tables:
        raise ExportError(f"{where}: no export table hashes (export.tables); refused: an export is checked "
                          f"against them")
    for name, info in tables.items():
        if name not in TABLES:
            raise ExportError(f"{where}: export.tables names an unknown table {str(name)[:40]!r} "
                              f"(known: {', '.join(TABLES)})")
        if not isinstance(info, dict) or not isinstance(info.get("sha256"), str):
            raise ExportError(f"{where}: export.tables.{name} has no sha256")
    need = [t for t in store.CONTENT_TABLES if t not in tables]
    if need:
        raise ExportError(f"{where}: no hash for table {need[0]} in export.tables; refused: every table of an "
                          f"export is checked against its hash")
    import hashlib
    lines = "\n".join(f"{t}:{tables[t]['sha256']}" for t in store.CONTENT_TABLES)
    want = hashlib.sha256(lines.encode()).hexdigest()[:16]
    if ex.get("content_hash") != want:
        raise ExportError(f"{where}: export.content_hash {str(ex.get('content_hash'))[:20]} is not the hash of its "
                          f"tables ({want}): the manifest was edited")
    for key in ("model", "domain", "build_fp"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise ExportError(f"{where}: no {key}")
    if manifest.get("status") != "complete":
        raise ExportError(f"{where}: status {manifest.get('status')!r}; an export is a complete build")
    return tables


def check_weights(bdir: Build | Path, manifest: dict | None = None, model_dir: str | Path | None = None) -> None:
    """For an estimator that reads the model: its weights must be those the export was sampled with. An imported
    hista-json build has no token ids to run a model on: refused (sveb.store.hista_json). manifest: the build's
    own by default."""
    manifest = Build.of(bdir).manifest if manifest is None else Manifest.of(manifest)
    if manifest.export_format == "hista-json":
        raise ExportError(f"{bdir}: {TOKEN_LEVEL} are {UNAVAILABLE}: it holds text only and t counts characters")
    want = manifest.weights_sha256
    if not want:
        return  # a build made here: its model is the one that sampled it
    wdir = model_dir or _model_dir(manifest.model)
    got = cached_weights_hash(wdir)
    if got != want:
        raise ExportError(f"{bdir}: model {manifest.model} at {wdir} has weights sha256 {got[:16]}, the export's "
                          f"card says {want[:16]}: hidden states would not be those of the model that sampled it")


_weights_memo: dict[tuple, str] = {}


def cached_weights_hash(model_dir: str | Path) -> str:
    """weights_hash, once per process and state of the files (path, size, mtime): weights retrained in place
    are hashed again."""
    path = Path(model_dir).resolve()
    key = (str(path), tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in weight_files(path)))
    if key not in _weights_memo:
        _weights_memo[key] = weights_hash(path)
    return _weights_memo[key]
