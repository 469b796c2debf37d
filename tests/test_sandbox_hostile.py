"""Hostile programs: each must end within its limits, score 0 (or its honest result) and leave the
host untouched. Strong assertions where this host allows the protection (root, namespaces);
elsewhere the documented fallback behaviour is asserted instead."""

import os
import socket
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from sveb.rewards import sandbox as sb
from sveb.rewards.code import code_reward

CAPS = sb.capabilities()
ROOT, NS = CAPS["root"], CAPS["namespaces"]


@pytest.fixture(params=["auto", "no-namespaces"])
def mode(request, monkeypatch):
    """Run a test with namespaces (where available) and in the forced fallback mode."""
    if request.param == "no-namespaces":
        monkeypatch.setenv("SVEB_SANDBOX_NAMESPACES", "0")
    return request.param


def namespaced(mode: str) -> bool:
    return NS and mode == "auto"


@pytest.fixture(autouse=True)
def host_left_clean(monkeypatch):
    """After every test: no process of a sandbox uid, no child of ours, no sandbox temp dir."""
    made: list[str] = []
    real_mkdtemp = tempfile.mkdtemp

    def recording_mkdtemp(*args, **kwargs):
        path = real_mkdtemp(*args, **kwargs)
        made.append(path)
        return path

    monkeypatch.setattr(sb.tempfile, "mkdtemp", recording_mkdtemp)
    yield
    assert [u for u in sb.sandbox_uids() if sb.live_pids(uid=u)] == []
    assert psutil.Process().children(recursive=True) == []
    assert not [p for p in made if os.path.exists(p)]


def test_correct_program_passes_and_wrong_fails():
    cases = [{"input": "3\n", "output": "9\n", "type": "stdin_stdout"},
             {"input": "[4]", "output": "16", "type": "function_call", "fn_name": "sq"}]
    ok = "```python\nimport sys\ndef sq(x):\n    return x * x\nif __name__ == '__main__':\n" \
         "    print(sq(int(sys.stdin.read())))\n```"
    assert code_reward(ok, cases) == 1.0
    assert code_reward(ok.replace("x * x", "x + x"), cases) == 0.0


def test_infinite_loop_times_out():
    # Stopped by its CPU time (SIGPROF/SIGXCPU), long before the wall-clock backstop.
    r = sb.run_program("while True:\n    pass", timeout=1.0)
    assert r.timed_out and r.killed_reason == "timeout" and r.returncode != 0
    assert r.seconds < sb.wall_limit(1.0) - 5
    cases = [{"input": "", "output": "1", "type": "stdin_stdout"}]
    assert code_reward("```python\nwhile True: pass\n```", cases, timeout=1.0) == 0.0
    asserts = [{"type": "assert", "code": "assert f() == 1"}]
    assert code_reward("```python\ndef f():\n    while True: pass\n```", asserts, timeout=1.0) == 0.0


def test_ignoring_the_cpu_signals_does_not_help():
    code = ("import signal\nfor s in (signal.SIGPROF, signal.SIGXCPU):\n"
            "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass")
    r = sb.run_program(code, timeout=0.5)  # RLIMIT_CPU's hard limit: SIGKILL at 2 CPU seconds
    assert r.timed_out is False and r.killed_reason == "signal:SIGKILL"
    assert r.seconds < sb.wall_limit(0.5) - 1


def test_sleep_past_the_wall_backstop():
    # Sleeping costs no CPU, so only the wall backstop (10 x timeout + 5 s) stops it: a grade of
    # 0 that does not depend on load. A shorter sleep is not a CPU overrun: it passes.
    t0 = time.monotonic()
    r = sb.run_program("import time\nprint('started', flush=True)\ntime.sleep(100)", timeout=0.1)
    took = time.monotonic() - t0
    assert r.timed_out and r.killed_reason == "wall_timeout" and r.stdout == "started\n"
    assert sb.wall_limit(0.1) <= took < sb.wall_limit(0.1) + 3
    r = sb.run_program("import time\ntime.sleep(100)", timeout=10, wall_timeout=0.5)
    assert r.killed_reason == "wall_timeout" and r.seconds < 3
    r = sb.run_program("import time\ntime.sleep(1.2)\nprint('woke')", timeout=0.3)
    assert r.killed_reason is None and r.returncode == 0 and r.stdout == "woke\n"
    cases = [{"type": "assert", "code": "assert f() == 1"}]
    slept = "```python\nimport time\ndef f():\n    time.sleep(100)\n    return 1\n```"
    assert code_reward(slept, cases, timeout=0.1) == 0.0


