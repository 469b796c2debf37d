"""No engine process outlives its `sveb`, whatever ends it.

vLLM forks engine processes. Ctrl-C or SIGTERM: the first one raises KeyboardInterrupt in the main
thread (so `finally` blocks close the engine and every finished shard stays on disk: shards are written
atomically), and a timer makes sure the command is gone within GRACE_S even if the engine blocks.
SIGKILL cannot be caught, so a small watchdog process (psutil, its own session so a Ctrl-C to
the terminal does not take it first) remembers the descendants of `sveb` every POLL_S and, once
`sveb` is gone, terminates those still alive.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

GRACE_S = 8.0    # from the first signal to a forced exit (SVEB_STOP_GRACE_S overrides it)
POLL_S = 0.5     # how often the watchdog records descendants
TERM_WAIT_S = 5.0

_state = {"installed": False, "watchdog": None, "signalled": False}


def descendants(root: int) -> dict[int, float]:
    """{pid: create time} of every live descendant of root (the create time tells a recycled pid apart)."""
    import psutil
    try:
        kids = psutil.Process(root).children(recursive=True)
    except psutil.Error:  # root is gone
        return {}
    out = {}
    for c in kids:
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out[c.pid] = c.create_time()
        except psutil.Error:  # ended while we looked
            pass
    return out


def process_alive(pid: int, start: float) -> bool:
    import psutil
    try:
        p = psutil.Process(pid)
        return p.create_time() == start and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_all(procs: dict[int, float], wait_s: float = TERM_WAIT_S) -> None:
    """SIGTERM the processes still alive (same create time: never a recycled pid), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 0.0)):
        live = [p for p, s in procs.items() if process_alive(p, s)]
        for p in live:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        end = time.time() + wait
        while time.time() < end and any(process_alive(p, s) for p, s in procs.items()):
            time.sleep(0.1)


def watch(parent: int) -> None:
    """The watchdog's loop: remember parent's descendants until the parent is gone, then end them."""
    import psutil
    me = os.getpid()
    try:
        start = psutil.Process(parent).create_time()
    except psutil.Error:
        start = None
    seen: dict[int, float] = {}
    while start is not None and process_alive(parent, start):
        seen.update({p: s for p, s in descendants(parent).items() if p != me})
        time.sleep(POLL_S)
    for p in list(seen):  # grandchildren reparented since the last look
        seen.update({c: cs for c, cs in descendants(p).items() if c != me})
    kill_all(seen)


def _hard_exit(code: int) -> None:
    kill_all(descendants(os.getpid()), wait_s=1.0)
    os._exit(code)


def grace_s() -> float:
    """Seconds from the first Ctrl-C or SIGTERM to a forced exit: SVEB_STOP_GRACE_S, else GRACE_S."""
    try:
        x = float(os.environ.get("SVEB_STOP_GRACE_S", GRACE_S))
    except ValueError:
        return GRACE_S
    return x if 0 < x < float("inf") else GRACE_S


def _on_signal(signum, frame) -> None:
    code = 128 + signum
    if _state["signalled"]:  # a second Ctrl-C: no more waiting
        _hard_exit(code)
    _state["signalled"] = True
    timer = threading.Timer(grace_s(), _hard_exit, args=(code,))
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt(f"signal {signum}")


def install() -> None:
    """Signal handlers in this (main) thread and the watchdog process; idempotent."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if _state["watchdog"] is None and not os.environ.get("SVEB_NO_WATCHDOG"):
        _state["watchdog"] = subprocess.Popen(
            [sys.executable, "-c", f"from sveb.core.signals import watch; watch({os.getpid()})"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
    _state["installed"] = True


def reinstall() -> None:
    """Take the signals back after a library (vLLM) set its own handlers."""
    if _state["installed"]:
        install()
