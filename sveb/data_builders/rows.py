"""Helpers the dataset readers share: options in one prompt format, gold letters, assert-style tests."""

from __future__ import annotations

import ast
import json
from typing import Any

from sveb.data_builders import SkipRow
from sveb.data_builders.boxed import LETTERS, require_text
from sveb.data_builders.programming import read_test_case


def choice_fields(stem: str, texts: list, gold_index: int, meta: dict) -> dict:
    """A multiple-choice problem: options rendered "(A) text" one per line under the stem, the gold letter,
    and meta["options"] = {"A": text, ...} (what the choice grader reads)."""
    if not 2 <= len(texts) <= len(LETTERS):
        raise SkipRow(f"{len(texts)} options (need 2 to {len(LETTERS)})")
    options = {}
    for i, t in enumerate(texts):
        if not isinstance(t, (str, int, float)) or isinstance(t, bool) or not str(t).strip():
            raise SkipRow("empty or non-text option")
        options[LETTERS[i]] = str(t).strip()
    if not 0 <= gold_index < len(texts):
        raise SkipRow("gold answer index out of range")
    question = stem.strip() + "\n" + "\n".join(f"({k}) {v}" for k, v in options.items())
    return {"question": question, "answer": LETTERS[gold_index], "answer_type": "choice",
            "meta": {**meta, "options": options}}


def gold_index(answer: Any, labels: list[str], texts: list[str]) -> int:
    """Index of the gold option from a label ('C', '3'), a 0-based int index, or the option's own text."""
    if isinstance(answer, bool):
        raise SkipRow("gold answer is a boolean")
    if isinstance(answer, int):
        return answer
    if isinstance(answer, str):
        a = answer.strip()
        for cands in (labels, list(LETTERS[:len(texts)])):
            if a in cands:
                return cands.index(a)
        a_cf = a.casefold()
        hits = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip().casefold() == a_cf]
        if len(hits) == 1:
            return hits[0]
        if a.isdigit():  # a CSV cell holding a 0-based index
            return int(a)
    raise SkipRow("gold answer is not one of the options")


def assert_test(code: Any, setup: str = "") -> dict:
    if not isinstance(code, str) or not code.strip():
        raise SkipRow("empty assert test")
    return {"type": "assert", "code": code, "setup": setup}


def count_asserts(code: str, function: str | None = None) -> int:
    """Assert statements in the code (inside `function` if given), not counting constant ones (`assert True`)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        raise SkipRow("test code is not valid Python") from None
    if function:
        fns = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
        if not fns:
            raise SkipRow(f"test code has no {function}() function")
        tree = fns[0]
    return sum(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(tree))


def code_tests(value: Any) -> list[dict]:
    """Test cases from a column: a list of assert strings (MBPP's test_list), of test dicts
    (stdin_stdout, function_call or assert), a {"test_cases": [...]} object, JSON text of those,
    or one string of Python asserts."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [assert_test(value)]
    if isinstance(value, dict) and "test_cases" in value:
        value = value["test_cases"]
    if isinstance(value, str):
        return [assert_test(value)]
    if not isinstance(value, (list, tuple)) or not value:
        raise SkipRow("tests are not a non-empty list")
    out = []
    for tc in value:
        if isinstance(tc, str):
            out.append(assert_test(tc))
        elif isinstance(tc, dict) and tc.get("type") == "assert":
            setup = tc.get("setup") or ""
            if not isinstance(setup, str):
                raise SkipRow("malformed test case")
            out.append(assert_test(tc.get("code"), setup))
        else:
            out.append(read_test_case(tc))
    return out


def text(rec: dict, key: str) -> str:
    """A required text column (stripped), else SkipRow naming it."""
    return require_text(rec, key)


def scalars(rec: dict, keys) -> dict:
    """The given columns that hold a plain scalar (str, int, float, bool), for meta."""
    return {k: rec[k] for k in keys if isinstance(rec.get(k), (str, int, float, bool))}
