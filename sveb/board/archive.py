"""Unpacking a submitted bundle archive (.tar.gz or .zip), which may be hostile: sizes, member counts, names,
links and special files are checked on the headers before anything is written, and the bytes written are counted."""

from __future__ import annotations

import tarfile
import zipfile
import zlib
from pathlib import Path

from sveb.board.bundle import MAX_MB, BundleError
from sveb.core.errors import brief

MAX_MEMBERS = 64  # a bundle is two files; an archive of thousands of members is not one


def _member_name(path: Path, name: str) -> None:
    """An archive member's name: relative, inside the bundle (no .., no absolute or drive paths)."""
    parts = Path(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or (parts and ":" in parts[0]):
        raise BundleError(f"{path}: archive member {name} is an absolute path; refused")
    if ".." in parts:
        raise BundleError(f"{path}: archive member {name} points outside the bundle; refused")


def _limits(path: Path, max_mb: float) -> int:
    limit = int(max_mb * 2 ** 20)
    size = path.stat().st_size
    if size > limit:
        raise BundleError(f"{path}: {size / 2 ** 20:.1f} MiB packed, over the {max_mb:g} MiB bundle limit "
                          f"(--max-bundle-mb raises it)")
    return limit


def _over(path: Path, total: int, limit: int, max_mb: float) -> BundleError:
    return BundleError(f"{path}: unpacks to more than {max_mb:g} MiB ({total / 2 ** 20:.1f} MiB declared so far), over "
                       f"the bundle limit (--max-bundle-mb raises it); nothing was unpacked")


def _check_tar(path: Path, limit: int, max_mb: float) -> None:
    """One streaming pass over the headers (no member data is kept, none is written): names, kinds and the
    declared sizes, refused at the first member that breaks the rules, before anything is unpacked."""
    total = n = 0
    with tarfile.open(path, "r|gz") as tf:
        for m in tf:
            n += 1
            if n > MAX_MEMBERS:
                raise BundleError(f"{path}: more than {MAX_MEMBERS} archive members; not a bundle")
            _member_name(path, m.name)
            if not (m.isfile() or m.isdir()):
                raise BundleError(f"{path}: archive member {m.name} is a link or a special file; refused")
            total += m.size
            if total > limit:
                raise _over(path, total, limit, max_mb)


def _extract_tar(path: Path, into: Path, limit: int, max_mb: float) -> None:
    written = 0
    with tarfile.open(path, "r:gz") as tf:
        for m in tf:
            _member_name(path, m.name)
            dest = into / m.name
            if m.isdir():
                dest.mkdir(parents=True, exist_ok=True)
                continue
            if not m.isfile():
                raise BundleError(f"{path}: archive member {m.name} is a link or a special file; refused")
            dest.parent.mkdir(parents=True, exist_ok=True)
            src = tf.extractfile(m)
            with open(dest, "wb") as f:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > limit:
                        raise _over(path, written, limit, max_mb)
                    f.write(chunk)


def _check_zip(path: Path, zf: zipfile.ZipFile, limit: int, max_mb: float) -> None:
    import stat
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise BundleError(f"{path}: more than {MAX_MEMBERS} archive members; not a bundle")
    total = 0
    for i in infos:
        _member_name(path, i.filename)
        mode = i.external_attr >> 16
        if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # no type bits: a plain file
            raise BundleError(f"{path}: archive member {i.filename} is a link or a special file; refused")
        total += i.file_size
        if total > limit:
            raise _over(path, total, limit, max_mb)


def _extract_zip(path: Path, zf: zipfile.ZipFile, into: Path, limit: int, max_mb: float) -> None:
    written = 0
    for i in zf.infolist():
        dest = into / i.filename
        if i.is_dir():
            dest.mkdir(parents=True, exist_ok=True)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(i) as src, open(dest, "wb") as f:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > limit:
                    raise _over(path, written, limit, max_mb)
                f.write(chunk)


def unpack(path: Path, into: Path, max_mb: float = MAX_MB) -> Path:
    """A bundle folder: `path` itself, or the one folder a .tar.gz / .zip archive holds, extracted into `into`.
    An archive is refused before anything is unpacked when it is over `max_mb` MiB packed, declares more than
    `max_mb` MiB unpacked, or holds an absolute or escaping name, a link or a special file; the bytes written are
    counted too (a member larger than it says stops at the limit)."""
    path = Path(path)
    if path.is_dir():
        return path
    if not path.exists():
        raise BundleError(f"{path}: no such bundle (a folder, .tar.gz or .zip)")
    if max_mb <= 0:
        raise BundleError(f"--max-bundle-mb {max_mb:g}: must be positive")
    try:
        if path.name.endswith((".tar.gz", ".tgz")):
            limit = _limits(path, max_mb)
            _check_tar(path, limit, max_mb)
            _extract_tar(path, Path(into), limit, max_mb)
        elif path.suffix == ".zip":
            limit = _limits(path, max_mb)
            with zipfile.ZipFile(path) as zf:
                _check_zip(path, zf, limit, max_mb)
                _extract_zip(path, zf, Path(into), limit, max_mb)
        else:
            raise BundleError(f"{path}: not a bundle folder, .tar.gz or .zip")
    except (tarfile.TarError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError,
            RuntimeError, ValueError, OSError) as e:
        if isinstance(e, BundleError):
            raise
        raise BundleError(f"{path}: unreadable archive ({type(e).__name__}: {brief(e, 120)})") from None
    found = [p.parent for p in Path(into).rglob("bundle.json")]
    if len(found) != 1:
        raise BundleError(f"{path}: the archive holds {len(found)} bundle.json files; expected one")
    return found[0]
