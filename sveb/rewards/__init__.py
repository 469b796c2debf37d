"""Rewards by answer type (dispatch.py hands each to its grader: math, choice, text, code). Every reward is
deterministic: same response, same reward, whatever the machine load (graders bound CPU time, never wall-clock
time; see sveb.rewards.math)."""

from sveb.rewards.dispatch import choice_options, reward
