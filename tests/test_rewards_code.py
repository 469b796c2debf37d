import json

import pytest

from sveb.rewards import reward
from sveb.rewards.code import (
    assert_errors,
    call_args,
    code_reward,
    extract_code,
    humaneval_tests,
    mbpp_tests,
    norm_lines,
    same_value,
    with_prefix,
)
from sveb.rewards.sandbox import run_program


def block(src: str, lang: str = "python") -> str:
    return f"Here is my solution.\n```{lang}\n{src}\n```\nDone."


ADD = [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout", "fn_name": None},
       {"input": "10 -4\n", "output": "6", "type": "stdin_stdout", "fn_name": None},
       {"input": "0 0", "output": "0\n\n", "type": "stdin_stdout", "fn_name": None}]
ADD_OK = "a, b = map(int, input().split())\nprint(a + b)"

TOTAL = [{"input": "[[1, 2, 3]]", "output": "[6]", "type": "function_call", "fn_name": "total"},
         {"input": "[[]]", "output": "0", "type": "function_call", "fn_name": "total"},
         {"input": [[5, 5]], "output": 10, "type": "function_call", "fn_name": "total"}]


def test_extract_code_takes_last_python_block():
    text = "```python\nprint(1)\n```\nbetter:\n```python\nprint(2)\n```\n```text\nout\n```"
    assert extract_code(text).strip() == "print(2)"
    assert extract_code("```\nprint(3)\n```").strip() == "print(3)"
    assert extract_code("```py\nprint(4)\n```").strip() == "print(4)"
    assert extract_code("print(5) without fences") is None
    assert extract_code("```python\n\n```") is None


def test_stdin_stdout_pass_and_fail():
    assert code_reward(block(ADD_OK), ADD) == 1.0
    assert code_reward(block("a, b = map(int, input().split())\nprint(a - b)"), ADD) == 0.0
    assert code_reward("no code at all", ADD) == 0.0


def test_output_whitespace_is_normalised_but_content_is_not():
    cases = [{"input": "", "output": "1 2\n3\n", "type": "stdin_stdout"}]
    assert code_reward(block("print(' 1   2 ')\nprint('3   ')\nprint()"), cases) == 1.0
    assert code_reward(block("print('1 2')"), cases) == 0.0           # a line missing
    assert code_reward(block("print('1 2')\nprint(3)\nprint(4)"), cases) == 0.0  # a line too many
    assert code_reward(block("print('12')\nprint(3)"), cases) == 0.0


def test_every_case_must_pass():
    # Correct on the first two cases only: reward is all-or-nothing over ALL cases.
    code = "a, b = map(int, input().split())\nprint(a + b if a else 99)"
    assert code_reward(block(code), ADD) == 0.0
    assert code_reward(block(code), ADD[:2]) == 1.0


def test_crash_or_nonzero_exit_fails_even_with_right_output():
    assert code_reward(block("print(3)\nraise SystemExit(1)"), ADD[:1]) == 0.0
    assert code_reward(block("print(3)\n1/0"), ADD[:1]) == 0.0


def test_function_call_forms():
    assert code_reward(block("def total(xs):\n    print('debug noise')\n    return sum(xs)"), TOTAL) == 1.0
    assert code_reward(block("class Solution:\n    def total(self, xs):\n        return sum(xs)"), TOTAL) == 1.0
    assert code_reward(block("def total(xs):\n    return len(xs)"), TOTAL) == 0.0
    assert code_reward(block("def other(xs):\n    return sum(xs)"), TOTAL) == 0.0
    assert code_reward(block("def total(xs):\n    raise ValueError"), TOTAL) == 0.0


def test_function_call_floats_and_multiple_args():
    cases = [{"input": "[1, 3]", "output": "[0.3333333333]", "type": "function_call", "fn_name": "div"},
             {"input": "2\n4", "output": "0.5", "type": "function_call", "fn_name": "div"}]
    assert code_reward(block("def div(a, b):\n    return a / b"), cases) == 1.0
    assert code_reward(block("def div(a, b):\n    return b / a"), cases) == 0.0


def test_helpers():
    assert call_args("[1, [2, 3]]") == [1, [2, 3]]
    assert call_args('"abc"') == ["abc"]
    assert call_args("1\n[2]") == [1, [2]]
    assert norm_lines(" a  b \n\nc\n\n\n") == [["a", "b"], [], ["c"]]
    assert same_value([1, 2.0000000001], [1, 2]) and not same_value(True, 1) and not same_value([1], [1, 2])


def test_numbers_compare_exactly_as_ints_and_never_overflow():
    # ints are exact (a relative tolerance of 1e-6 passed 123456790 for 123456789); floats keep the tolerance
    assert not same_value(123456790, 123456789)
    assert same_value(10**400, 10**400) and not same_value(10**400 + 1, 10**400)
    assert same_value(2.0000000001, 2) and same_value(2, 2.0000000001) and not same_value(2.1, 2)
    # an int beyond float range against a float is a mismatch, not a crash of the whole build (it was)
    assert not same_value(10**400, 1.5) and not same_value(1.5, 10**400) and not same_value(10**400, float("inf"))
    huge = [{"input": "[3]", "output": "0.5", "type": "function_call", "fn_name": "f"}]
    assert code_reward(block("def f(n):\n    return 10 ** 400"), huge) == 0.0
    assert code_reward(block("def f(n):\n    return 1 / 2"), huge) == 1.0


