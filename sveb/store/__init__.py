"""Sharded Parquet store: `<root>/<model_slug>/<domain>/<build_fp>/<table>/part-NNNNN.parquet`.

A shard is written to a temp file, fsynced and renamed, so it exists whole or not at all.
It counts as done only if its metadata carries the current stage fingerprint.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sveb.core.errors import SvebError

FP_KEY = b"sveb_fp"


class StoreError(SvebError, RuntimeError):
    pass


def build_dir(root: str | Path, model_slug: str, domain: str, build_fp: str) -> Path:
    return Path(root) / model_slug / domain / build_fp


def shard_path(table_dir: Path, index: int | str) -> Path:
    name = f"part-{index:05d}" if isinstance(index, int) else f"part-{index}"
    return table_dir / f"{name}.parquet"


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (os.umask can only set it: a thread
    creating a file between setting and restoring it would get the wrong mode)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def make_shared(path: Path, directory: bool = False) -> None:
    """The mode a plain open() or mkdir() would have given (0666 / 0777 less the umask): tempfile's private 0600 /
    0700 would keep a board or a site from a web server running as another user."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        make_shared(Path(tmp))  # the user's umask, not mkstemp's 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def staged_dir(out: Path):
    """A temp folder beside `out` to fill; it becomes `out` (absent or empty) whole when the block ends, and
    vanishes on any error, so a reader never sees half a folder."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-"))
    try:
        make_shared(tmp, directory=True)  # the user's umask, not mkdtemp's 0700
        yield tmp
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def writable(folder: str | Path) -> bool:
    """Whether this process may create files in `folder` (False on read-only storage, even for root)."""
    return os.access(folder, os.W_OK | os.X_OK)


def check_writable(path: str | Path, flag: str, file: bool = False) -> None:
    """Refuse a destination before any work: the folder `path` (or, file=True, the file `path`) cannot be written
    where its nearest existing folder is read-only, not a folder, or not ours to write."""
    p = Path(path).expanduser()
    if file and p.exists():
        if p.is_dir():
            raise StoreError(f"{flag} {path}: is a folder, expected a file")
        if not os.access(p, os.W_OK):
            raise StoreError(f"{flag} {path}: cannot write it (read-only storage or no permission)")
    q = p.absolute().parent if file else p.absolute()
    while not q.exists() and q != q.parent:
        q = q.parent
    if not q.is_dir():
        raise StoreError(f"{flag} {path}: {q} is a file, not a folder")
    if not writable(q):
        raise StoreError(f"{flag} {path}: cannot write in {q} (read-only storage or no permission)")


def check_own_out(out: str | Path, command: str, title: str, force: bool = False) -> None:
    """An output folder a command fills (`report`, `leaderboard html`): absent, empty, or one it wrote before (its
    index.html has the command's <title>); anything else is the user's and refused unless --force."""
    p = Path(out).expanduser()
    if not p.exists() or force:
        return
    if not p.is_dir():
        raise StoreError(f"--out {out}: is a file, not a folder")
    if not any(p.iterdir()):
        return
    try:
        ours = f"<title>{title}</title>" in (p / "index.html").read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        ours = False
    if not ours:
        raise StoreError(f"--out {out}: exists, is not empty and was not written by `sveb {command}`; pass a new or "
                         f"empty folder, or --force to write into it")


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
        why = (str(e).strip().splitlines() or [""])[0]
        why = why if len(why) <= 160 else why[:159] + "…"
        raise StoreError(f"{path}: unreadable Parquet shard ({type(e).__name__}: {why}); delete it and rerun the "
                         f"command that wrote it (an export: export or import it again)") from None


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
                         f"{str(e)[:160]})") from None


def write_manifest(bdir: Path, manifest: dict) -> None:
    manifest = {**manifest, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_bytes(bdir / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode())


# The types a manifest's well-known keys must have where present (None: also null): a wrong one is a one-line
# error where it is read, never an AttributeError after scores were written.
MANIFEST_TYPES = {"config": (dict,), "export": (dict,), "fingerprints": (dict,), "truncated": (dict, type(None)),
                  "model": (str,), "domain": (str,), "build_fp": (str,), "status": (str,),
                  "n_problems": (int,), "n_states": (int,), "n_candidates": (int,)}


def read_manifest(bdir: Path) -> dict:
    path = Path(bdir) / "manifest.json"
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError:
        raise StoreError(f"{bdir}: no manifest.json (not a build directory)") from None
    except IsADirectoryError:
        raise StoreError(f"{path}: is a folder, not a manifest file") from None
    except json.JSONDecodeError as e:
        raise StoreError(f"{path}: corrupt manifest ({e.msg})") from None
    except UnicodeDecodeError:
        raise StoreError(f"{path}: corrupt manifest (not UTF-8 text)") from None
    except ValueError as e:  # after JSONDecodeError and UnicodeDecodeError, its subclasses: a too long int
        from sveb.data_builders.files import json_why
        raise StoreError(f"{path}: corrupt manifest ({json_why(e)})") from None
    except RecursionError:
        raise StoreError(f"{path}: corrupt manifest (nested too deeply)") from None
    except OSError as e:
        raise StoreError(f"{path}: unreadable ({e.strerror or type(e).__name__})") from None
    if not isinstance(m, dict):
        raise StoreError(f"{path}: malformed manifest (a JSON {type(m).__name__}, expected an object)")
    for key, types in MANIFEST_TYPES.items():
        v = m.get(key)
        if key in m and (not isinstance(v, types) or (int in types and (isinstance(v, bool) or v < 0))):
            want = "an object" if dict in types else "a whole number >= 0" if int in types else "a string"
            raise StoreError(f"{path}: malformed manifest ({key} is {json.dumps(v)[:40]}, expected {want})")
    return m


def complete(bdir: Path) -> bool:
    """Whether the build's manifest says every stage finished."""
    return read_manifest(bdir).get("status") == "complete"


def list_builds(root: str | Path) -> list[Path]:
    """Every build directory under root (those holding a manifest.json, up to 3 levels down: `sveb build`'s
    <model>/<domain>/<fp>, or exports anywhere above that), oldest first; a root that is itself a build (e.g. an
    export folder) is that one build."""
    if (Path(root) / "manifest.json").exists():
        return [Path(root)]
    found = [p.parent for pattern in ("*/manifest.json", "*/*/manifest.json", "*/*/*/manifest.json")
             for p in Path(root).glob(pattern)]
    return sorted(found, key=lambda p: (p / "manifest.json").stat().st_mtime)


# Key columns that order each table's rows for its content hash (shard layout must not change the hash).
CONTENT_KEYS = {"problems": ("problem_id",), "rollouts": ("problem_id", "rollout_idx"), "states": ("state_id",),
                "references": ("state_id",), "screens": ("problem_id", "rollout_idx")}
CONTENT_TABLES = ("problems", "rollouts", "states", "references")


def table_hash(table_dir: Path, keys: tuple[str, ...] | None = None) -> str:
    """sha256 of a table's rows in key order, each row as canonical JSON: the same rows give the same hash
    whatever the shard layout, the Parquet writer or the metadata."""
    import hashlib

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
    import hashlib

    lines = [f"{t}:{table_hash(Path(bdir) / t)}" for t in tables]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
