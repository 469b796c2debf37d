"""Reward dispatch by answer type, a choice problem's options read from its row. Every reward is deterministic:
same response, same reward, whatever the machine load (graders bound CPU time, never wall-clock time; see
sveb.rewards.math)."""

from __future__ import annotations

import json
from typing import Any

from sveb.rewards.choice import LETTERS, choice_reward, parse_options
from sveb.rewards.code import code_reward
from sveb.rewards.math import math_reward
from sveb.rewards.text import string_reward


def choice_options(problem: dict[str, Any]) -> dict[str, str]:
    """A choice problem's options, letter -> text: meta["options"] (a dict, or a list in letter order),
    else the options listed in the question text; {} if neither has any."""
    meta = problem.get("meta") or {}
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError as exc:
            raise ValueError(f"problem {problem.get('problem_id')}: meta is not valid JSON ({exc})") from None
    options = meta.get("options") if isinstance(meta, dict) else None
    if isinstance(options, list):
        options = dict(zip(LETTERS, options))
    if options is not None and not (isinstance(options, dict)
                                    and all(isinstance(k, str) and isinstance(v, str) for k, v in options.items())):
        raise ValueError(f"problem {problem.get('problem_id')}: meta options must map letters to texts")
    if options:
        return {k.strip().upper(): v for k, v in options.items()}
    question = problem.get("question")
    return parse_options(question) if isinstance(question, str) else {}


def reward(response: str, problem: dict[str, Any]) -> float:
    """Reward of one response to one problem row (a dict of the problems table)."""
    kind = problem["answer_type"]
    if kind == "math":
        return math_reward(response, problem["answer"])
    if kind == "choice":
        return choice_reward(response, problem["answer"], choice_options(problem))
    if kind == "string":
        return string_reward(response, problem["answer"])
    if kind == "code":
        tests = problem["tests"]
        return code_reward(response, json.loads(tests) if isinstance(tests, str) else tests)
    raise ValueError(f"problem {problem.get('problem_id')}: unknown answer_type '{kind}'")