def test_fork_is_capped_by_nproc(mode):
    # Only the parent forks, children sleep: at most nproc - 1 forks can succeed.
    code = ("import os, time\nn = 0\nfor _ in range(40):\n    try:\n        pid = os.fork()\n"
            "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(30)\n"
            "        os._exit(0)\n    n += 1\nprint(n)")
    r = sb.run_program(code, timeout=5.0, nproc=6)
    assert r.returncode == 0, r.stderr
    assert 1 <= int(r.stdout) <= 5
    # the sleeping children were killed with the run (checked by host_left_clean)


def test_fork_bomb_is_contained_and_killed(mode):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    t0 = time.monotonic()
    # Each of its processes has its own CPU limit, so the wall backstop is what ends a bomb.
    r = sb.run_program(bomb, timeout=2.0, wall_timeout=4.0, nproc=16)
    assert r.timed_out and time.monotonic() - t0 < 8.0
    assert sb.run_program("print('host still works')", timeout=10).stdout == "host still works\n"


def test_escaping_the_process_group_does_not_survive(mode):
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
            "print('parent exits')")
    r = sb.run_program(code, timeout=5.0)
    assert r.returncode == 0 and r.stdout == "parent exits\n"
    # the setsid()'d child is gone (host_left_clean sweeps for the sandbox uids)


def test_memory_hog_is_stopped():
    r = sb.run_program("x = bytearray(3 * 1024 ** 3)\nprint('allocated')", timeout=10)
    assert r.returncode != 0 and "MemoryError" in r.stderr and "allocated" not in r.stdout
    grow = "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))"
    r = sb.run_program(grow, timeout=10, memory_mb=256)
    assert r.returncode != 0 and "MemoryError" in r.stderr and r.seconds < 8


def test_huge_output_is_capped():
    r = sb.run_program("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)", timeout=10,
                       max_output=1 << 20)
    assert r.killed_reason == "output_limit" and r.returncode != 0
    assert len(r.stdout) <= 1 << 20 and r.seconds < 5
    r = sb.run_program("import sys\nwhile True:\n    sys.stderr.write('e' * 65536)", timeout=10,
                       max_output=1 << 16)
    assert r.killed_reason == "output_limit" and len(r.stdout) + len(r.stderr) <= 1 << 16


def test_cannot_touch_files_outside_its_directory(mode, tmp_path):
    guarded = tmp_path / "guarded"
    guarded.mkdir(mode=0o755)
    os.chmod(guarded, 0o755)
    canary = guarded / "canary.txt"
    canary.write_text("precious")
    os.chmod(canary, 0o644)
    escape = f"/tmp/sveb-escape-{os.getpid()}-{mode}"
    code = (f"import os\nfor act in [lambda: open({str(canary)!r}, 'w').write('pwned'),\n"
            f"            lambda: os.remove({str(canary)!r}),\n"
            f"            lambda: open({str(guarded / 'new.txt')!r}, 'w').write('new'),\n"
            f"            lambda: os.chmod({str(guarded)!r}, 0o777),\n"
            f"            lambda: open({escape!r}, 'w').write('x')]:\n"
            "    try:\n        act(); print('done')\n    except OSError:\n        print('denied')\n"
            "open('own.txt', 'w').write('fine'); print(open('own.txt').read())")
    try:
        r = sb.run_program(code, timeout=10)
        assert r.returncode == 0, r.stderr
        if ROOT:  # unprivileged uid: the root-owned canary and its directory are out of reach
            assert r.stdout.split()[:4] == ["denied"] * 4
            assert canary.read_text() == "precious" and sorted(os.listdir(guarded)) == ["canary.txt"]
            assert oct(guarded.stat().st_mode & 0o777) == "0o755"
        if namespaced(mode):  # private tmpfs on /tmp: nothing reaches the host's /tmp
            assert r.stdout.split()[4] == "done" and not os.path.exists(escape)
        elif ROOT:  # documented fallback: world-writable dirs stay writable (as the sandbox uid)
            assert os.stat(escape).st_uid in sb.sandbox_uids()
        assert r.stdout.split()[-1] == "fine"  # its own directory is writable
    finally:
        if os.path.exists(escape):
            os.remove(escape)


def test_no_network(mode):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\nexcept OSError as e:\n    print('blocked', type(e).__name__, e)")
    try:
        r = sb.run_program(code, timeout=10)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    assert r.stdout.startswith("blocked"), r.stdout + r.stderr
    if namespaced(mode):  # fresh network namespace: loopback is down
        assert "unreachable" in r.stdout.lower()
    else:  # documented fallback: sockets refused in-process
        assert "network disabled in sandbox" in r.stdout


