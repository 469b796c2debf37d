"""Short free-text answers (the `general` domain): normalised exact match of the final answer.

The final answer is, in order: the last \\boxed{...}; else the sentence after the last
"answer is"/"Answer:"; else the last sentence of the response. For the last two, the tail after a
final copula ("The capital of France is Paris." -> "Paris") is accepted too. Golds that are
numbers delegate to `math_reward`; golds that look like formulas get the better of both.
"""

from __future__ import annotations

import re
import string
import unicodedata

from sveb.rewards.math import _last_boxed, math_reward

_ANCHOR = re.compile(
    r"\banswer\b(?:[^.\n:=]{0,40}?\b(?:is|was|are|be)\b|\s*\**\s*[:=])", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?;](?=\s|$)|\n")
_COPULA = re.compile(r"(?:\b(?:is|are|was|were|be)\b|[:=])\s+", re.IGNORECASE)
_NUMBER = re.compile(
    r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?\s*(?:\\?%)?|"
    r"[-+\u2212]?\d+\s*/\s*\d+|[-+\u2212]?\\d?frac\{\d+\}\{\d+\}")
_MATHY = re.compile(r"[\\^$=]|\d\s*[-+*/]\s*\d")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u2013", "\u2014"}


def normalize(text: str) -> str:
    """Lower case, strip LaTeX text wrappers, punctuation, articles and extra whitespace."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"[.'\u2019](?!\d)", "", text.lower())  # "U.S.A." -> "usa", "don't" -> "dont"
    text = "".join(" " if ch in _PUNCT else ch for ch in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def is_numeric(gold: str) -> bool:
    text = gold.strip().strip("$").strip()
    return bool(text) and any(ch.isdigit() for ch in text) and _NUMBER.fullmatch(text) is not None


def _sentence(rest: str) -> str:
    end = _SENTENCE_END.search(rest)
    return (rest[:end.start()] if end else rest).strip(" \t*:")


def _last_sentence(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", lines[-1].strip()) if p.strip()]
    return parts[-1].rstrip(".!?") if parts else ""


def _candidates(response: str) -> list[str]:
    boxed = _last_boxed(response)
    if boxed:
        return [boxed]
    anchors = list(_ANCHOR.finditer(response))
    final = _sentence(response[anchors[-1].end():]) if anchors else _last_sentence(response)
    tails = [final[m.end():] for m in _COPULA.finditer(final)]
    return [final] + tails[-1:]


def string_reward(response: str, gold: str) -> float:
    """1.0 if the response's final short answer matches the gold text after normalisation."""
    if not isinstance(gold, str) or not gold.strip():
        raise ValueError(f"string gold must be a non-empty string, got {gold!r}")
    if not isinstance(response, str) or not response.strip():
        return 0.0
    if is_numeric(gold):
        return math_reward(response, gold)
    target = normalize(gold)
    if target and any(normalize(c) == target for c in _candidates(response)):
        return 1.0
    if _MATHY.search(gold):
        try:
            return math_reward(response, gold)
        except ValueError:  # gold is not parseable math after all
            return 0.0
    return 0.0
