"""Math answers graded with math-verify (gold parsed first; `verify(gold, answer)`, order matters).

The policy is a weak model that often skips \\boxed{}, so the final answer is located in
three stages, the first that yields something parseable wins:
  1. the last \\boxed{...} (balanced braces);
  2. the last "answer is X" / "Answer: X" sentence (X = the text right after the anchor);
  3. math-verify's own plain extraction, which takes the right-most number/expression.
A gold number mentioned earlier does not count when a different final answer follows.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Any, Callable

log = logging.getLogger(__name__)

TIMEOUT_S = 5  # per math-verify call (parse or verify)
_THREAD_BUDGET_S = 20.0  # whole grading, off the main thread

_ANCHOR = re.compile(
    r"\banswer\b(?:[^.\n:=]{0,40}?\b(?:is|was|are|be|equals)\b|\s*\**\s*[:=])", re.IGNORECASE)
# Where the answer sentence stops: end of sentence, or ", which/so/not ..." style continuation.
_SENTENCE_END = re.compile(r"[.;!?](?=\s|$)|,\s+(?=[A-Za-z])|\n")
_TRAILING_WORDS = re.compile(r"\s+[A-Za-z]{2,}\b.*$", re.DOTALL)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _clean(text: str) -> str:
    # Unicode minus and escaped dollar (currency) trip up math-verify's regexes.
    return text.replace("\u2212", "-").replace("\\$", "").strip()


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} or \\fbox{...}, braces balanced; None if absent."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth, j = 1, i
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return text[i:j - 1].strip() if depth == 0 else text[i:].strip()


def _anchor_snippet(text: str) -> str | None:
    """The text right after the last "answer is"/"answer:" anchor, up to the end of that sentence."""
    last = None
    for last in _ANCHOR.finditer(text):
        pass
    if last is None:
        return None
    rest = text[last.end():].lstrip(" \t:*=")
    if rest.startswith("$") or rest.startswith("\\(") or rest.startswith("\\["):
        return rest.split("\n", 1)[0].strip()  # inline latex: sentence cut could split a decimal
    end = _SENTENCE_END.search(rest)
    return (rest[:end.start()] if end else rest).strip(" *")


def _parse(text: str, timeout: int | None, latex_only: bool = False) -> list:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    configs = [LatexExtractionConfig(boxed_match_priority=0)]
    if not latex_only:
        configs.append(ExprExtractionConfig())
    return parse(text, configs, parsing_timeout=timeout)


def _extract(response: str, timeout: int | None) -> list:
    text = _clean(response)
    if not text:
        return []
    boxed = _last_boxed(text)
    if boxed:
        answer = _parse(f"${boxed}$", timeout, latex_only=True) or _parse(boxed, timeout)
        if answer:
            return answer
    snippet = _anchor_snippet(text)
    if snippet:
        core = _TRAILING_WORDS.sub("", snippet)  # "12 apples" -> "12"
        answer = []
        if core and "$" not in core and "\\(" not in core:
            answer = _parse(f"${core}$", timeout, latex_only=True)
        answer = answer or _parse(snippet, timeout)
        if answer:
            return answer
    return _parse(text, timeout)


@lru_cache(maxsize=4096)
def _parse_gold(gold: str, timeout: int | None) -> tuple:
    text = _clean(gold).rstrip(".")
    if "$" in text or "\\boxed" in text:
        parsed = _parse(text, timeout)
    else:
        parsed = _parse(f"${text}$", timeout, latex_only=True) or _parse(text, timeout)
    return tuple(parsed)


def _grade(response: str, gold: str, timeout: int | None) -> float:
    from math_verify import verify
    gold_parsed = _parse_gold(gold, timeout)
    if not gold_parsed:
        raise ValueError(f"gold answer {gold!r} cannot be parsed by math-verify")
    answer = _extract(response, timeout)
    if not answer:
        return 0.0
    return 1.0 if verify(list(gold_parsed), answer, timeout_seconds=timeout) else 0.0


def _bounded(fn: Callable[..., float], *args: Any) -> float:
    """Off the main thread signal timeouts are impossible: run in a daemon thread and stop
    waiting after a budget (a runaway sympy call is abandoned and graded 0.0)."""
    box: list = []

    def target() -> None:
        try:
            box.append(("ok", fn(*args, None)))
        except BaseException as exc:  # re-raised in the caller's thread
            box.append(("err", exc))

    worker = threading.Thread(target=target, daemon=True, name="math-reward")
    worker.start()
    worker.join(_THREAD_BUDGET_S)
    if not box:
        log.warning("math_reward gave up after %.0f s (thread); graded 0.0", _THREAD_BUDGET_S)
        return 0.0
    kind, value = box[0]
    if kind == "err":
        raise value
    return value


def math_reward(response: str, gold: str) -> float:
    """1.0 if the response's final answer equals the gold answer, else 0.0."""
    if not isinstance(gold, str) or not gold.strip():
        raise ValueError(f"gold answer must be a non-empty string, got {gold!r}")
    if not isinstance(response, str):
        return 0.0
    if _in_main_thread():
        return _grade(response, gold, TIMEOUT_S)
    return _bounded(_grade, response, gold)
