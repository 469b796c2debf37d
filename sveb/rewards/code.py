"""Code answers: run the response's last Python block against every test case in the sandbox.

A problem's tests are a list of dicts, of three kinds:
- {"type": "stdin_stdout", "input": str, "output": str}: the block is run as a program on `input`;
  its stdout must equal `output` up to whitespace (open-r1/verifiable-coding-problems-python form).
- {"type": "function_call", "fn_name": str, "input": JSON args, "output": JSON value}: fn_name
  (or Solution().fn_name) is called; the result is compared as JSON.
- {"type": "assert", "code": str, "setup": str, "prefix": str, "entry_point": str} (the last three
  optional, default ""): Python test code run after the candidate, in a copy of its module's
  namespace, so tuples, sets and dicts keep their types. `setup` runs first, in that same copy
  (MBPP's test_setup_code and test imports: they may use the candidate's names). `prefix` is the
  problem's prompt code (HumanEval's signature + docstring, with its imports and helpers); it is
  put before the block. If `entry_point` is set and the block does not `def` it, the block is taken
  as the function's body and indented under the prompt's signature; else the block's own def
  replaces the prompt's stub. All assert cases of a list must share prefix and entry_point.
  humaneval_tests() and mbpp_tests() build these dicts from the datasets' fields.

Reward 1.0 only if ALL cases pass; no sampling of cases, so the reward is deterministic. Stdio and
function-call cases run one process each, in order, stopping at the first failure. All assert
cases of a response run in ONE process, each in its own try, with timeout x (number of assert
cases) CPU seconds for the lot. `timeout` is CPU time, never wall time (see sandbox.py), so the
machine's load cannot change a reward. The candidate's prints are discarded and it is imported as
module `solution` (its `if __name__ == "__main__":` part does not run).
"""

from __future__ import annotations

import json
import math
import re
import secrets
import textwrap
from typing import Any

from sveb.rewards.sandbox import run_program

_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_RESULT_TAG = "__SVEB_RESULT__"

# Imports the solution with its prints silenced, calls fn_name, prints the JSON result last.
_DRIVER = f"""\
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
print("\\n" + {_RESULT_TAG!r} + json.dumps(result, default=repr))
"""


# Runs the assert cases in one process. The result line carries a per-run nonce (read, then the file
# deleted, before the candidate is imported), so a candidate cannot print a forged result by chance;
# it is no barrier to a program that inspects the driver's frames (the sandbox guards the host).
_ASSERT_DRIVER = """\
import json, os, sys
def main():
    spec = json.load(open("asserts.json"))
    os.remove("asserts.json")
    nonce, out = spec["nonce"], os.fdopen(os.dup(1), "w")
    sys.stdout = open(os.devnull, "w")
    errors = []
    try:
        import solution
    except BaseException as exc:
        errors = ["solution: %s: %s" % (type(exc).__name__, str(exc)[:200])] * len(spec["cases"])
    for case in spec["cases"] if not errors else []:
        env = dict(vars(solution))
        try:
            exec(compile(case["setup"], "<setup>", "exec"), env)
            exec(compile(case["code"], "<test>", "exec"), env)
            errors.append(None)
        except BaseException as exc:
            tb, line = exc.__traceback__, ""
            while tb:  # the failing line of the test code, if it failed there
                if tb.tb_frame.f_code.co_filename == "<test>":
                    line = case["code"].splitlines()[tb.tb_lineno - 1].strip()[:150]
                tb = tb.tb_next
            errors.append("%s: %s %s" % (type(exc).__name__, str(exc)[:150], line))
    out.write("\\n" + nonce + json.dumps(errors) + "\\n")
    out.flush()
    os._exit(0)  # no atexit hooks or threads of the candidate
main()
"""


def humaneval_tests(test: str, entry_point: str, prompt: str = "") -> list[dict]:
    """HumanEval's `test` (METADATA + `def check(candidate)` of asserts) as one assert case that
    ends with check(entry_point); `prompt` (the problem's signature + docstring) as the prefix."""
    return [{"type": "assert", "code": f"{test.rstrip()}\n\n\ncheck({entry_point})\n",
             "setup": "", "prefix": prompt, "entry_point": entry_point}]


def mbpp_tests(test_list, setup: str = "", imports=()) -> list[dict]:
    """One assert case per MBPP assert string; `imports` (lines such as "import math") and
    test_setup_code become each case's setup. Pass test_list + challenge_test_list for both."""
    setup = "\n".join([*imports, setup]).strip("\n") + "\n" if (imports or setup.strip()) else ""
    return [{"type": "assert", "code": t, "setup": setup} for t in test_list]


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


def norm_lines(text: str) -> list[list[str]]:
    """Whitespace-normalised lines: tokens per line, leading/trailing blank lines dropped."""
    return [line.split() for line in text.strip().splitlines()]


def call_args(raw: Any) -> list:
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


