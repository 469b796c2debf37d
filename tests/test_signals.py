"""Ctrl-C, SIGTERM and SIGKILL: the command stops in time and leaves no process behind.

The first tests use a stand-in command (a Python process that starts children the way vLLM does);
the e2e ones send the signals to a real `sveb build` while its vLLM engine is starting.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sveb.core.signals import descendants

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]

STAND_IN = textwrap.dedent("""
    import multiprocessing as mp, subprocess, sys, time
    from sveb.core import signals

    def engine():               # a forked child that ignores SIGINT, like an engine core busy in C code
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        subprocess.Popen(["sleep", "300"])  # and a grandchild of its own
        time.sleep(300)

    if __name__ == "__main__":
        signals.install()
        mp.get_context("fork").Process(target=engine).start()
        print("ready", flush=True)
        try:
            time.sleep(300)
        finally:
            time.sleep(100)     # a shutdown that hangs: the grace timer must end it
""")


def _env(grace: float | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SVEB_NO_WATCHDOG", "SVEB_STOP_GRACE_S")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    if grace is not None:
        env["SVEB_STOP_GRACE_S"] = str(grace)
    return env


def _wait_gone(pids: dict[int, int], limit: float) -> float:
    from sveb.core.signals import process_alive
    t0 = time.time()
    while time.time() - t0 < limit:
        if not any(process_alive(p, s) for p, s in pids.items()):
            return time.time() - t0
        time.sleep(0.2)
    return float("inf")


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_stand_in_stops_and_leaves_nothing(tmp_path, sig):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    # its shutdown hangs, so only the grace timer ends it: 3 s here (SVEB_STOP_GRACE_S; 8 s by default, which the
    # real-engine test below keeps)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=_env(grace=3), text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.5)  # the watchdog has seen the children
    kids = {p: s for p, s in descendants(proc.pid).items()}
    assert len(kids) >= 3  # watchdog, engine child, its grandchild
    t0 = time.time()
    proc.send_signal(sig)
    proc.wait(timeout=15)
    took = time.time() - t0
    assert took < 5, f"{sig.name}: took {took:.1f} s"
    if sig != signal.SIGKILL:  # the timer, not an early exit, ended it
        assert took >= 3 - 0.5, f"{sig.name}: ended after {took:.1f} s, before its 3 s grace"
    assert _wait_gone(kids, 30) < 30, f"{sig.name}: processes left behind"


def _sveb_build(root: Path, log: Path) -> subprocess.Popen:
    exe = Path(sys.executable).parent / "sveb"
    # no screening (an open filter): the rollout stage, where the signal is sent, begins once the engine is up
    return subprocess.Popen([str(exe), "build", "--root", str(root), "--problems", "2", "--rollouts", "4",
                             "--max-tokens", "32", "--eager", "--screen", "0", "--min-acc", "0", "--max-acc", "1"],
                            env=_env(), stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.e2e
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_real_engine_build_stops_and_leaves_nothing(tmp_path, sig):
    """The engine runs in sveb's own process (reproducible batches) and may fork helpers: the signal
    arrives while it is starting, after the rollout stage has begun. SIGINT (Ctrl-C) and SIGKILL (the
    watchdog's case); SIGTERM takes SIGINT's handler (sveb.core.signals.install), and the stand-in
    tests above send all three."""
    log = tmp_path / "build.log"
    proc = _sveb_build(tmp_path / "root", log)
    t0 = time.time()
    # the engine's start takes minutes on a busy 2-core AVX2 machine (fp32): the test is
    # about stopping, so it waits as long as the start takes
    while time.time() - t0 < 900 and "rollouts: shard" not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        time.sleep(0.5)
    assert "rollouts: shard" in log.read_text(errors="replace"), "the rollout stage never began"
    time.sleep(3)  # inside the engine's start (importing vLLM alone takes longer)
    kids = descendants(proc.pid)
    assert proc.poll() is None and kids, "sveb ended before the signal, or has no watchdog"
    t1 = time.time()
    proc.send_signal(sig)
    proc.wait(timeout=60)
    stopped = time.time() - t1
    assert stopped < 10, f"{sig.name}: sveb took {stopped:.1f} s to stop"
    kids.update(descendants(proc.pid))
    assert _wait_gone(kids, 30) < 30, f"{sig.name}: processes outlived sveb by 30 s"
    for path in (tmp_path / "root").rglob("*.parquet"):  # whatever was written is whole
        import pyarrow.parquet as pq
        pq.read_table(path)


def test_reinstall_takes_both_signals_back_from_a_library(monkeypatch):
    """vLLM and Ray may set SIGINT/SIGTERM handlers of their own when they start: reinstall() puts
    sveb's back on both (the real-engine test above sends SIGINT and SIGKILL only)."""
    from sveb.core import signals
    monkeypatch.setenv("SVEB_NO_WATCHDOG", "1")
    monkeypatch.setitem(signals._state, "installed", False)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        signals.reinstall()  # not installed yet: a library's handlers stay
        assert signal.getsignal(signal.SIGTERM) is before[signal.SIGTERM]
        signals.install()
        for s in before:
            signal.signal(s, signal.SIG_DFL)  # what a library's start may do
        signals.reinstall()
        assert all(signal.getsignal(s) is signals._on_signal for s in before)
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def test_grace_reads_its_override_and_refuses_nonsense(monkeypatch):
    from sveb.core import signals
    for value, want in (("2.5", 2.5), ("0", signals.GRACE_S), ("-1", signals.GRACE_S), ("inf", signals.GRACE_S),
                        ("nan", signals.GRACE_S), ("soon", signals.GRACE_S)):
        monkeypatch.setenv("SVEB_STOP_GRACE_S", value)
        assert signals.grace_s() == want, value
    monkeypatch.delenv("SVEB_STOP_GRACE_S")
    assert signals.grace_s() == signals.GRACE_S == 8.0
