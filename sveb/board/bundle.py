"""Result bundles: one estimator's per-state estimates on one frozen build, with who made them and how.

A bundle is a folder (optionally a .tar.gz or .zip of it; archive.py unpacks one) holding
- estimates.parquet: state_id, protocol, value, own_shift (one row per state and protocol);
- bundle.json: the estimator (name, target, resolved parameters, provenance), the build's content hash and
  per-table hashes, SVEB's version, the machine, wall time and the cost figures measured where it ran.
It carries no scores: a board recomputes every score from the estimates and the build's references.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sveb import store
from sveb.board import validate
from sveb.core import device as hardware
from sveb.core.errors import SvebError, brief
from sveb.data_builders.files import json_why

FORMAT = "sveb-bundle"
FORMAT_VERSION = 1
ESTIMATES = pa.schema([("state_id", pa.string()), ("protocol", pa.string()), ("value", pa.float64()),
                       ("own_shift", pa.float64())])
ARCHIVES = ("tar.gz", "zip")


class BundleError(SvebError, ValueError):
    pass


def dist_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def provenance(entry) -> dict:
    """Where an estimator comes from: builtin (SVEB's version), the plugin distribution (name and version) whose
    entry point registered it, or an import path (with the distribution that ships its module, if any)."""
    if entry.origin == "sveb":
        return {"kind": "builtin", "distribution": "sveb", "version": dist_version("sveb"), "target": entry.target}
    if entry.origin == "import path":
        from importlib.metadata import packages_distributions
        dists = packages_distributions().get(entry.target.split(".")[0].split(":")[0], [])
        return {"kind": "import path", "distribution": dists[0] if dists else None,
                "version": dist_version(dists[0]) if dists else None, "target": entry.target}
    return {"kind": "plugin", "distribution": entry.origin, "version": dist_version(entry.origin),
            "target": entry.target}


def machine() -> dict:
    """CPU flags that decide speed and dtype, and the GPU's name where there is one."""
    import platform
    import subprocess

    gpu = None
    if hardware.nvidia_gpus():
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=20, check=True).stdout.strip().splitlines()[0]
        except (subprocess.SubprocessError, OSError, IndexError):
            gpu = "unknown"
    return {"cpu_flags": hardware.describe(), "cpu": platform.processor() or platform.machine(), "gpu": gpu}


def build_identity(bdir: store.Build | Path) -> dict:
    """The build a bundle's estimates belong to: content hash, per-table hashes and what it is."""
    build = store.Build.of(bdir)
    m = build.manifest
    ex = m.export
    tables = ({t: v["sha256"] for t, v in ex["tables"].items() if t in store.CONTENT_TABLES} if ex
              else {t: store.table_hash(build / t) for t in store.CONTENT_TABLES})
    return {"content_hash": ex["content_hash"] if ex else store.content_hash(build.path), "tables": tables,
            "build_fp": m.build_fp if m.build_fp is not None else build.name, "model": m.model, "domain": m.domain,
            "n_states": m.n_states}


def estimates_key(meta: dict, table: pa.Table) -> str:
    """The bundle's identity on a board: its estimates and who made them, not when or where."""
    est = meta["estimator"]
    ident = {"name": est["name"], "params": est["params"], "target": est.get("target"),
             "provenance": {k: (est.get("provenance") or {}).get(k) for k in ("kind", "distribution", "version")},
             "build": meta["build"]["content_hash"]}
    cols = (table.column(c).to_pylist() for c in ESTIMATES.names)
    rows = sorted(zip(*cols), key=lambda r: (str(r[1]), str(r[0])))  # str: a null is ordered, not a TypeError
    h = hashlib.sha256(json.dumps(ident, sort_keys=True).encode())
    for sid, proto, v, d in rows:
        h.update(json.dumps([sid, proto, repr(v), repr(d)]).encode() + b"\n")
    return h.hexdigest()[:16]


def check_out(out: Path, archive: str | None = None) -> Path:
    """Refuse a bundle destination before any work: an existing non-empty folder, or an unknown archive kind."""
    out = Path(out)
    if archive is not None and archive not in ARCHIVES:
        raise BundleError(f"--archive {archive}: expected one of {', '.join(ARCHIVES)}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"--out {out}: exists and is not an empty folder; pass a new folder")
    return out


def write_bundle(out: Path, meta: dict, rows: list[dict], archive: str | None = None) -> Path:
    """A new bundle folder `out` (appearing whole or not at all), and `out.<archive>` beside it when asked."""
    out = check_out(out, archive)
    table = pa.Table.from_pylist([{c: r[c] for c in ESTIMATES.names} for r in rows], schema=ESTIMATES)
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, **meta, "key": estimates_key(meta, table)}
    with store.staged_dir(out) as tmp:
        pq.write_table(table, tmp / "estimates.parquet", compression="zstd")
        (tmp / "bundle.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=_nan_none))
    if archive == "tar.gz":
        pack_tgz(out, out.with_name(out.name + ".tar.gz"))
    elif archive:
        shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name)
    return out


