"""No engine process outlives its `sveb`, whatever ends it.

vLLM forks engine processes. Ctrl-C or SIGTERM: the first one raises KeyboardInterrupt in the main
thread (so `finally` blocks close the engine and every finished shard stays on disk: shards are written
atomically), and a timer makes sure the command is gone within GRACE_S even if the engine blocks.
SIGKILL cannot be caught, so a small watchdog process (stdlib only, its own session so a Ctrl-C to
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

GRACE_S = 8.0    # from the first signal to a forced exit
POLL_S = 0.5     # how often the watchdog records descendants
TERM_WAIT_S = 5.0

_state = {"installed": False, "watchdog": None, "signalled": False}


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(ppid, state, start time) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(rest[1]), rest[0], int(rest[19])


def descendants(root: int) -> dict[int, int]:
    """{pid: start time} of every live descendant of root."""
    children: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None and st[1] != "Z":
                children.setdefault(st[0], []).append(int(name))
                starts[int(name)] = st[2]
    out, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out[c] = starts[c]
                todo.append(c)
    return out


def _alive(pid: int, start: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] != "Z" and st[2] == start


def kill_all(procs: dict[int, int], wait_s: float = TERM_WAIT_S) -> None:
    """SIGTERM the processes still alive (same start time: never a recycled pid), then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 0.0)):
        live = [p for p, s in procs.items() if _alive(p, s)]
        for p in live:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        end = time.time() + wait
        while time.time() < end and any(_alive(p, s) for p, s in procs.items()):
            time.sleep(0.1)


def watch(parent: int) -> None:
    """The watchdog's loop: remember parent's descendants until the parent is gone, then end them."""
    me = os.getpid()
    start = _stat(parent)
    seen: dict[int, int] = {}
    while start is not None and _alive(parent, start[2]):
        seen.update({p: s for p, s in descendants(parent).items() if p != me})
        time.sleep(POLL_S)
    for p, s in list(seen.items()):  # grandchildren reparented since the last look
        seen.update({c: cs for c, cs in descendants(p).items() if c != me})
    kill_all(seen)


def _hard_exit(code: int) -> None:
    kill_all(descendants(os.getpid()), wait_s=1.0)
    os._exit(code)


def _on_signal(signum, frame) -> None:
    code = 128 + signum
    if _state["signalled"]:  # a second Ctrl-C: no more waiting
        _hard_exit(code)
    _state["signalled"] = True
    timer = threading.Timer(GRACE_S, _hard_exit, args=(code,))
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
            [sys.executable, "-c", f"from sveb.procs import watch; watch({os.getpid()})"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
    _state["installed"] = True


def reinstall() -> None:
    """Take the signals back after a library (vLLM) set its own handlers."""
    if _state["installed"]:
        install()
