"""`sveb import` and `--build hub:ID`: an export published as a Hugging Face dataset, read back through `datasets`
(one config per table, as its card declares) and checked against the hashes in its manifest."""

from __future__ import annotations

import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from sveb.core.config import BuildConfig
from sveb.core.errors import brief, path_like
from sveb.store import StoreError, read_manifest, shard_path, staged_dir
from sveb.store.export import ExportError, check_export_manifest, verify


def local_name(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", spec).strip("-")


def _fetch(spec: str, filename: str, into: Path) -> Path:
    """One file of the export: from a local folder, else from the hub dataset repo `spec`."""
    local = Path(spec).expanduser()
    _check_local(spec)
    if local.is_dir():
        if not (local / filename).exists():
            raise ExportError(f"{spec}: no {filename} (not an SVEB export)")
        return Path(shutil.copy(local / filename, into / filename))
    try:
        from huggingface_hub import hf_hub_download
        return Path(hf_hub_download(spec, filename, repo_type="dataset", local_dir=into))
    except Exception as e:  # unreachable, unknown or gated: all mean "cannot import it here"
        raise ExportError(f"cannot fetch {filename} of dataset {spec} from the Hugging Face hub "
                          f"({type(e).__name__}); download the folder and pass its path") from None


def _check_local(spec: str) -> None:
    """A spec that names a local path is read from disk, never looked up on the hub."""
    local = Path(spec).expanduser()
    if path_like(spec) and not local.is_dir():
        raise ExportError(f"{spec}: is a file, not an export folder" if local.exists() else
                          f"{spec}: no such folder (a local export folder, or a hub dataset id OWNER/NAME)")


def import_build(spec: str, out: Path) -> Path:
    """Copy the export `spec` (a hub dataset id or a local folder) into the new folder `out`, each table read
    with `datasets.load_dataset(spec, table)`; refused unless every table matches its content hash."""
    import datasets
    out = Path(out)
    _check_local(spec)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"--out {out}: exists and is not an empty folder; pass a new folder")
    with staged_dir(out) as tmp:
        manifest = _manifest(spec, tmp)
        _fetch(spec, "README.md", tmp)
        split = BuildConfig.from_manifest(manifest).split
        for table in manifest.get("export", {}).get("tables", {}):
            try:
                ds = datasets.load_dataset(str(spec), table, split=split, cache_dir=str(tmp / ".cache"))
            except Exception as e:
                raise ExportError(f"{spec}: cannot load table {table} with datasets "
                                  f"({type(e).__name__}: {brief(e)})") from None
            (tmp / table).mkdir()
            ds.to_parquet(str(shard_path(tmp / table, 0)))
            del ds
        shutil.rmtree(tmp / ".cache", ignore_errors=True)
        with _named(spec, tmp):
            verify(tmp)
    return out


@contextmanager
def _named(spec: str, tmp: Path):
    """Errors about the staging folder `tmp` (which vanishes) name the export `spec` instead."""
    try:
        yield
    except (StoreError, ExportError) as e:
        raise ExportError(str(e).replace(str(tmp.resolve()), spec).replace(str(tmp), spec)) from None


def _manifest(spec: str, tmp: Path) -> dict:
    """The export's manifest.json, fetched into `tmp` and checked as `sveb eval --build` checks an export's
    (store.read_manifest, export.check_export_manifest): a one-line error naming `spec` otherwise."""
    _fetch(spec, "manifest.json", tmp)
    with _named(spec, tmp):
        manifest = read_manifest(tmp)
        check_export_manifest(tmp, manifest)
    return manifest
