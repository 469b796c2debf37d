"""Run untrusted Python programs in a throw-away sandbox process.

Each run: a trusted launcher (`python -I -S -c LAUNCHER`, in sandbox_launcher.py; new session, so no
preexec_fn runs in this threaded process) forks the program and is its parent. As root, where the
kernel allows, the program gets fresh network, PID and mount namespaces: no network (loopback
down), the tree dies with the namespace init, private tmpfs on /tmp, /var/tmp, /dev/shm and a
fresh /proc. Always: resource limits (CPU, address space, processes, file size, open files, no
core), scrubbed environment, output cap, kill of the whole tree, temp dir removed.
Time: the grade-deciding limit is CPU time, so machine load cannot change a result. The program's
process gets an ITIMER_PROF of `timeout` CPU seconds (kept across execve; SIGPROF ends it), every
process RLIMIT_CPU = ceil(timeout) (SIGXCPU, then SIGKILL 1 s later, for one that ignores SIGPROF);
both report killed_reason "timeout". A wall clock of 10 x timeout + 5 s ("wall_timeout") is only a
backstop for programs that sleep or block, which fail on it whatever the load. As root the
program runs as an unprivileged uid unique to (this process, worker slot), so RLIMIT_NPROC applies
per run and leftovers are swept by uid.
Fallback (namespaces refused, logged once): cwd is a temp dir under /tmp, sockets are blocked
in-process (best effort; ctypes can bypass it), world-writable dirs stay writable. Not root as well:
no uid drop, so RLIMIT_NPROC counts all the user's processes and the program could kill its launcher.
Programs run as `python -s -B` in a fully controlled environment rather than `-I`, since `-I`
ignores PYTHONHASHSEED and str hashing must be seeded for deterministic rewards.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from sveb.rewards.sandbox_launcher import LAUNCHER, launch_config

log = logging.getLogger(__name__)

WORKERS = max(1, min(64, int(os.environ.get("SVEB_SANDBOX_WORKERS", min(4, os.cpu_count() or 1)))))
UID_BASE = int(os.environ.get("SVEB_SANDBOX_UID_BASE", "200000"))
MEMORY_MB = int(os.environ.get("SVEB_SANDBOX_MEMORY_MB", "1024"))  # address space
NPROC = 32  # tasks (processes + threads) of the sandbox uid
MAX_OUTPUT = 1 << 20  # bytes of stdout + stderr
_SLOTS: queue.Queue[int] = queue.Queue()
for _slot in range(WORKERS):
    _SLOTS.put(_slot)

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass
class RunResult:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool  # either limit
    killed_reason: str | None  # "timeout" (CPU) | "wall_timeout" | "output_limit" | "signal:..." | None
    seconds: float


_caps: dict | None = None
_caps_lock = threading.Lock()


def capabilities() -> dict:
    """What this host allows (detected once): root (uid drop), namespaces (network/PID/mount)."""
    global _caps
    with _caps_lock:
        if _caps is None:
            _caps = {"root": os.geteuid() == 0, "namespaces": False}
            if _caps["root"]:
                probe = _run("print('ok')", "", 10.0, {}, ns=True)
                _caps["namespaces"] = probe.returncode == 0 and probe.stdout == "ok\n"
                if not _caps["namespaces"]:
                    log.warning("sandbox: namespaces unavailable (%s); network is only blocked "
                                "in-process", probe.stderr.strip()[-300:])
            else:
                log.warning("sandbox: not root: no namespaces and no uid drop (limits still apply)")
        return dict(_caps)


def _uid(slot: int) -> int:
    # Unique per (process, slot), so concurrent runs never share an NPROC count or a sweep.
    return UID_BASE + (os.getpid() % 4096) * 64 + slot


def sandbox_uids() -> list[int]:
    """The uids this process's sandboxes run as (empty when not root)."""
    return [_uid(s) for s in range(WORKERS)] if os.geteuid() == 0 else []


def _reachable(path: str) -> bool:
    """Executable by an unprivileged uid: o+x on the file and on every directory above it."""
    for p in {os.path.abspath(path), os.path.realpath(path)}:
        while True:
            if not os.path.exists(p) or not os.stat(p).st_mode & 0o001:
                return False
            if os.path.dirname(p) == p:
                break
            p = os.path.dirname(p)
    return True


def program_python() -> str:
    """Interpreter for programs: SVEB_SANDBOX_PYTHON, else this one or the system python3,
    whichever the sandbox uid can execute (a venv under /root is out of its reach)."""
    if os.environ.get("SVEB_SANDBOX_PYTHON"):
        return os.environ["SVEB_SANDBOX_PYTHON"]
    found = [p for p in (sys.executable, shutil.which("python3", path=_ENV["PATH"])) if p]
    return next((p for p in found if os.geteuid() != 0 or _reachable(p)), found[0])


def wall_limit(timeout: float) -> float:
    """The wall-clock backstop for a CPU limit of `timeout` seconds: far beyond any slowdown a
    loaded machine causes, so only sleeping or blocked programs reach it."""
    return 10 * timeout + 5


