import json

import pytest

from sveb.rewards import reward
from sveb.rewards.code import _args, _lines, _same, code_reward, extract_code
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
    assert _args("[1, [2, 3]]") == [1, [2, 3]]
    assert _args('"abc"') == ["abc"]
    assert _args("1\n[2]") == [1, [2]]
    assert _lines(" a  b \n\nc\n\n\n") == [["a", "b"], [], ["c"]]
    assert _same([1, 2.0000000001], [1, 2]) and not _same(True, 1) and not _same([1], [1, 2])


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
