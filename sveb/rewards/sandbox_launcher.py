"""The sandbox's launcher: the script a trusted `python -I -S -c LAUNCHER CONFIG` runs as the program's
parent, and the config (argv and limits) it gets. The whole design is in sveb/rewards/sandbox.py.

In order: new network, PID and mount namespaces with private tmpfs and /proc (when `ns`); fork the
program, which takes its own process group, drops to `uid` after setrlimit, arms an ITIMER_PROF of
`cpu` seconds and execs; then the launcher kills and reaps what is left and exits as the program did.
"""

from __future__ import annotations

import math

TMPFS_MB = 64

NO_NET_PRELUDE = (  # fallback only: no network namespace
    "import runpy, socket, sys\n"
    "def _no_net(*a, **k): raise PermissionError('network disabled in sandbox')\n"
    "socket.socket.__init__ = _no_net; socket.socketpair = socket.create_connection = _no_net\n"
    "sys.argv = sys.argv[1:]; sys.path.insert(0, '')\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n")

LAUNCHER = r'''
import ctypes, json, os, resource, signal, sys, time
cfg = json.loads(sys.argv[1]); NS, UID = cfg["ns"], cfg["uid"]
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # it re-raises the program's fatal signal
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
def mount(src, dst, fstype, flags, data=None):
    enc = lambda s: s.encode() if s else None
    return libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)) == 0
def check(ok, what):
    if not ok:
        err = os.strerror(ctypes.get_errno()).encode()
        os.write(2, b"sandbox: %s failed: %s\n" % (what.encode(), err)); os._exit(125)
def spawn(fn, *args):
    pid = os.fork()
    if pid:
        return pid
    try:
        fn(*args)
    except BaseException as exc:
        os.write(2, b"sandbox: setup failed: %r\n" % (exc,))
    os._exit(125)
def wait_for(pid):  # reap other children meanwhile; pid stays a zombie, so its id is not reused
    while (other := os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT).si_pid) != pid:
        os.waitpid(other, 0)
def program():
    os.setpgid(0, 0)  # own group: killpg on it is atomic with respect to fork
    for name in ([".", *os.listdir(".")] if UID is not None else []):
        os.chown(name, UID, UID)
    for name, lim in cfg["limits"].items():
        resource.setrlimit(getattr(resource, name), lim)
    if UID is not None:  # after setrlimit; NPROC is not enforced for root
        os.setgroups([]); os.setgid(UID); os.setuid(UID)
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG=SIGKILL; after setuid, which clears it
    os.environ["HOME"] = os.environ["TMPDIR"] = os.getcwd()
    signal.setitimer(signal.ITIMER_PROF, cfg["cpu"])  # CPU seconds, user + system; survives exec
    os.execve(cfg["argv"][0], cfg["argv"], dict(os.environ))
def init(files, status_w):  # PID 1 of the new PID namespace; the program is not PID 1
    check(mount("tmpfs", "/tmp", "tmpfs", 6, "size=%dm,mode=1777" % cfg["tmpfs_mb"]), "mount /tmp")
    for d in ("/var/tmp", "/dev/shm", "/run/lock"):
        os.path.isdir(d) and mount("tmpfs", d, "tmpfs", 6, "size=1m,mode=1777")
    mount("proc", "/proc", "proc", 14)  # best effort: hides host processes
    os.mkdir("/tmp/work", 0o700); os.chdir("/tmp/work")
    for name, data in files.items():
        with open(name, "wb") as f:
            f.write(data)
    wait_for(pid := spawn(program))
    os.write(status_w, os.waitpid(pid, 0)[1].to_bytes(4, "little"))
def children():
    try:
        with open("/proc/%d/task/%d/children" % (os.getpid(), os.getpid())) as f:
            return [int(p) for p in f.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN: the host's sweep by session/uid still runs
        return []
def kill(fn, pid):
    try:
        fn(pid, 9)
    except OSError:
        pass
status_r, status_w = os.pipe()
if NS:
    check(libc.unshare(0x40000000 | 0x20000000 | 0x20000) == 0, "unshare")  # NET|PID|NS
    check(mount("none", "/", None, (1 << 14) | (1 << 18)), "mount --make-rprivate /")
    files = {n: open(n, "rb").read() for n in os.listdir(".")}  # before /tmp is covered
    child = spawn(init, files, status_w)
else:
    libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans (even setsid'd ones) come back to us
    child = spawn(program)
os.close(status_w)
def stop(*_):  # ns: killing the init takes every process of the namespace with it
    kill(os.killpg, child); kill(os.kill, child)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, stop)
wait_for(child)
kill(os.killpg, child)
status = os.waitpid(child, 0)[1]
if NS:
    raw = os.read(status_r, 4)
    status = int.from_bytes(raw, "little") if len(raw) == 4 else 9  # init killed: as SIGKILL
for _ in range(1000):  # kill and reap what is left, so no zombie outlives us
    for pid in children():
        kill(os.kill, pid)
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        break
    time.sleep(0.002)
if os.WIFSIGNALED(status):
    sig = os.WTERMSIG(status)
    sig not in (signal.SIGKILL, signal.SIGSTOP) and signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
os._exit(os.waitstatus_to_exitcode(status))
'''


def launch_config(python: str, main: str, *, ns: bool, uid: int | None, timeout: float, memory_mb: int,
                  nproc: int) -> dict:
    """The launcher's one argument (as JSON): the program's argv, where it runs and every limit it gets."""
    cpu = math.ceil(timeout)
    argv = [python, "-s", "-B", main] if ns else [python, "-s", "-B", "-c", NO_NET_PRELUDE, main]
    return {"ns": ns, "uid": uid, "argv": argv, "tmpfs_mb": TMPFS_MB, "cpu": timeout, "limits": {
        "RLIMIT_CPU": (cpu, cpu + 1), "RLIMIT_AS": (memory_mb << 20,) * 2,
        "RLIMIT_NPROC": (nproc,) * 2, "RLIMIT_FSIZE": (16 << 20,) * 2,
        "RLIMIT_NOFILE": (64, 64), "RLIMIT_CORE": (0, 0)}}