def expected_value(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    return raw


def same_value(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got == want and type(got) is type(want)
    if isinstance(got, int) and isinstance(want, int):
        return got == want  # exact: a relative tolerance would pass 123456790 for 123456789
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        try:
            return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
        except OverflowError:  # an int beyond float range matches no float (a model's 10**400)
            return False
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(same_value(g, w) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in got)
    return got == want


def _passes_stdio(code: str, case: dict, timeout: float) -> bool:
    expected = _text(case.get("output"))
    cap = (1 << 20) + 2 * len(expected)
    result = run_program(code, stdin=_text(case.get("input")), timeout=timeout, max_output=cap)
    if result.returncode != 0 or result.killed_reason is not None:
        return False
    return norm_lines(result.stdout) == norm_lines(expected)


def _passes_call(code: str, case: dict, timeout: float) -> bool:
    spec = json.dumps({"fn_name": case["fn_name"], "args": call_args(case.get("input"))})
    result = run_program(code, timeout=timeout, files={"driver.py": _DRIVER, "case.json": spec},
                         main="driver.py")
    if result.returncode != 0 or result.killed_reason is not None:
        return False
    tagged = [line for line in result.stdout.splitlines() if line.startswith(_RESULT_TAG)]
    if not tagged:
        return False
    want = expected_value(case.get("output"))
    try:  # the value is the model's: a list nested ~900 deep must fail its case, not crash the build
        got = json.loads(tagged[-1][len(_RESULT_TAG):])
        # APPS/TACO-style golds wrap the return value in a one-element list.
        return same_value(got, want) or (isinstance(want, list) and len(want) == 1 and same_value(got, want[0]))
    except (RecursionError, ValueError):  # ValueError: an int past Python's 4,300-digit str limit
        return False


def with_prefix(code: str, prefix: str, entry_point: str = "") -> str:
    """The program for assert tests: the prompt's code, then the block (or the block as the body
    of the prompt's entry point when it does not define it)."""
    if not prefix:
        return code
    if entry_point and not re.search(rf"^[ \t]*def\s+{re.escape(entry_point)}\s*\(", code, re.M):
        return prefix.rstrip() + "\n" + textwrap.indent(textwrap.dedent(code), "    ")
    future = re.findall(r"^from __future__ import .*$", code, re.M)  # must stay first
    body = re.sub(r"^from __future__ import .*$", "", code, flags=re.M)
    return "\n".join(future + [prefix.rstrip(), "", body])


def assert_errors(code: str, cases: list[dict], timeout: float = 10.0) -> list[str | None]:
    """Run the assert cases against `code` in one sandboxed process: per case None (passed) or
    why it failed. `timeout` CPU seconds per case, for the whole process."""
    nonce = f"__SVEB_ASSERTS_{secrets.token_hex(8)}__"
    spec = json.dumps({"nonce": nonce, "cases": [{"setup": c.get("setup") or "", "code": c["code"]}
                                                  for c in cases]})
    result = run_program(code, timeout=timeout * len(cases), main="driver.py",
                         files={"driver.py": _ASSERT_DRIVER, "asserts.json": spec})
    tagged = [ln for ln in result.stdout.splitlines() if ln.startswith(nonce)]
    if result.returncode != 0 or result.killed_reason is not None or not tagged:
        why = result.killed_reason or f"exit {result.returncode}: {result.stderr.strip()[-200:]}"
        return [f"no result ({why})"] * len(cases)
    errors = json.loads(tagged[-1][len(nonce):])
    return errors if len(errors) == len(cases) else ["bad result line"] * len(cases)


def _check_cases(test_cases: Any) -> None:
    if not isinstance(test_cases, list):
        raise ValueError(f"code_reward: test_cases must be a list of dicts, got "
                         f"{type(test_cases).__name__}")
    if not test_cases:
        raise ValueError("code_reward: test_cases is empty; a problem needs at least one test")
    prefixes = set()
    for i, case in enumerate(test_cases):
        if isinstance(case, dict) and case.get("type") == "assert":
            if not isinstance(case.get("code"), str) or not case["code"].strip():
                raise ValueError(f"code_reward: assert test case {i} has no 'code' string")
            if not all(isinstance(case.get(k) or "", str) for k in ("setup", "prefix", "entry_point")):
                raise ValueError(f"code_reward: assert test case {i}: setup, prefix and "
                                 f"entry_point must be strings")
            prefixes.add((case.get("prefix") or "", case.get("entry_point") or ""))
            continue
        if not isinstance(case, dict) or "output" not in case:
            raise ValueError(f"code_reward: test case {i} must be a dict with 'input' and 'output'"
                             f" (or type 'assert' with 'code')")
        if case.get("type") == "function_call" and not case.get("fn_name"):
            raise ValueError(f"code_reward: function_call test case {i} has no fn_name")
    if len(prefixes) > 1:
        raise ValueError("code_reward: assert test cases disagree on prefix/entry_point")


def code_reward(response: str, test_cases: list[dict], timeout: float = 10.0) -> float:
    """1.0 if the response's last Python block passes every test case, else 0.0. `timeout`: CPU
    seconds per test case."""
    _check_cases(test_cases)
    code = extract_code(response)
    if code is None:
        return 0.0
    asserts = [c for c in test_cases if c.get("type") == "assert"]
    if asserts:
        program = with_prefix(code, asserts[0].get("prefix") or "", asserts[0].get("entry_point") or "")
        if any(assert_errors(program, asserts, timeout)):
            return 0.0
    for case in test_cases:
        if case.get("type") == "assert":
            continue
        kind = case.get("type") or ("function_call" if case.get("fn_name") else "stdin_stdout")
        check = _passes_call if kind == "function_call" else _passes_stdio
        if not check(code, case, timeout):
            return 0.0
    return 1.0
