"""Run a grading function under a CPU-time budget (never a wall-clock one).

A wall-clock limit makes a reward depend on machine load: on a busy 2-core machine the same
parse takes several times longer in wall time, and a 1 could become a 0. CPU time spent by the
grading itself barely moves with load, so the budget counts that:
  - in the main thread, an ITIMER_PROF timer (process CPU time) raises `OutOfCpu` via SIGPROF;
    signals are also checked inside CPython's big-integer loops, so 9^(9^9) is stopped too
    (process CPU time counts other busy threads of this process as well: the budget is far above
    any real grade, see sveb.rewards.math, so that only makes a runaway stop sooner);
  - in other threads (signals are main-thread only), the work runs in a daemon thread whose own
    CPU clock (pthread_getcpuclockid) is polled; past the budget it is sent `OutOfCpu`
    asynchronously (honoured at its next Python bytecode) and abandoned.
The poll interval only sets how soon an overrun is noticed, never whether it is one.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

_POLL_S = 0.05


class OutOfCpu(BaseException):
    """Raised inside the budgeted work; a BaseException so that libraries' `except Exception` pass it on."""


_armed = False
_installed = False


def _on_sigprof(signum, frame) -> None:
    if _armed:  # a late tick after the work finished is ignored
        raise OutOfCpu()


def _main_thread(budget_s: float, fn: Callable[..., Any], args: tuple) -> tuple[bool, Any]:
    global _armed, _installed
    if _armed:  # nested inside budgeted work: the outer budget already applies
        return True, fn(*args)
    if not _installed:  # installed once and left in place: restoring SIG_DFL could let a late
        signal.signal(signal.SIGPROF, _on_sigprof)  # tick kill the process (SIGPROF's default action)
        _installed = True
    try:
        try:
            _armed = True
            signal.setitimer(signal.ITIMER_PROF, budget_s)
            return True, fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            _armed = False
    except OutOfCpu:
        return False, None


def _other_thread(budget_s: float, fn: Callable[..., Any], args: tuple) -> tuple[bool, Any]:
    box: dict[str, Any] = {}
    started = threading.Event()

    def target() -> None:
        try:
            box["clock"] = time.pthread_getcpuclockid(threading.get_ident())
        except (AttributeError, OSError):  # no per-thread CPU clock here: unbudgeted, inputs stay bounded
            box["clock"] = None
        started.set()
        try:
            box["ok"] = fn(*args)
        except OutOfCpu:
            pass
        except BaseException as exc:  # re-raised in the caller's thread
            box["err"] = exc

    worker = threading.Thread(target=target, daemon=True, name="reward-budget")
    worker.start()
    started.wait()
    while worker.is_alive():
        worker.join(_POLL_S if box["clock"] is not None else None)
        if not worker.is_alive():
            break
        try:
            used = time.clock_gettime(box["clock"])
        except OSError:  # the thread ended between the two calls
            continue
        if used > budget_s:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(OutOfCpu))
            return False, None
    if "err" in box:
        raise box["err"]
    return ("ok" in box), box.get("ok")


def run_with_cpu_budget(budget_s: float, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    """(True, fn(*args)) if it finished within budget_s CPU seconds, else (False, None)."""
    if threading.current_thread() is threading.main_thread():
        return _main_thread(budget_s, fn, args)
    return _other_thread(budget_s, fn, args)
