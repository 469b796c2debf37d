"""Code answers: run the response's last Python block against every test case in the sandbox.

Test cases come in open-r1/verifiable-coding-problems-python form: {"input", "output", "type",
"fn_name"}. Reward 1.0 only if ALL cases pass (run in their given order, stopping at the first
failure); no sampling of cases, so the reward is deterministic.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from sveb.rewards.sandbox import run_program

_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_RESULT_TAG = "__SVEB_RESULT__"

# Imports the solution with its prints silenced, calls fn_name, prints the JSON result last.
_DRIVER = """\
import io, json, sys
case = json.load(open("case.json"))
real_stdout, sys.stdout = sys.stdout, io.StringIO()
sys.path.insert(0, ".")
import solution
fn = getattr(solution, case["fn_name"], None)
if fn is None and hasattr(solution, "Solution"):
    fn = getattr(solution.Solution(), case["fn_name"])
result = fn(*case["args"])
sys.stdout = real_stdout
print("\\n" + %r + json.dumps(result, default=repr))
""" % _RESULT_TAG


def extract_code(response: str) -> str | None:
    """The last ```python block; else the last fenced block of any language; else None."""
    if not isinstance(response, str):
        return None
    blocks = _BLOCK.findall(response)
    python = [body for lang, body in blocks if lang.lower() in ("python", "python3", "py")]
    chosen = python or [body for _, body in blocks]
    return chosen[-1] if chosen and chosen[-1].strip() else None


def _text(value: Any) -> str:
    if isinstance(value, list):  # some datasets store input/output as a list of lines
        return "\n".join(str(v) for v in value)
    return "" if value is None else str(value)


def _lines(text: str) -> list[list[str]]:
    """Whitespace-normalised lines: tokens per line, leading/trailing blank lines dropped."""
    return [line.split() for line in text.strip().splitlines()]


def _args(raw: Any) -> list:
    if not isinstance(raw, str):
        return list(raw) if isinstance(raw, (list, tuple)) else [raw]
    try:
        value = json.loads(raw)
        return value if isinstance(value, list) else [value]
    except json.JSONDecodeError:
        pass
    try:  # one JSON value per line
        return [json.loads(line) for line in raw.splitlines() if line.strip()]
    except json.JSONDecodeError:
        return [raw]


def _expected(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got == want and type(got) is type(want)
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)
    return got == want


def _passes_stdio(code: str, case: dict, timeout: float) -> bool:
    expected = _text(case.get("output"))
    cap = (1 << 20) + 2 * len(expected)
    result = run_program(code, stdin=_text(case.get("input")), timeout=timeout, max_output=cap)
    if result.returncode != 0 or result.killed_reason is not None:
        return False
    return _lines(result.stdout) == _lines(expected)


def _passes_call(code: str, case: dict, timeout: float) -> bool:
    spec = json.dumps({"fn_name": case["fn_name"], "args": _args(case.get("input"))})
    result = run_program(code, timeout=timeout, files={"driver.py": _DRIVER, "case.json": spec},
                         main="driver.py")
    if result.returncode != 0 or result.killed_reason is not None:
        return False
    tagged = [line for line in result.stdout.splitlines() if line.startswith(_RESULT_TAG)]
    if not tagged:
        return False
    got = json.loads(tagged[-1][len(_RESULT_TAG):])
    want = _expected(case.get("output"))
    # APPS/TACO-style golds wrap the return value in a one-element list.
    return _same(got, want) or (isinstance(want, list) and len(want) == 1 and _same(got, want[0]))


def _check_cases(test_cases: Any) -> None:
    if not isinstance(test_cases, list):
        raise ValueError(f"code_reward: test_cases must be a list of dicts, got "
                         f"{type(test_cases).__name__}")
    if not test_cases:
        raise ValueError("code_reward: test_cases is empty; a problem needs at least one test")
    for i, case in enumerate(test_cases):
        if not isinstance(case, dict) or "output" not in case:
            raise ValueError(f"code_reward: test case {i} must be a dict with 'input' and 'output'")
        if case.get("type") == "function_call" and not case.get("fn_name"):
            raise ValueError(f"code_reward: function_call test case {i} has no fn_name")


def code_reward(response: str, test_cases: list[dict], timeout: float = 10.0) -> float:
    """1.0 if the response's last Python block passes every test case, else 0.0."""
    _check_cases(test_cases)
    code = extract_code(response)
    if code is None:
        return 0.0
    for case in test_cases:
        kind = case.get("type") or ("function_call" if case.get("fn_name") else "stdin_stdout")
        check = _passes_call if kind == "function_call" else _passes_stdio
        if not check(code, case, timeout):
            return 0.0
    return 1.0
