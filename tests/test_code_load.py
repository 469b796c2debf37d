"""Issue 9: machine load must not change a code reward. Time limits are CPU time; the wall clock
is only a distant backstop. Grades a mixed set of responses on a quiet machine and again while
busy-loop processes (3 per core) compete for every core, and requires identical rewards."""

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from sveb.rewards import sandbox as sb
from sveb.rewards.code import code_reward, mbpp_tests

SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end:\n    pass\n"
SQ_STDIO = [{"input": "7\n", "output": "49", "type": "stdin_stdout"}]
SQ_CALL = [{"input": "[7]", "output": "49", "type": "function_call", "fn_name": "sq"}]
SQ_ASSERT = mbpp_tests(["assert sq(7) == 49", "assert sq(-2) == 4", "assert isinstance(sq(1), int)"])


def block(code: str) -> str:
    return f"```python\n{code}\n```"


# (response, tests, CPU timeout, expected reward)
CASES = [
    (block("def sq(x):\n    return x * x"), SQ_ASSERT, 2.0, 1.0),
    (block("def sq(x):\n    return x * x * 1.0"), SQ_ASSERT, 2.0, 0.0),
    (block("print(int(input()) ** 2)"), SQ_STDIO, 2.0, 1.0),
    (block("def sq(x):\n    return x ** 2"), SQ_CALL, 2.0, 1.0),
    (block(SPIN.format(s=0.5) + "def sq(x):\n    return x * x"), SQ_ASSERT, 2.0, 1.0),  # 0.5 s CPU
    (block(SPIN.format(s=0.5) + "print(int(input()) ** 2)"), SQ_STDIO, 2.0, 1.0),
    (block(SPIN.format(s=3) + "print(int(input()) ** 2)"), SQ_STDIO, 1.0, 0.0),  # CPU overrun
    (block("def sq(x):\n    while True:\n        pass"), SQ_ASSERT, 0.5, 0.0),
    (block("import time\ntime.sleep(0.5)\nprint(49)"), SQ_STDIO, 0.2, 1.0),  # sleeping is not CPU
]


@contextmanager
def busy_cores(per_core: int = 3):
    # Each in its own session: with autogroup scheduling a session shares one CPU slot, and every
    # sandbox run has its own session too.
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                for _ in range(per_core * (os.cpu_count() or 1))]
    try:
        time.sleep(0.3)
        yield
    finally:
        for p in spinners:
            p.kill()
        for p in spinners:
            p.wait()


def grade_all() -> list[float]:
    with ThreadPoolExecutor(sb.WORKERS) as pool:
        return list(pool.map(lambda c: code_reward(c[0], c[1], timeout=c[2]), CASES))


def test_rewards_do_not_depend_on_load():
    quiet = grade_all()
    with busy_cores():
        loaded = grade_all()
    assert quiet == loaded == [c[3] for c in CASES]


def test_cpu_bound_program_passes_under_load():
    # 0.8 s of CPU under a 2 s CPU limit passes although, sharing the cores with 4 spinners per core
    # (about 4.5x slower), it takes longer than 2 s of wall time: a wall-clock limit of 2 s would
    # have failed it.
    with busy_cores(per_core=4):
        r = sb.run_program(SPIN.format(s=0.8) + "print(round(time.process_time(), 1))", timeout=2.0)
    assert r.killed_reason is None and r.returncode == 0, r
    assert 0.8 <= float(r.stdout) < 1.5
    assert r.seconds > 2.0, f"load too light to show anything: {r.seconds:.2f} s"
