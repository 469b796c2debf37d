"""Math answers graded with math-verify (gold parsed first; `verify(gold, answer)`, order matters).

The final answer is the response's LAST commitment (sveb.rewards.final): the last \\boxed{},
"answer is X" / "Answer: X", "final result is X", "#### X", or a revision "So it is X" after one of
those, whichever comes last: "The answer is 4. Wait, ... So it is 5." gives 5, "the answer is 12,
no wait, 14" gives 14 (a retraction in the answer's own sentence, sveb.rewards.final.settle) and "To answer this,
the total is 3 + 4 ... final result is 12." gives 12. A commitment without a value ("so our answer
is correct") does not count; in one with "=", the value is after the last "=" ("is 12 + 3 = 15").
Without a commitment (or when it does not parse), math-verify's own plain extraction takes the
right-most number/expression of the response's tail. A gold number mentioned earlier does not count
when a different final answer follows. Units and thousands separators are tidied first:
"5.4 \\text{ cents}", "11,\\! 111", "11\\,111", "11 111", "\\text{12 apples}", "5 m/s", "<<3*7=21>>21".

Load independence: math-verify's own timeouts are wall-clock (signal.alarm), so on a loaded
machine a slow parse could turn a 1 into a 0. They are switched off; instead
  1. the input is bounded so no realistic grade is slow: only the last TAIL_CHARS of a response are
     searched by the plain fallback, a candidate longer than MAX_EXPR_CHARS is not an answer, and
     an extracted answer too large to evaluate (power towers like 9^{9^9}, 10^{10^{7}}, (10^6)!;
     parsing leaves them unevaluated, verify() would not) is refused before verify() (grade 0);
  2. the whole grade runs under a CPU-time budget (CPU_BUDGET_S, sveb.rewards.budget), never a
     wall-clock one: 25x the quiet maximum grade time, so a grade that finishes unloaded finishes
     loaded too, and a runaway hits it under any load (figures: docs/timings.md, "Grading").
"""

from __future__ import annotations

import logging
import math
import re
from functools import lru_cache

from sveb.rewards.budget import run_with_cpu_budget
from sveb.rewards.final import Commitment, final_commitment, settle

log = logging.getLogger(__name__)

CPU_BUDGET_S = 10.0
TAIL_CHARS = 4000
MAX_EXPR_CHARS = 1000
_MAX_DIGITS = 1e6  # a power or factorial with more digits than this is refused
_MAX_FACTORIAL = 10_000

_EQUALS = re.compile(r"(?<![<>!=])=(?!=)")
_CALCULATOR = re.compile(r"<<[^<>\n]*>>")
_VALUE = re.compile(r"[\d\\^$\u03c0\u221e]|^\(?(?![aAI]\b)[A-Za-z]\b")  # a digit, math, or "x = ..."
_LEADING_WORDS = re.compile(r"^(?:[A-Za-z]{2,}\s+)+(?=[-+$\\(\[\d])")  # "approximately 5" -> "5"
# ", which/so/not ...", " — no need ...", " (no rounding)" end the answer
_SENTENCE_BREAK = re.compile(r",\s+(?=[A-Za-z])|\s*\u2014\s*|\s+\u2013\s+(?=[A-Za-z])|\s+\((?=[A-Za-z]{2})")
_TRAILING_WORDS = re.compile(r"\s+(?:[A-Za-z]{2,}\b|[A-Za-z]{1,4}/[A-Za-z]).*$", re.DOTALL)  # "12 apples", "5 m/s"
_TEXT_NUMBER = re.compile(r"\\(?:text|textrm|textbf|mbox|mathrm)\{\s*([-\u2212]?\d[\d,.]*)\s*([^{}]*)\}")
_LATEX_GROUP_SEP = re.compile(r"(?<=\d)\s*(?:\{,\}|,\s*\\[!,;: ]\s*|\\[!,;: ]\s*|~)\s*(?=\d{3}(?!\d))")
_SPACE_GROUPS = re.compile(r"(?<![\d.,])\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?![\d])")
_POWER_CHAIN = re.compile(r"\d+(?:\.\d+)?(?:\s*\^\s*\{?\s*\(?\s*-?\s*\d+(?:\.\d+)?)+")
_FACTORIAL = re.compile(r"(\d+)\s*\)?\s*\}?\s*!|\(\s*(\d+)\s*\^\s*\{?\s*(\d+)\s*\}?\s*\)\s*!")


def _clean(text: str) -> str:
    # Unicode minus and escaped dollar (currency) trip up math-verify's regexes; GSM8K-style
    # calculator notes "<<3*7=21>>21" repeat the number they annotate.
    return _CALCULATOR.sub("", text.replace("\u2212", "-").replace("\\$", "")).strip()


def _valued(c: Commitment) -> bool:
    """A commitment that states a value: boxed, or text with a digit or math ("our answer is correct" is not)."""
    return c.boxed or bool(_VALUE.search(c.text))


