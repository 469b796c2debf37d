"""Files a reader never sees half-written: atomic writes, staged folders, the user's file modes, and the checks
that a destination can be written before any work."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from sveb.core.errors import SvebError


class StoreError(SvebError, RuntimeError):
    pass


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


def hash_file(h, path: Path) -> None:
    """Feed a file's bytes to the hash object `h` in 4 MiB chunks (weights and checkpoints are GBs)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)


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