def pack_tgz(src: Path, path: Path) -> Path:
    """`src` as `path` (.tar.gz, members under src's name) with the same bytes every time: members sorted, times,
    owners and modes fixed, no gzip time stamp, so a regenerated site or archive is identical to the committed one."""
    import gzip
    import io
    import tarfile

    def tidy(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
        tf.add(src, arcname=src.name, recursive=False, filter=tidy)
        for p in sorted(src.rglob("*")):
            tf.add(p, arcname=f"{src.name}/{p.relative_to(src).as_posix()}", recursive=False, filter=tidy)
    store.atomic_write_bytes(path, packed.getvalue())
    return path


def _nan_none(x):
    return None if isinstance(x, float) and math.isnan(x) else str(x)


MAX_MB = 256  # default limit on a bundle, packed and unpacked (`leaderboard add --max-bundle-mb` raises it)
REQUIRED = {"estimator": ("name", "params", "provenance"), "build": ("content_hash",)}


def read_bundle(folder: Path) -> tuple[dict, pa.Table]:
    """bundle.json and the estimates of a bundle folder, their form checked (not yet against a build)."""
    folder = Path(folder)
    for name in ("bundle.json", "estimates.parquet"):
        f = folder / name
        if f.is_symlink() or (f.exists() and not f.is_file()):
            raise BundleError(f"{f}: a link or not a file; refused")
        if f.exists() and f.stat().st_size > MAX_MB * 2 ** 20:
            raise BundleError(f"{f}: over the {MAX_MB} MiB bundle limit")
    try:
        meta = json.loads((folder / "bundle.json").read_text())
    except FileNotFoundError:
        raise BundleError(f"{folder}: no bundle.json (not a result bundle)") from None
    except json.JSONDecodeError as e:
        raise BundleError(f"{folder}/bundle.json: not JSON ({e.msg}, line {e.lineno})") from None
    except (UnicodeDecodeError, RecursionError) as e:
        raise BundleError(f"{folder}/bundle.json: not JSON ({type(e).__name__})") from None
    except ValueError as e:  # after its subclasses above: int() refusing a too long number
        raise BundleError(f"{folder}/bundle.json: not JSON ({json_why(e)})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BundleError(f"{folder}/bundle.json: format is not '{FORMAT}'")
    if meta.get("format_version") != FORMAT_VERSION:
        raise BundleError(f"{folder}/bundle.json: format_version {meta.get('format_version')} (this SVEB reads "
                          f"{FORMAT_VERSION})")
    for part, keys in REQUIRED.items():
        for k in keys:
            if not isinstance(meta.get(part), dict) or k not in meta[part]:
                raise BundleError(f"{folder}/bundle.json: no {part}.{k}")
    est, build = meta["estimator"], meta["build"]
    types = [(est["name"], str, "estimator.name"), (est["params"], dict, "estimator.params"),
             (est["provenance"], (dict, type(None)), "estimator.provenance"),
             (est.get("target"), (str, type(None)), "estimator.target"),
             (est.get("params_fp"), (str, type(None)), "estimator.params_fp"),
             (build["content_hash"], str, "build.content_hash"),
             (build.get("tables"), (dict, type(None)), "build.tables"),
             (meta.get("cost"), (dict, type(None)), "cost"), (meta.get("machine"), (dict, type(None)), "machine")]
    for value, want, key in types:
        if not isinstance(value, want) or (want is str and not value):
            raise BundleError(f"{folder}/bundle.json: {key} is {json.dumps(value, default=str)[:40]}, not a valid "
                              f"{'string' if want is str else 'object'}")
    if any(not isinstance(c, (dict, type(None))) for c in (meta.get("cost") or {}).values()):
        raise BundleError(f"{folder}/bundle.json: cost holds a value that is not an object per protocol")
    bad = validate.problem(meta)  # before anything is written: one wrong type would poison the board's table
    if bad:
        raise BundleError(f"{folder}/bundle.json: {bad}")
    try:
        table = pq.read_table(folder / "estimates.parquet")
    except FileNotFoundError:
        raise BundleError(f"{folder}: no estimates.parquet") from None
    except (OSError, pa.ArrowException, ValueError, KeyError, IndexError) as e:
        raise BundleError(f"{folder}/estimates.parquet: unreadable ({type(e).__name__}: {brief(e, 120)})") from None
    missing = [c for c in ESTIMATES.names if c not in table.column_names]
    if missing:
        raise BundleError(f"{folder}/estimates.parquet: no column {missing[0]}")
    try:
        table = table.select(ESTIMATES.names).cast(ESTIMATES)
    except (pa.ArrowException, ValueError, KeyError) as e:
        raise BundleError(f"{folder}/estimates.parquet: wrong column types "
                          f"({type(e).__name__}: {brief(e, 120)})") from None
    return meta, table


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