def _tidy(expr: str) -> str:
    """Thousands separators and number-leading \\text{} written the way math-verify reads them."""
    expr = _TEXT_NUMBER.sub(lambda m: m.group(1) + (f" \\text{{{m.group(2)}}}" if m.group(2) else ""), expr)
    expr = _LATEX_GROUP_SEP.sub("", expr)  # "11,\! 111", "11\,111", "1{,}000" -> "11111", "1000"
    return _SPACE_GROUPS.sub(lambda m: re.sub(r"\D", "", m.group(0)), expr)  # "11 111" -> "11111"


def _digits(chain: list[float]) -> float:
    """Decimal digits of a^b^c... (right-associative), inf when astronomically large."""
    exponent = chain[-1]
    for base in reversed(chain[1:-1]):
        size = exponent * math.log10(max(base, 1.0))
        exponent = math.inf if size > 300 else base ** exponent
    return exponent * math.log10(max(chain[0], 1.0))


def too_big(expr: str) -> bool:
    """True for numbers sympy cannot evaluate in reasonable time: huge powers (towers) and factorials."""
    for m in _POWER_CHAIN.finditer(expr):
        if _digits([float(n) for n in re.findall(r"\d+(?:\.\d+)?", m.group(0))]) > _MAX_DIGITS:
            return True
    for m in _FACTORIAL.finditer(expr):
        n = float(m.group(1)) if m.group(1) else float(m.group(2)) ** min(float(m.group(3)), 300.0)
        if n > _MAX_FACTORIAL:
            return True
    return False


def _parse(text: str, latex_only: bool = False) -> list:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse
    configs = [LatexExtractionConfig(boxed_match_priority=0)]
    if not latex_only:
        configs.append(ExprExtractionConfig())
    parsed = parse(text, configs, parsing_timeout=None)  # fast: sympy keeps 9^(9^9) unevaluated here
    # ... but verify() would evaluate it: refuse the extracted text (not the whole response) when huge
    return [] if any(isinstance(p, str) and too_big(p) for p in parsed) else parsed


def _parse_value(snippet: str, boxed: bool) -> list:
    """The parsed value of a committed answer's text, [] if it does not parse."""
    if len(snippet) > MAX_EXPR_CHARS:
        return []
    snippet = _tidy(snippet)
    if boxed:
        return _parse(f"${snippet}$", latex_only=True) or _parse(snippet)
    snippet = settle(snippet)  # "12, no wait, 14" -> "14"
    if snippet.startswith(("$", "\\(", "\\[")):
        return _parse(snippet)
    snippet = _EQUALS.split(_SENTENCE_BREAK.split(snippet, 1)[0])[-1].strip()  # "4 * 0.5 = 2" -> "2"
    snippet = _LEADING_WORDS.sub("", snippet)
    core = _TRAILING_WORDS.sub("", snippet)  # "12 apples" -> "12"
    return (_parse(f"${core}$", latex_only=True) if core and "$" not in core else []) or _parse(snippet)


def _extract(response: str) -> list:
    text = _clean(response)
    if not text:
        return []
    final = final_commitment(text, _valued)
    if final is not None:
        answer = _parse_value(final.text, final.boxed)
        if answer:
            return answer
    tail = text[-TAIL_CHARS:]
    if len(text) > TAIL_CHARS:  # start the tail at a word boundary
        tail = tail.split(None, 1)[-1]
    return _parse(_LATEX_GROUP_SEP.sub("", tail))


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple:
    text = _clean(gold).rstrip(".")
    if "$" in text or "\\boxed" in text:
        parsed = _parse(text)
    else:
        parsed = _parse(f"${text}$", latex_only=True) or _parse(text)
    return tuple(parsed)


def _grade(response: str, gold: str) -> float:
    from math_verify import verify
    gold_parsed = _parse_gold(gold)
    if not gold_parsed:
        raise ValueError(f"gold answer {gold!r} cannot be parsed by math-verify")
    answer = _extract(response)
    if not answer:
        return 0.0
    return 1.0 if verify(list(gold_parsed), answer, timeout_seconds=None) else 0.0


def _quiet_math_verify() -> None:
    # math-verify warns once that its timeouts are off; the CPU budget below replaces them.
    import math_verify.grader
    import math_verify.parser
    math_verify.grader.TIMEOUT_WARNING_SHOWN = math_verify.parser.TIMEOUT_WARNING_SHOWN = True


def math_reward(response: str, gold: str) -> float:
    """1.0 if the response's final answer equals the gold answer, else 0.0."""
    if not isinstance(gold, str) or not gold.strip():
        raise ValueError(f"gold answer must be a non-empty string, got {gold!r}")
    if not isinstance(response, str):
        return 0.0
    _quiet_math_verify()
    finished, value = run_with_cpu_budget(CPU_BUDGET_S, _grade, response, gold)
    if not finished:
        log.warning("math_reward: grading used over %.0f CPU seconds; graded 0.0", CPU_BUDGET_S)
        return 0.0
    return value
