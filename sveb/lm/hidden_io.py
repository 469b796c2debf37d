"""The hidden-state cache's files, streamed: a group's `.npz` is written one rollout at a time by a background
thread while the next batch computes (so host memory holds a few rollouts, never a group), and read one
rollout at a time (np.load reads an uncompressed member without the rest of the file). On a GPU, states go to
the host through pinned buffers copied asynchronously; the writer waits on each copy's event."""

from __future__ import annotations

import os
import queue
import tempfile
import threading
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sveb.lm import timers
from sveb.store import make_shared

QUEUE_ITEMS = 32  # rollouts' arrays waiting for the writer: the bound on host memory the pass holds


class NpzStream:
    """An .npz written member by member (as np.savez writes it, uncompressed) into a temp file beside `path`,
    renamed to `path` on close(): a reader sees the whole file or none."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".npz")
        self.tmp, self.file = Path(tmp), os.fdopen(fd, "wb")
        make_shared(self.tmp)
        self.zip = zipfile.ZipFile(self.file, "w", zipfile.ZIP_STORED, allowZip64=True)

    def add(self, name: str, array: np.ndarray) -> None:
        with self.zip.open(f"{name}.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array(f, np.asanyarray(array), allow_pickle=False)
        timers.count("disk.write", array.nbytes)

    def close(self) -> None:
        self.zip.close()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.tmp, self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def abort(self) -> None:
        try:
            self.zip.close()
            self.file.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def save(path: Path, arrays: dict[int, np.ndarray]) -> None:
    """{rollout_idx: array} as `<path>`, members r<idx> (what read_members and np.load read)."""
    with timers.timed("disk.write"):
        out = NpzStream(path)
        try:
            for k, v in arrays.items():
                out.add(f"r{k}", v)
        except BaseException:
            out.abort()
            raise
        out.close()


def read_members(path: Path, idxs: Iterable[int] | None = None) -> dict[int, np.ndarray]:
    """{rollout_idx: stored array} of the rollouts `idxs` (every one if None), each member read on its own."""
    with timers.timed("disk.read"), np.load(path) as z:
        names = z.files if idxs is None else [f"r{i}" for i in idxs]
        out = {int(k[1:]): z[k] for k in names}
    timers.count("disk.read", sum(a.nbytes for a in out.values()))
    return out


class Pending:
    """A device tensor on its way to a pinned host buffer; array() waits for the copy."""

    def __init__(self, h):
        import torch
        src = h.contiguous().view(torch.int16) if h.dtype == torch.bfloat16 else h.float()
        self.bf16 = h.dtype == torch.bfloat16
        self.buf = torch.empty(src.shape, dtype=src.dtype, pin_memory=True)
        with timers.timed("copy.d2h.enqueue"):
            self.buf.copy_(src, non_blocking=True)
        self.event = torch.cuda.Event()
        self.event.record()

    def array(self) -> np.ndarray:
        with timers.timed("copy.d2h.wait"):
            self.event.synchronize()
        a = self.buf.numpy()
        timers.count("copy.d2h", a.nbytes)
        return a.view(np.uint16) if self.bf16 else a


def to_host(h, store):
    """A device state as stored: on a GPU a Pending copy (the writer thread waits for it), else store(h)."""
    if h.device.type == "cuda":
        return Pending(h)
    with timers.timed("copy.d2h"):
        return store(h)


class GroupWriter:
    """Writes each tap's file of one group in a background thread: put(tap, idx, array | Pending) returns at
    once unless QUEUE_ITEMS wait; close() finishes every file (renamed whole) and raises the thread's error;
    abort() leaves no file. As a context manager: close on success, abort on an error."""

    def __init__(self, paths: dict, threaded: bool = True):
        self.streams = {tap: NpzStream(p) for tap, p in paths.items()}
        self.error: BaseException | None = None
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_ITEMS)
        self.thread = threading.Thread(target=self._run, daemon=True) if threaded else None
        if self.thread:
            self.thread.start()

    def _write(self, tap, idx, item) -> None:
        arr = item.array() if isinstance(item, Pending) else item
        with timers.timed("disk.write"):
            self.streams[tap].add(f"r{idx}", arr)

    def _run(self) -> None:
        while (job := self.queue.get()) is not None:
            if self.error is None:
                try:
                    self._write(*job)
                except BaseException as e:  # noqa: BLE001 (handed to the caller by close())
                    self.error = e

    def put(self, tap, idx: int, item) -> None:
        if self.error is not None:
            raise self.error
        if self.thread:
            self.queue.put((tap, idx, item))
        else:
            self._write(tap, idx, item)

    def close(self) -> None:
        if self.thread:
            self.queue.put(None)
            self.thread.join()
        if self.error is not None:
            self.abort()
            raise self.error
        for s in self.streams.values():
            s.close()

    def abort(self) -> None:
        if self.thread and self.thread.is_alive():
            self.error = self.error or RuntimeError("aborted")
            self.queue.put(None)
            self.thread.join()
        for s in self.streams.values():
            s.abort()

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None:
            self.close()
        else:
            self.abort()
        return False
