"""The builtin programming generator: enough problems per split for every seed slot (8 test seeds of 150
candidates, 4 train seeds of 200), and every task's reference solution passes its own tests (in process for all
of them, through the grader for a sample of every level)."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import sys
from collections import Counter
from functools import cache
from itertools import combinations

from sveb.data_builders import make_problem, split_of
from sveb.data_builders import programming as pg
from sveb.rewards import reward
from sveb.rewards.code import expected_value, norm_lines, same_value


def _problem(level: int, rng: random.Random) -> dict:
    q, tests, ref = pg.generate(level, rng)
    return make_problem("programming", "builtin", q, "", "code", tests=tests,
                        meta={"level": level, "reference_solution": ref})


@cache
def _all_problems(draws: int = 12_000) -> dict[str, dict]:
    rng, out = random.Random(0), {}
    for _ in range(draws):
        p = _problem(rng.choice(list(pg.LEVELS)), rng)
        out.setdefault(p["problem_id"], p)
    return out


def _family(p: dict) -> str:
    """The template a task came from: its function name, or its program with the constants masked."""
    tests = json.loads(p["tests"])
    return tests[0]["fn_name"] or re.sub(r"\d+", "#", json.loads(p["meta"])["reference_solution"])


def test_each_split_holds_at_least_700_problems():
    splits = [split_of(pid) for pid in _all_problems()]
    assert splits.count("test") >= 700 and splits.count("train") >= 700


def test_every_seed_slot_fills_disjoint():
    """8 test seeds of 150 and 4 train seeds of 200, each a third per level (sveb.data_builders.seeds)."""
    from sveb.data_builders.seeds import SLOTS, allocate
    for split, n in (("test", 150), ("train", 200)):
        draws = {s: pg.builtin(n, s, split) for s in range(SLOTS[split])}
        ids = {s: [p["problem_id"] for p in d] for s, d in draws.items()}
        assert all(len(set(d)) == n and all(split_of(pid) == split for pid in d) for d in ids.values())
        for d in draws.values():  # a third a level: 50 each of 150; 67, 67, 66 of 200
            assert Counter(json.loads(p["meta"])["level"] for p in d) == allocate(n, pg.LEVELS)
        for a, b in combinations(ids, 2):
            assert not set(ids[a]) & set(ids[b]), (split, a, b)


def test_the_tests_depend_on_the_task_only():
    a, b = random.Random(5), random.Random(6)
    first = {p["question"]: p for p in (_problem(1, a) for _ in range(2_000))}
    again = [p for p in (_problem(1, b) for _ in range(2_000)) if p["question"] in first]
    assert len(again) > 100 and all(p == first[p["question"]] for p in again)


def test_every_reference_passes_its_tests_in_process():
    """All tasks, compared as the grader compares (JSON values by same_value, printed lines by norm_lines)."""
    bad = []
    for p in _all_problems().values():
        ref, tests = json.loads(p["meta"])["reference_solution"], json.loads(p["tests"])
        assert len(tests) == pg.N_TESTS and len({t["input"] for t in tests}) == pg.N_TESTS
        for tc in tests:
            env: dict = {"__name__": "__main__"}
            if tc["type"] == "function_call":
                exec(ref, env)
                got = json.loads(json.dumps(env[tc["fn_name"]](*json.loads(tc["input"]))))
                ok = same_value(got, expected_value(tc["output"]))
            else:
                out = io.StringIO()
                with contextlib.redirect_stdout(out), _stdin(tc["input"]):
                    exec(ref, env)
                ok = norm_lines(out.getvalue()) == norm_lines(tc["output"])
            if not ok:
                bad.append((p["question"], tc))
    assert not bad


@contextlib.contextmanager
def _stdin(text: str):
    old, sys.stdin = sys.stdin, io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = old


def test_references_grade_1_through_the_code_grader():
    """Five tasks of distinct templates per level, through the sandboxed grader of the programming domain."""
    rng, picked = random.Random(1), {1: {}, 2: {}, 3: {}}
    while any(len(v) < 5 for v in picked.values()):
        level = rng.choice(list(pg.LEVELS))
        p = _problem(level, rng)
        if len(picked[level]) < 5:
            picked[level].setdefault(_family(p), p)
    for level, ps in picked.items():
        for p in ps.values():
            ref = json.loads(p["meta"])["reference_solution"]
            assert reward(f"```python\n{ref}```", p) == 1.0, (level, p["question"])
