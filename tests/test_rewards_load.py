"""Rewards must not depend on machine load: grading limits count CPU time, never wall-clock time."""

import multiprocessing
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import sveb.rewards.math as math_rewards
from sveb.rewards import reward
from sveb.rewards.budget import run_with_cpu_budget


def _spin(seconds: float) -> str:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return "spun"


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def _in_thread(fn, *args):
    """fn(*args) run in a fresh thread (not the main one); its exception is re-raised here."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:
            out["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


@pytest.mark.parametrize("where", ["main", "thread"])
def test_budget_counts_cpu_time_not_wall_time(where):
    run = run_with_cpu_budget if where == "main" else lambda *a: _in_thread(run_with_cpu_budget, *a)
    # Waiting (as a descheduled process does on a loaded machine) uses no CPU: it finishes.
    assert run(0.3, _sleep, 0.8) == (True, "slept")
    # Computing past the budget is stopped, however little else is running: measured in this process's CPU
    # seconds (the spin would use 5), since on a loaded machine 0.3 CPU seconds can take many wall seconds.
    start = time.process_time()
    assert run(0.3, _spin, 5.0) == (False, None)
    assert time.process_time() - start < 4.0


def test_budget_passes_exceptions_through():
    with pytest.raises(ZeroDivisionError):
        run_with_cpu_budget(1.0, lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _in_thread(run_with_cpu_budget, 1.0, lambda: 1 / 0)


@pytest.mark.parametrize("where", ["main", "thread"])
def test_slow_parse_in_wall_time_does_not_change_a_math_grade(monkeypatch, where):
    # Today's failure: math-verify's 5 s wall-clock (signal.alarm) timeouts. A parse that waits for the
    # CPU, as on a loaded machine, timed out: the gold "12" became unparseable (a ValueError) and a right
    # answer could become 0. Each parse here waits 0.6 s while using almost no CPU; the grade (several
    # parses) takes well over its 0.5 CPU-second budget in wall time.
    import math_verify.parser

    assert math_rewards.math_reward("The answer is 12.", "12") == 1.0  # imports sympy outside the budget
    math_rewards._parse_gold.cache_clear()
    original = math_verify.parser.extract_target_from_pred

    def slow(*args, **kwargs):
        time.sleep(0.6)
        return original(*args, **kwargs)

    monkeypatch.setattr(math_verify.parser, "extract_target_from_pred", slow)
    monkeypatch.setattr(math_rewards, "CPU_BUDGET_S", 0.5)
    grade = math_rewards.math_reward if where == "main" else lambda *a: _in_thread(math_rewards.math_reward, *a)
    assert grade("The answer is 12.", "12") == 1.0
    math_rewards._parse_gold.cache_clear()  # no gold parsed under the patch stays cached


@pytest.mark.parametrize("where", ["main", "thread"])
def test_runaway_grade_is_stopped_by_the_cpu_budget(monkeypatch, where):
    monkeypatch.setattr(math_rewards, "CPU_BUDGET_S", 0.3)
    monkeypatch.setattr(math_rewards, "_extract", lambda response: _spin(30.0))
    grade = math_rewards.math_reward if where == "main" else lambda *a: _in_thread(math_rewards.math_reward, *a)
    start = time.monotonic()
    assert grade("The answer is 12.", "12") == 0.0
    assert time.monotonic() - start < 10.0


def _problems(seed: int, n: int) -> list[tuple[str, dict]]:
    """n (response, problem row) pairs in the shapes models write, about half of them right."""
    rng = random.Random(seed)
    states = ["Solid", "Liquid", "Gas", "Plasma"]
    capitals = [("France", "Paris", "Lyon"), ("Italy", "Rome", "Milan"), ("Japan", "Tokyo", "Osaka"),
                ("Spain", "Madrid", "Seville"), ("Canada", "Ottawa", "Toronto")]
    out = []
    for i in range(n):
        kind = ("math", "choice", "string")[i % 3]
        if kind == "math":
            a, b = rng.randint(2, 999), rng.randint(2, 999)
            s, wrong = a + b, a + b + rng.choice([-1, 1, 10])
            text = rng.choice([
                f"{a} + {b} = {s}. The answer is {s}.",
                f"We add {a} and {b}, so the total is {s} apples.\n#### {s}",
                f"The answer is {wrong}. Wait, I added wrong. So it is {s}.",
                f"To answer this, the total is {a} + {b} ... final result is {s}.",
                f"So the final answer is $\\boxed{{{s}\\text{{ cents}}}}$.",
                f"Adding gives ${s * 1000:,}$ grams, i.e. \\boxed{{{s * 1000:,}}}".replace(",", ",\\! "),
                f"The answer is {wrong}.",
                f"\\boxed{{{s}}}\n\nHmm, that is wrong: the answer is {wrong}.",
                f"The answer is $\\frac{{{2 * s}}}{{2}}$.",
                f"She had {s} marbles and lost {a}, so she has {b} left.",
                f"Expanding, the answer is $(x + {a})^2 - {a * a}$.",
                f"So the interval is \\boxed{{\\left[ -{a}, {b} \\right)}}.",
            ])
            gold = str(s * 1000) if "grams" in text else str(s)
            if "Expanding" in text:
                gold = rng.choice([f"x^2 + {2 * a}x", f"x^2 + {2 * a + 1}x"])
            elif "interval" in text:
                gold = rng.choice([f"[-{a}, {b})", f"[-{a}, {b}]"])
            out.append((text, {"answer_type": "math", "answer": gold, "problem_id": f"m{i}"}))
        elif kind == "choice":
            k = rng.randint(2, 4)
            options = rng.sample(states, k)
            gold = "ABCD"[rng.randrange(k)]
            other = rng.choice([x for x in "ABCD"[:k] if x != gold])
            question = "Which state is water in at room temperature?\n" + "\n".join(
                f"({'ABCD'[j]}) {o}" for j, o in enumerate(options))
            text = rng.choice([
                f"The answer is ({gold}).",
                f"After checking each option, the correct one is {other}",
                f"Water flows, so the answer is {options['ABCD'.index(gold)]}.",
                f"Answer: A state of matter is a form. So ({gold})",
                f"The answer is ({other}). Wait, no. The correct answer is ({gold}).",
                f"I think it is {options['ABCD'.index(other)]}.",
            ])
            out.append((text, {"answer_type": "choice", "answer": gold, "question": question,
                               "meta": "{}", "problem_id": f"c{i}"}))
        else:
            country, city, other = rng.choice(capitals)
            text = rng.choice([
                f"The capital of {country} is {city}, a city in the middle of the country.",
                f"Not {city} but {other}.",
                f"\\boxed{{{city}}}",
                f"The answer is {other}, not {city}.",
                f"{city} is the capital of {country}. I hope this helps!",
                f"Hmm, {city}ian food is nice. The capital is {other}.",
            ])
            out.append((text, {"answer_type": "string", "answer": city, "problem_id": f"s{i}"}))
    return out


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_rewards_identical_under_cpu_load():
    cases = _problems(seed=9, n=210)
    quiet = [reward(text, row) for text, row in cases]
    assert 0.25 < sum(quiet) / len(quiet) < 0.75  # right and wrong answers both present

    n_busy = max(2, min(8, len(os.sched_getaffinity(0))))  # every core busy (at least two processes)
    ctx = multiprocessing.get_context("fork")
    hogs = [ctx.Process(target=_busy, args=(60.0,), daemon=True) for _ in range(n_busy)]
    for hog in hogs:
        hog.start()
    try:
        time.sleep(0.2)
        loaded = [reward(text, row) for text, row in cases]
        with ThreadPoolExecutor(2) as pool:  # the pipeline grades in threads when a batch has code
            threaded = list(pool.map(lambda c: reward(*c), cases))
        assert all(hog.is_alive() for hog in hogs)  # the load lasted the whole second pass
    finally:
        for hog in hogs:
            hog.terminate()
            hog.join()
    assert loaded == quiet
    assert threaded == quiet
