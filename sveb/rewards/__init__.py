"""Reward dispatch by answer type. Every reward is deterministic: same response, same reward."""

from __future__ import annotations

import json
from typing import Any

ANSWER_TYPES = ("math", "choice", "string", "code")


def reward(response: str, problem: dict[str, Any]) -> float:
    """Reward of one response to one problem row (a dict of the problems table)."""
    kind = problem["answer_type"]
    if kind == "math":
        from sveb.rewards.math import math_reward
        return math_reward(response, problem["answer"])
    if kind == "choice":
        from sveb.rewards.choice import choice_reward
        return choice_reward(response, problem["answer"])
    if kind == "string":
        from sveb.rewards.text import string_reward
        return string_reward(response, problem["answer"])
    if kind == "code":
        from sveb.rewards.code import code_reward
        tests = problem["tests"]
        return code_reward(response, json.loads(tests) if isinstance(tests, str) else tests)
    raise ValueError(f"problem {problem.get('problem_id')}: unknown answer_type '{kind}'")
