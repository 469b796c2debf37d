"""The programming domain: Python tasks graded by running test cases.

builtin: seeded tiny tasks from templates: a function on integers (level 1), a function on strings
or lists (level 2), a stdin -> stdout program (level 3); 8 test cases each, in the dataset's own form.
hub: verifiable-coding-problems-python: `problem_statement`, `verification_info.test_cases`
[{input, output, type, fn_name}]; the paper's code keeps problems with >= 6 test cases (--min-tests).
Other code sources (HumanEval, MBPP) bring assert-style tests {"type": "assert", "code", "setup"}.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable

from sveb.data_builders import Domain, SkipRow, make_problem, sample_builtin
from sveb.data_builders.boxed import require_text

# the authors' code screens programming into four tiers (250 problems each; three of 1,000 elsewhere): (0, 0.07] too
DOMAIN = Domain("programming", frozenset({"code"}), assumed_tokens=(350, 700), verifier="code", order=4,
                paper_tiers=((0.0, 0.07), (0.07, 0.17), (0.17, 0.37), (0.37, 0.77)))
HUB_ID, HUB_CONFIG, HUB_SPLIT = "open-r1/verifiable-coding-problems-python", None, "train"  # single default config

MIN_TESTS = 6
N_TESTS = 8
LEVELS = {1: 1.0, 2: 1.0, 3: 1.0}
TEST_TYPES = ("stdin_stdout", "function_call")

SYSTEM = "Write a Python solution to the problem in a single ```python code block."
STYLE = {
    "function_call": " Define the function with exactly the name and arguments the problem gives; "
                     "do not read input or print.",
    "stdin_stdout": " Read the input from standard input and print the answer to standard output.",
    "assert": " Define the function with exactly the name and arguments the problem gives; "
              "do not read input or print.",
}


def _ints(lo=-20, hi=50):
    return lambda r: r.randint(lo, hi)


def _word(r, alphabet=string.ascii_lowercase):
    return "".join(r.choice(alphabet) for _ in range(r.randint(1, 8)))


def _nums(r):
    return [r.randint(-20, 60) for _ in range(r.randint(1, 6))]


def _function_task(level: int, rng: random.Random):
    """(what it returns, fn_name, parameters, reference body, function, one generator per argument)."""
    if level == 1:  # k: an offset, m: a small factor or divisor, t: a threshold
        k, m, t = rng.randint(2, 120), rng.randint(2, 30), rng.randint(20, 80)
        two = rng.choice([
            ("returns the sum of a and b", "add", "a + b", lambda a, b: a + b),
            ("returns the product of a and b", "multiply", "a * b", lambda a, b: a * b),
            ("returns a minus b", "subtract", "a - b", lambda a, b: a - b),
            ("returns the larger of a and b", "bigger", "max(a, b)", max),
            ("returns the smaller of a and b", "smaller", "min(a, b)", min),
            ("returns the absolute difference of a and b", "distance", "abs(a - b)", lambda a, b: abs(a - b))])
        return rng.choice([
            (f"returns x + {k}", "add_k", "x", f"return x + {k}", lambda x: x + k, [_ints()]),
            (f"returns x - {k}", "sub_k", "x", f"return x - {k}", lambda x: x - k, [_ints()]),
            (f"returns {k} - x", "k_minus", "x", f"return {k} - x", lambda x: k - x, [_ints()]),
            (f"returns x multiplied by {m}", "times_k", "x", f"return x * {m}", lambda x: x * m, [_ints()]),
            (f"returns True if x is divisible by {m} and False otherwise", "is_multiple", "x",
             f"return x % {m} == 0", lambda x: x % m == 0, [_ints(0, 100)]),
            (f"returns the remainder of x divided by {m}", "remainder", "x", f"return x % {m}", lambda x: x % m,
             [_ints(0, 100)]),
            (f"returns x divided by {m}, rounded down", "divide", "x", f"return x // {m}", lambda x: x // m,
             [_ints(0, 100)]),
            (f"returns True if x is greater than {t} and False otherwise", "is_above", "x", f"return x > {t}",
             lambda x: x > t, [_ints(0, 100)]),
            (f"returns True if x is less than {t} and False otherwise", "is_below", "x", f"return x < {t}",
             lambda x: x < t, [_ints(0, 100)]),
            (f"returns the larger of x and {k}", "at_least_k", "x", f"return max(x, {k})", lambda x: max(x, k),
             [_ints(0, 150)]),
            (f"returns the smaller of x and {k}", "at_most_k", "x", f"return min(x, {k})", lambda x: min(x, k),
             [_ints(0, 150)]),
            (f"returns the absolute difference of x and {k}", "distance_to_k", "x", f"return abs(x - {k})",
             lambda x: abs(x - k), [_ints(0, 150)]),
            (two[0], two[1], "a, b", f"return {two[2]}", two[3], [_ints(), _ints()])])
    c, k, t, d = rng.choice(string.ascii_lowercase), rng.randint(2, 9), rng.randint(-15, 55), rng.randint(1, 60)
    letters = [lambda r: _word(r, c + "abcde")]
    tasks = [
        (f"returns how many times the letter '{c}' appears in the string s", "count_char", "s",
         f"return s.count('{c}')", lambda s: s.count(c), letters),
        (f"returns the string s with every letter '{c}' removed", "remove_char", "s",
         f"return s.replace('{c}', '')", lambda s: s.replace(c, ""), letters),
        (f"returns True if the string s starts with the letter '{c}' and False otherwise", "starts_with", "s",
         f"return s.startswith('{c}')", lambda s: s.startswith(c), letters),
        (f"returns True if the string s ends with the letter '{c}' and False otherwise", "ends_with", "s",
         f"return s.endswith('{c}')", lambda s: s.endswith(c), letters),
        (f"returns the index of the first letter '{c}' in the string s, or -1 if it does not appear", "find_char",
         "s", f"return s.find('{c}')", lambda s: s.find(c), letters),
        (f"returns the string s repeated {k} times", "repeat", "s", f"return s * {k}", lambda s: s * k, [_word]),
        (f"returns the first {k} characters of the string s (all of s if it is shorter)", "first_k", "s",
         f"return s[:{k}]", lambda s: s[:k], [_word]),
        (f"returns the last {k} characters of the string s (all of s if it is shorter)", "last_k", "s",
         f"return s[-{k}:]", lambda s: s[-k:], [_word]),
        (f"returns a new list with each number in the list nums multiplied by {k}", "scale", "nums",
         f"return [x * {k} for x in nums]", lambda ns: [x * k for x in ns], [_nums]),
        (f"returns a new list with {d} added to each number in the list nums", "shift", "nums",
         f"return [x + {d} for x in nums]", lambda ns: [x + d for x in ns], [_nums]),
        (f"returns how many numbers in the list nums are divisible by {k}", "count_multiples", "nums",
         f"return sum(1 for x in nums if x % {k} == 0)", lambda ns: sum(1 for x in ns if x % k == 0), [_nums]),
        (f"returns the sum of the numbers in the list nums that are greater than {t}", "sum_above", "nums",
         f"return sum(x for x in nums if x > {t})", lambda ns: sum(x for x in ns if x > t), [_nums]),
        (f"returns how many numbers in the list nums are greater than {t}", "count_above", "nums",
         f"return sum(1 for x in nums if x > {t})", lambda ns: sum(1 for x in ns if x > t), [_nums]),
        (f"returns the sum of the numbers in the list nums that are less than {t}", "sum_below", "nums",
         f"return sum(x for x in nums if x < {t})", lambda ns: sum(x for x in ns if x < t), [_nums]),
        (f"returns how many numbers in the list nums are less than {t}", "count_below", "nums",
         f"return sum(1 for x in nums if x < {t})", lambda ns: sum(1 for x in ns if x < t), [_nums]),
        (f"returns a new list of the numbers in the list nums that are greater than {t}", "keep_above", "nums",
         f"return [x for x in nums if x > {t}]", lambda ns: [x for x in ns if x > t], [_nums]),
        (f"returns True if the letter '{c}' appears in the string s and False otherwise", "has_char", "s",
         f"return '{c}' in s", lambda s: c in s, letters),
        (f"returns the string s with every letter '{c}' replaced by '*'", "mask_char", "s",
         f"return s.replace('{c}', '*')", lambda s: s.replace(c, "*"), letters),
        (f"returns a new list of the numbers in the list nums that are less than {t}", "keep_below", "nums",
         f"return [x for x in nums if x < {t}]", lambda ns: [x for x in ns if x < t], [_nums]),
        (f"returns a new list with {d} subtracted from each number in the list nums", "unshift", "nums",
         f"return [x - {d} for x in nums]", lambda ns: [x - d for x in ns], [_nums]),
        (f"returns a new list with each number in the list nums greater than {t} replaced by {t}", "clip", "nums",
         f"return [min(x, {t}) for x in nums]", lambda ns: [min(x, t) for x in ns], [_nums]),
        (f"returns the string s with the letter '{c}' added at its start", "prefix_char", "s",
         f"return '{c}' + s", lambda s: c + s, [_word]),
        (f"returns the string s with the letter '{c}' added at its end", "suffix_char", "s",
         f"return s + '{c}'", lambda s: s + c, [_word]),
        ("returns the string s reversed", "reverse", "s", "return s[::-1]", lambda s: s[::-1], [_word]),
        ("returns the number of vowels (a, e, i, o, u) in the lowercase string s", "count_vowels", "s",
         "return sum(ch in 'aeiou' for ch in s)", lambda s: sum(ch in "aeiou" for ch in s), [_word]),
        ("returns the largest number in the non-empty list nums", "largest", "nums", "return max(nums)", max, [_nums]),
        ("returns the smallest number in the non-empty list nums", "smallest", "nums", "return min(nums)", min,
         [_nums]),
        ("returns the sum of the numbers in the list nums", "total", "nums", "return sum(nums)", sum, [_nums]),
    ]
    return rng.choice(tasks)


def _stdin_task(rng: random.Random):
    """(statement, reference source, function from input text to output text, input generator)."""
    k, m, t, c = rng.randint(2, 120), rng.randint(2, 30), rng.randint(-15, 55), rng.choice(string.ascii_lowercase)
    two = lambda r: f"{r.randint(-20, 50)} {r.randint(-20, 50)}\n"  # noqa: E731
    one = lambda r: f"{r.randint(-20, 50)}\n"  # noqa: E731
    word = lambda r: _word(r) + "\n"  # noqa: E731
    line = lambda r: " ".join(map(str, _nums(r))) + "\n"  # noqa: E731
    ab = lambda s: tuple(map(int, s.split()))  # noqa: E731
    read2 = "a, b = map(int, input().split())\nprint("
    tasks = [
        ("Read two integers a and b from one line and print a + b.", read2 + "a + b)",
         lambda s: f"{sum(ab(s))}\n", two),
        ("Read two integers a and b from one line and print a * b.", read2 + "a * b)",
         lambda s: f"{ab(s)[0] * ab(s)[1]}\n", two),
        ("Read two integers a and b from one line and print a - b.", read2 + "a - b)",
         lambda s: f"{ab(s)[0] - ab(s)[1]}\n", two),
        ("Read two integers a and b from one line and print the larger one.", read2 + "max(a, b))",
         lambda s: f"{max(ab(s))}\n", two),
        ("Read two integers a and b from one line and print the smaller one.", read2 + "min(a, b))",
         lambda s: f"{min(ab(s))}\n", two),
        (f"Read two integers a and b from one line and print (a + b) * {m}.", read2 + f"(a + b) * {m})",
         lambda s: f"{sum(ab(s)) * m}\n", two),
        (f"Read an integer n and print n + {k}.", f"print(int(input()) + {k})", lambda s: f"{int(s) + k}\n", one),
        (f"Read an integer n and print n - {k}.", f"print(int(input()) - {k})", lambda s: f"{int(s) - k}\n", one),
        (f"Read an integer n and print {k} - n.", f"print({k} - int(input()))", lambda s: f"{k - int(s)}\n", one),
        (f"Read an integer n and print n * {m}.", f"print(int(input()) * {m})", lambda s: f"{int(s) * m}\n", one),
        (f"Read a non-negative integer n and print the remainder of n divided by {m}.",
         f"print(int(input()) % {m})", lambda s: f"{int(s) % m}\n", lambda r: f"{r.randint(0, 100)}\n"),
        (f"Read a word and print it {m % 8 + 2} times, separated by single spaces.",
         f"w = input().strip()\nprint(' '.join([w] * {m % 8 + 2}))",
         lambda s: " ".join([s.strip()] * (m % 8 + 2)) + "\n", word),
        (f"Read a word and print how many times the letter '{c}' appears in it.",
         f"print(input().strip().count('{c}'))", lambda s: f"{s.strip().count(c)}\n",
         lambda r: _word(r, c + "abcde") + "\n"),
        (f"Read a line of integers separated by spaces and print the sum of those greater than {t}.",
         f"print(sum(x for x in map(int, input().split()) if x > {t}))",
         lambda s: f"{sum(x for x in map(int, s.split()) if x > t)}\n", line),
        (f"Read a line of integers separated by spaces and print how many of them are greater than {t}.",
         f"print(sum(1 for x in map(int, input().split()) if x > {t}))",
         lambda s: f"{sum(1 for x in map(int, s.split()) if x > t)}\n", line),
        (f"Read two integers a and b from one line and print (a - b) * {m}.", read2 + f"(a - b) * {m})",
         lambda s: f"{(ab(s)[0] - ab(s)[1]) * m}\n", two),
        (f"Read a non-negative integer n and print n divided by {m}, rounded down.", f"print(int(input()) // {m})",
         lambda s: f"{int(s) // m}\n", lambda r: f"{r.randint(0, 100)}\n"),
        (f"Read a word and print it with every letter '{c}' removed.", f"print(input().strip().replace('{c}', ''))",
         lambda s: s.strip().replace(c, "") + "\n", lambda r: _word(r, c + "abcde") + "\n"),
        (f"Read a line of integers separated by spaces and print the sum of those less than {t}.",
         f"print(sum(x for x in map(int, input().split()) if x < {t}))",
         lambda s: f"{sum(x for x in map(int, s.split()) if x < t)}\n", line),
        (f"Read a line of integers separated by spaces and print how many of them are less than {t}.",
         f"print(sum(1 for x in map(int, input().split()) if x < {t}))",
         lambda s: f"{sum(1 for x in map(int, s.split()) if x < t)}\n", line),
        (f"Read an integer n and print yes if n is greater than {t}, and no otherwise.",
         f"print('yes' if int(input()) > {t} else 'no')", lambda s: ("yes" if int(s) > t else "no") + "\n",
         lambda r: f"{r.randint(-20, 80)}\n"),
        ("Read a word and print its length.", "print(len(input().strip()))", lambda s: f"{len(s.strip())}\n", word),
        ("Read a word and print it reversed.", "print(input().strip()[::-1])", lambda s: s.strip()[::-1] + "\n",
         word),
    ]
    return rng.choice(tasks)


def _distinct(gen, rng: random.Random, k: int) -> list:
    out, tries = [], 0
    while len(out) < k and tries < 1000:
        tries += 1
        x = gen(rng)
        if x not in out:
            out.append(x)
    return out


def _task(level: int, rng: random.Random) -> tuple[str, Callable[[], tuple[str, list[dict], str]]]:
    """(the task's identity, a function that writes it out): only choosing the task draws from rng, so a pool
    writes each distinct task once (its tests come from a generator seeded with the task itself)."""
    if level in (1, 2):
        what, fn, params, body, f, gens = _function_task(level, rng)
        core = f"Write a Python function `{fn}({params})` that {what}."

        def write():
            args = _distinct(lambda r: [g(r) for g in gens], random.Random(core), N_TESTS)
            tests = [{"input": json.dumps(a), "output": json.dumps(f(*a)), "type": "function_call", "fn_name": fn}
                     for a in args]
            shown = ", ".join(map(repr, args[0]))
            question = f"{core} For example, {fn}({shown}) should return {f(*args[0])!r}."
            return question, tests, f"def {fn}({params}):\n    {body}\n"
        return core, write
    if level == 3:
        core, ref, f, gen = _stdin_task(rng)

        def write():
            inputs = _distinct(gen, random.Random(core), N_TESTS)
            tests = [{"input": s, "output": f(s), "type": "stdin_stdout", "fn_name": None} for s in inputs]
            question = (f"{core}\n\nExample input:\n{inputs[0].rstrip()}\n\n"
                        f"Example output:\n{tests[0]['output'].rstrip()}")
            return question, tests, ref + "\n"
        return core, write
    raise ValueError(f"unknown programming level {level}")


def generate(level: int, rng: random.Random) -> tuple[str, list[dict], str]:
    """(question, test cases, reference solution); the tests depend on the task only, not on rng state."""
    return _task(level, rng)[1]()


_WRITTEN: dict[str, dict] = {}  # a task's problem, written once per process (pools draw a task many times)


def _make(level: int, rng: random.Random) -> dict:
    core, write = _task(level, rng)
    if core not in _WRITTEN:
        q, tests, ref = write()
        _WRITTEN[core] = make_problem("programming", "builtin", q, "", "code", tests=tests,
                                      meta={"level": level, "reference_solution": ref})
    return _WRITTEN[core]


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: ask, exclude (sample_builtin)
    return sample_builtin("programming", n, seed, split, LEVELS, _make, **kw)


def read_test_case(tc) -> dict:
    """One stdin_stdout or function_call test case in the dataset's form, checked (SkipRow if malformed)."""
    if not isinstance(tc, dict) or tc.get("type") not in TEST_TYPES:
        raise SkipRow("malformed test case")
    fn = tc.get("fn_name")
    inp, outp = tc.get("input"), tc.get("output")
    if tc["type"] == "function_call":
        if not isinstance(fn, str) or not fn:
            raise SkipRow("function_call test case without fn_name")
        # arguments and results are JSON text; a loader that already decoded them gets them re-encoded
        inp = inp if isinstance(inp, str) else json.dumps(inp)
        outp = outp if isinstance(outp, str) else json.dumps(outp)
    if not isinstance(inp, str) or not isinstance(outp, str):
        raise SkipRow("malformed test case")
    return {"input": inp, "output": outp, "type": tc["type"], "fn_name": fn if tc["type"] == "function_call" else None}


def from_record(rec: dict) -> dict:
    q = require_text(rec, "problem_statement", "problem statement")
    info = rec.get("verification_info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            raise SkipRow("verification_info is not valid JSON") from None
    if not isinstance(info, dict):
        raise SkipRow("missing verification_info")
    if isinstance(info.get("language"), str) and info["language"].lower() != "python":
        raise SkipRow("not a Python problem")
    cases = info.get("test_cases")
    if not isinstance(cases, list):
        raise SkipRow("test cases are not a list")
    tests = [read_test_case(tc) for tc in cases]  # --min-tests (6 for this dataset) is applied by the loader
    meta = {"n_tests": len(tests)}
    for key, name in (("gold_standard_solution", "reference_solution"), ("source", "source"),
                      ("problem_id", "source_id"), ("in_source_id", "in_source_id")):
        if isinstance(rec.get(key), str):
            meta[name] = rec[key]
    return make_problem("programming", HUB_ID, q, "", "code", tests=tests, meta=meta)


def prompt(problem: dict) -> list[dict]:
    tests = json.loads(problem["tests"]) if isinstance(problem["tests"], str) else problem["tests"]
    style = STYLE.get(tests[0]["type"], "") if tests else ""
    return [{"role": "system", "content": SYSTEM + style}, {"role": "user", "content": problem["question"]}]