def test_a_deeply_nested_return_value_fails_its_case_instead_of_crashing():
    # the driver can print a list ~900 deep; decoding and comparing it in a caller already some frames deep
    # (as inside a sampling worker) raised RecursionError and ended the build
    src = "def f(n):\n    x = 0\n    for _ in range(900):\n        x = [x]\n    return x"
    cases = [{"input": "[3]", "output": "0", "type": "function_call", "fn_name": "f"}]

    def deep(k):
        return code_reward(block(src), cases) if k == 0 else deep(k - 1)
    assert deep(300) == 0.0
    # an int past the 4,300-digit str limit, printed because the candidate lifted the limit in its own process
    big = "import sys\nsys.set_int_max_str_digits(0)\ndef f(n):\n    return 10 ** 5000"
    assert code_reward(block(big), cases) == 0.0


def test_bad_test_cases_raise():
    with pytest.raises(ValueError, match="must be a list"):
        code_reward(block(ADD_OK), {"input": "1 2", "output": "3"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be a list"):
        code_reward(block(ADD_OK), json.dumps(ADD))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        code_reward(block(ADD_OK), [])
    with pytest.raises(ValueError, match="fn_name"):
        code_reward(block(ADD_OK), [{"input": "[]", "output": "1", "type": "function_call"}])


def test_dispatch_accepts_json_tests():
    problem = {"answer_type": "code", "tests": json.dumps(ADD[:1])}
    assert reward(block(ADD_OK), problem) == 1.0


def test_rewards_are_deterministic():
    # String hashing is seeded (PYTHONHASHSEED=0): set order, hence output, is stable across runs.
    code = "print(' '.join({'apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape', 'kiwi'}))"
    outs = {run_program(code, timeout=10).stdout for _ in range(3)}
    assert len(outs) == 1
    cases = [{"input": "", "output": outs.pop(), "type": "stdin_stdout"}]
    assert [code_reward(block(code), cases) for _ in range(2)] == [1.0, 1.0]


# --- assert-style tests (HumanEval, MBPP) ---------------------------------------------------------

PAIR = mbpp_tests(["assert pair(1, 2) == (1, 2)", "assert pair(3, 3) == (3, 3)",
                   "assert isinstance(pair(0, 0), tuple)"])


def test_test_case_constructors():
    assert mbpp_tests(["assert f(1) == 2", "assert f(2) == 3"], "x = 1\r\n", ("import math",)) == [
        {"type": "assert", "code": "assert f(1) == 2", "setup": "import math\nx = 1\r\n"},
        {"type": "assert", "code": "assert f(2) == 3", "setup": "import math\nx = 1\r\n"}]
    assert mbpp_tests(["assert f(1) == 2"]) == [{"type": "assert", "code": "assert f(1) == 2",
                                                  "setup": ""}]
    test = "\n\ndef check(candidate):\n    assert candidate(1) == 2\n\n"
    assert humaneval_tests(test, "inc", "def inc(x):\n    \"\"\"x + 1\"\"\"\n") == [
        {"type": "assert", "code": "\n\ndef check(candidate):\n    assert candidate(1) == 2\n\n\ncheck(inc)\n",
         "setup": "", "prefix": "def inc(x):\n    \"\"\"x + 1\"\"\"\n", "entry_point": "inc"}]


def test_asserts_keep_python_types():
    assert code_reward(block("def pair(a, b):\n    return (a, b)"), PAIR) == 1.0
    assert code_reward(block("def pair(a, b):\n    return [a, b]"), PAIR) == 0.0  # list != tuple
    cases = mbpp_tests(["assert uniq([1, 1, 2]) == {1, 2}", "assert count('aab') == {'a': 2, 'b': 1}"])
    ok = "def uniq(xs):\n    return set(xs)\ndef count(s):\n    return {c: s.count(c) for c in s}"
    assert code_reward(block(ok), cases) == 1.0
    assert code_reward(block(ok.replace("set(xs)", "sorted(set(xs))")), cases) == 0.0


def test_every_assert_runs_and_failures_are_reported_per_case():
    code = "def pair(a, b):\n    return (a, b) if a != b else None"
    errors = assert_errors(code, PAIR)
    assert errors[0] is None and errors[1].startswith("AssertionError") and "pair(3, 3)" in errors[1]
    assert errors[2].startswith("AssertionError")  # still ran after case 1 failed
    assert code_reward(block(code), PAIR) == 0.0
    assert code_reward(block(code), PAIR[:1]) == 1.0


def test_setup_runs_after_the_candidate_and_sees_its_names():
    # MBPP 926-style: test_setup_code builds objects of a class the solution defines.
    cases = mbpp_tests(["assert depth(root) == 2", "assert depth(leaf) == 1 and math.pi > 3"],
                       "root = Node(Node(None))\nleaf = Node(None)", ("import math",))
    ok = ("class Node:\n    def __init__(self, child):\n        self.child = child\n"
          "def depth(n):\n    return 0 if n is None else 1 + depth(n.child)")
    assert code_reward(block(ok), cases) == 1.0
    assert code_reward(block(ok.replace("1 + depth", "2 + depth")), cases) == 0.0


def test_prefix_body_full_function_and_prompt_helpers():
    prompt = ("from typing import List\n\n\ndef double(xs: List[int]) -> List[int]:\n"
              "    return [2 * x for x in xs]\n\n\ndef quad(xs: List[int]) -> List[int]:\n"
              "    \"\"\"Each element times 4.\"\"\"\n")
    test = "def check(candidate):\n    assert candidate([1, 2]) == [4, 8]\n    assert candidate([]) == []\n"
    cases = humaneval_tests(test, "quad", prompt)
    body = "    return double(double(xs))"  # continues the prompt, as in HumanEval's own format
    assert code_reward(block(body), cases) == 1.0
    assert code_reward(block("return double(double(xs))"), cases) == 1.0  # unindented body
    full = "def quad(xs: List[int]) -> List[int]:\n    return double(double(xs))"  # uses the prompt's helper
    assert code_reward(block(full), cases) == 1.0
    assert code_reward(block("from __future__ import annotations\n" + full), cases) == 1.0
    assert code_reward(block("def quad(xs):\n    return double(xs)"), cases) == 0.0
    assert code_reward(block("    return None"), cases) == 0.0
    assert code_reward(block(body), humaneval_tests(test, "quad")) == 0.0  # no prompt: body alone fails
    assert with_prefix("x = 1", "") == "x = 1"


def test_candidate_names_are_not_clobbered_by_the_test():
    # The candidate's own helper called `check` must survive HumanEval's `def check(candidate)`.
    test = "def check(candidate):\n    assert candidate(3) is True\n    assert candidate(4) is False\n"
    code = "def check(n):\n    return n % 2 == 1\ndef odd(n):\n    return check(n)"
    assert code_reward(block(code), humaneval_tests(test, "odd")) == 1.0


def test_main_guard_prints_and_exits():
    cases = mbpp_tests(["assert f(2) == 4"])
    noisy = ("def f(x):\n    print('noise' * 100)\n    return x * x\nif __name__ == '__main__':\n"
             "    print(f(int(input())))")
    assert code_reward(block(noisy), cases) == 1.0
    assert code_reward(block("import sys\ndef f(x):\n    return x * x\nsys.exit(0)"), cases) == 0.0
    assert code_reward(block("def f(x):\n    raise SystemExit(0)"), cases) == 0.0
    errors = assert_errors("def f(x):\n    return x *", cases)
    assert errors[0].startswith("solution: SyntaxError")


def test_forged_result_line_fails():
    # The result line carries a per-run nonce the candidate never sees.
    forged = ("import os\nos.write(1, b'\\n__SVEB_ASSERTS_0000__[null]\\n__SVEB_RESULT__[null]\\n')\n"
              "os._exit(0)")
    assert code_reward(block(forged), mbpp_tests(["assert f(2) == 4"])) == 0.0


def test_assert_cases_share_one_process_and_a_cpu_budget():
    # One process: module state set by case 1 is seen by case 2.
    cases = mbpp_tests(["assert bump() == 1", "assert bump() == 2"])
    assert code_reward(block("n = 0\ndef bump():\n    global n\n    n += 1\n    return n"), cases) == 1.0
    spin = ("import time\ndef f():\n    end = time.process_time() + 0.6\n    while time.process_time() < end:\n"
            "        pass\n    return 1")
    two = mbpp_tests(["assert f() == 1", "assert f() == 1"])
    assert code_reward(block(spin), two, timeout=1.0) == 1.0  # 1.2 s CPU of 2 s (1 s per case)
    assert assert_errors(spin, two * 2, timeout=0.3) == ["no result (timeout)"] * 4


def test_mixed_kinds_and_dispatch():
    cases = mbpp_tests(["assert sq(3) == 9"]) + [{"input": "4\n", "output": "16", "type": "stdin_stdout"}]
    code = "def sq(x):\n    return x * x\nif __name__ == '__main__':\n    print(sq(int(input())))"
    assert code_reward(block(code), cases) == 1.0
    assert code_reward(block(code.replace("print(sq(", "print(1 + sq(")), cases) == 0.0
    problem = {"answer_type": "code", "tests": json.dumps(PAIR)}
    assert reward(block("def pair(a, b):\n    return a, b"), problem) == 1.0


def test_bad_assert_cases_raise():
    with pytest.raises(ValueError, match="test case 1 has no 'code'"):
        code_reward(block(ADD_OK), PAIR[:1] + [{"type": "assert", "code": " "}])
    with pytest.raises(ValueError, match="must be strings"):
        code_reward(block(ADD_OK), [{"type": "assert", "code": "assert 1", "setup": 3}])
    with pytest.raises(ValueError, match="disagree"):
        code_reward(block(ADD_OK), humaneval_tests("", "f", "p") + humaneval_tests("", "g", "p"))