def run_program(code: str, stdin: str = "", timeout: float = 10.0, *,
                wall_timeout: float | None = None, memory_mb: int | None = None,
                nproc: int = NPROC, max_output: int = MAX_OUTPUT,
                files: dict[str, str] | None = None, main: str = "solution.py") -> RunResult:
    """Run `code` (saved as solution.py, next to extra `files`) as `python main` in the sandbox,
    with `timeout` CPU seconds and `wall_timeout` (default wall_limit(timeout)) wall seconds.
    Thread-safe; at most WORKERS runs at once (the others wait for a slot)."""
    ns = capabilities()["namespaces"] and os.environ.get("SVEB_SANDBOX_NAMESPACES", "1") != "0"
    return _run(code, stdin, timeout, files or {}, ns=ns, main=main, max_output=max_output,
                memory_mb=memory_mb or MEMORY_MB, nproc=nproc, wall=wall_timeout)


def _run(code, stdin, timeout, files, *, ns, main="solution.py", max_output=MAX_OUTPUT,
         memory_mb=MEMORY_MB, nproc=NPROC, wall=None) -> RunResult:
    if not timeout > 0:
        raise ValueError(f"sandbox: timeout must be > 0 CPU seconds, got {timeout}")
    slot = _SLOTS.get()
    workdir = tempfile.mkdtemp(prefix="sveb-sbx-")
    try:
        for name, text in {"solution.py": code, **files}.items():
            path = os.path.join(workdir, os.path.basename(name))
            with open(path, "w", encoding="utf-8", errors="replace") as f:
                f.write(text)
        uid = _uid(slot) if os.geteuid() == 0 else None
        cfg = launch_config(program_python(), main, ns=ns, uid=uid, timeout=timeout, memory_mb=memory_mb,
                            nproc=nproc)
        wall = wall_limit(timeout) if wall is None else wall
        return _execute(cfg, workdir, stdin.encode("utf-8", "replace"), wall, max_output, uid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        _SLOTS.put(slot)


def _execute(cfg, workdir, data, wall, max_output, uid) -> RunResult:
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", LAUNCHER, json.dumps(cfg)], cwd=workdir, env=_ENV,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True)
    reason = "error"
    try:
        out, err, reason = _communicate(proc, data, start + wall, max_output, uid)
    finally:  # after EOF the launcher is still relaying the exit status: give it a moment
        _kill_all(proc, uid, grace=1.0 if reason is None else 0.0)
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
    rc = proc.returncode
    if reason is None and rc in (-signal.SIGPROF, -signal.SIGXCPU):
        reason = "timeout"  # its CPU time ran out
    elif reason is None and rc < 0:
        reason = f"signal:{signal.Signals(-rc).name}" if -rc in signal.valid_signals() else "signal"
    return RunResult(out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), rc,
                     reason in ("timeout", "wall_timeout"), reason, time.monotonic() - start)


def _communicate(proc, data: bytes, deadline: float, cap: int, uid):
    bufs: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    total, sent, reason, exited_at = 0, 0, None, None
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        if data:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        while sel.get_map() and reason is None:
            now = time.monotonic()
            if now >= deadline:
                reason = "wall_timeout"
            elif exited_at is None and _exited(proc):
                exited_at = now
                _sweep(uid, proc.pid)  # leftovers could hold the pipes open
            elif exited_at is not None and now - exited_at > 1.0:
                break
            for key, _ in sel.select(min(max(deadline - now, 0), 0.1)) if reason is None else []:
                if key.fd not in bufs:  # stdin
                    try:
                        sent += os.write(key.fd, data[sent:sent + 65536])
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # the program does not read all its input: fine
                        sent = len(data)
                    if sent >= len(data):
                        sel.unregister(key.fd)
                        proc.stdin.close()
                elif chunk := os.read(key.fd, 65536):
                    bufs[key.fd].append(chunk)
                    total += len(chunk)
                    reason = "output_limit" if total > cap else None
                else:
                    sel.unregister(key.fd)
    out, err = (b"".join(bufs[f.fileno()]) for f in (proc.stdout, proc.stderr))
    if reason == "output_limit":
        out, err = out[:cap], err[:max(0, cap - len(out))]
    return out, err, reason


def _exited(proc: subprocess.Popen) -> bool:
    # WNOWAIT: the launcher stays a zombie until we reap it, so its pid (the session id we
    # sweep by) cannot be reused by another run meanwhile.
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_all(proc, uid, grace: float) -> None:
    end = time.monotonic() + grace
    while not _exited(proc) and time.monotonic() < end:
        time.sleep(0.005)
    if not _exited(proc):
        os.kill(proc.pid, signal.SIGTERM)  # the launcher kills and reaps the program's tree
        end = time.monotonic() + 2.0
        while not _exited(proc) and time.monotonic() < end:
            time.sleep(0.005)
        if not _exited(proc):
            proc.kill()
    _sweep(uid, proc.pid)  # backstop, before the launcher is reaped
    proc.wait()


def live_pids(uid: int | None = None, sid: int | None = None) -> list[int]:
    """Live (non-zombie) processes whose real uid is `uid` or whose session id is `sid`."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/status") as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if st["State"].split()[0] != "Z" and (int(st["Uid"].split()[0]) == uid
                                              or int(st.get("NSsid", "-1").split()[0]) == sid):
            pids.append(int(entry))
    return pids


def _sweep(uid: int | None, sid: int) -> None:
    """SIGKILL until none is left: processes of the sandbox uid or of the launcher's session."""
    for _ in range(100):
        pids = [p for p in live_pids(uid, sid) if p != sid]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)
    log.warning("sandbox: processes of uid %s / session %s survive the sweep", uid, sid)
