"""Wall-time counters of the GPU steps' I/O (disk reads and writes, host-device copies), summed per name in this
process: tests/gpu_smoke.py --sizes reads them to split a step's time. A counter costs a perf_counter call."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

TIMES: defaultdict[str, float] = defaultdict(float)
BYTES: defaultdict[str, int] = defaultdict(int)  # bytes moved, per name: a count no busy machine can blur


def count(name: str, nbytes: int) -> None:
    BYTES[name] += int(nbytes)


@contextmanager
def timed(name: str):
    t0 = time.perf_counter()
    try:
        yield
    finally:
        TIMES[name] += time.perf_counter() - t0


def snapshot() -> dict[str, dict]:
    return {"seconds": dict(TIMES), "bytes": dict(BYTES)}


def since(before: dict[str, dict]) -> dict[str, dict]:
    """What each counter gained since `before` (a snapshot): {"seconds": {name: s}, "bytes": {name: n}}."""
    gain = lambda now, then: {k: v - then.get(k, 0) for k, v in now.items() if v - then.get(k, 0) > 0}  # noqa: E731
    return {"seconds": {k: round(v, 4) for k, v in gain(TIMES, before["seconds"]).items()},
            "bytes": gain(BYTES, before["bytes"])}