def test_environment_secrets_are_not_inherited(monkeypatch):
    monkeypatch.setenv("SVEB_TEST_SECRET", "hunter2-do-not-leak")
    code = (f"import os\nprint(sorted(os.environ))\nprint(os.environ.get('SVEB_TEST_SECRET'))\n"
            f"try:\n    print(open('/proc/{os.getpid()}/environ', 'rb').read())\n"
            f"except OSError as e:\n    print('no access', e.errno)")
    r = sb.run_program(code, timeout=10)
    assert r.returncode == 0, r.stderr
    assert "hunter2" not in r.stdout + r.stderr
    assert "SVEB_TEST_SECRET" not in r.stdout and "None" in r.stdout
    if ROOT:
        assert "no access" in r.stdout


def test_killing_its_parent_does_not_hurt_the_caller(mode):
    me = os.getpid()
    code = ("import os, signal\nfor kill in [lambda: os.kill(os.getppid(), 9),\n"
            "             lambda: os.killpg(os.getpgid(0), 9),\n"
            + (f"             lambda: os.kill({me}, 9),\n" if ROOT else "")
            + "             ]:\n    try:\n        kill()\n    except OSError as e:\n"
            "        print('refused', e.errno)\nprint('end')")
    r = sb.run_program(code, timeout=10)
    assert psutil.pid_exists(me) and r.returncode is not None
    # killpg of its own group kills the program itself: honest result is a signal death
    assert r.returncode != 0 and "end" not in r.stdout
    assert sb.run_program("print(2 + 2)", timeout=10).stdout == "4\n"


def test_many_programs_in_parallel_from_threads():
    cases = [{"input": f"{i}\n", "output": f"{i * i}\n", "type": "stdin_stdout"} for i in range(3)]
    right = "```python\nn = int(input())\nprint(n * n)\n```"
    wrong = "```python\nn = int(input())\nprint(n + n)\n```"
    jobs = [(right if k % 2 == 0 else wrong) for k in range(8)]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda code: code_reward(code, cases), jobs))
    assert got == [1.0 if k % 2 == 0 else 0.0 for k in range(8)]
    with ThreadPoolExecutor(6) as pool:
        outs = list(pool.map(lambda k: sb.run_program("print(input() * 2)", stdin=f"{k}\n").stdout,
                             range(6)))
    assert outs == [f"{k}{k}\n" for k in range(6)]


def test_capabilities_here():
    # This project's hosts (dev, CI) run as root on kernels that allow namespaces; report if not.
    assert set(CAPS) == {"root", "namespaces"}
    if ROOT:
        assert len(set(sb.sandbox_uids())) == sb.WORKERS and os.getuid() not in sb.sandbox_uids()
    else:
        assert sb.sandbox_uids() == [] and not NS


NON_ROOT_HOST = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from sveb.rewards import sandbox as sb
out = {"caps": sb.capabilities()}
t0 = time.monotonic()
bomb = sb.run_program("import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n"
                      "        pass", timeout=2.0, wall_timeout=4.0, nproc=24)
out["bomb"] = [bomb.timed_out, time.monotonic() - t0]
out["setsid"] = sb.run_program("import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n"
                               "    time.sleep(60)\\nprint('parent exits')", timeout=5).stdout
out["net"] = sb.run_program("import socket\\ntry:\\n    socket.create_connection(('127.0.0.1', 9))\\n"
                            "except OSError as e:\\n    print(e)", timeout=5).stdout
out["echo"] = sb.run_program("print(input()[::-1])", stdin="abc\\n", timeout=5).stdout
out["left"] = [p for p in sb.live_pids(uid=os.getuid()) if p != os.getpid()]
print(json.dumps(out))
"""


def test_non_root_host_fallback():
    """The documented fallback when the caller is not root: no namespaces, no uid drop; the
    launcher (a child subreaper) still kills the whole tree, sockets are refused in-process."""
    import json
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    drop = {"user": sb.UID_BASE - 1, "group": sb.UID_BASE - 1, "extra_groups": []} if ROOT else {}
    python = sb.program_python() if ROOT else sys.executable
    done = subprocess.run([python, "-c", NON_ROOT_HOST, repo], capture_output=True, text=True,
                          timeout=60, cwd="/", env={"PATH": "/usr/bin:/bin"}, **drop)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["caps"] == {"root": False, "namespaces": False}
    assert out["bomb"][0] is True and out["bomb"][1] < 8.0
    assert out["setsid"] == "parent exits\n"
    assert "network disabled in sandbox" in out["net"]
    assert out["echo"] == "cba\n"
    assert out["left"] == []
    if ROOT:
        assert sb.live_pids(uid=sb.UID_BASE - 1) == []
