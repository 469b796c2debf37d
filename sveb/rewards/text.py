"""Short free-text answers (the `general` domain): the gold as a whole phrase of the final answer.

The final answer text is the response's last commitment (sveb.rewards.final: the last \\boxed{} or
the sentence after the last "answer is"/"Answer:"), else its last sentence (closing pleasantries
skipped). After normalisation (case, punctuation, articles) the reward is 1 if that text is the gold,
or names the gold as a whole word/phrase that is
  - not negated: no "not"/"no"/"never"/"isn't"/"instead of"/"rather than"... in the three words
    before it within its clause (up to a "but"), and no "is not"/"isn't" right after it
    ("Not Paris but Lyon" -> 0 for Paris, 1 for Lyon);
  - not hedged: not next to "or" ("Paris or Lyon" -> 0), and the final text is not a list of three
    or more short items ("Monday, Tuesday, Wednesday" -> 0 for Tuesday).
So "The capital of France is Paris, a city in Europe." matches "Paris"; "Parisian" does not.
Yes/no golds are stricter (the word "no" is common in prose): the first or last word of the final
text must be the gold, the last one deciding when both are yes/no.
Golds that are numbers delegate to `math_reward`; golds that look like formulas get the better of both.
Known limit: a final sentence that names the gold in a false statement ("The day before Tuesday
is Monday." for gold Tuesday) scores 1; a grader without semantics cannot tell.
"""

from __future__ import annotations

import re
import string
import unicodedata

from sveb.rewards.final import final_commitment, last_sentence
from sveb.rewards.math import math_reward

_NUMBER = re.compile(
    r"[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?\s*(?:\\?%)?|"
    r"[-+\u2212]?\d+\s*/\s*\d+|[-+\u2212]?\\d?frac\{\d+\}\{\d+\}")
_MATHY = re.compile(r"[\\^$=]|\d\s*[-+*/]\s*\d")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCT = set(string.punctuation) | {"\u2018", "\u2019", "\u201c", "\u201d", "\u2013", "\u2014"}
_CLAUSE = re.compile(r"[,;:()\u2013\u2014]|\s-\s")
_NEGATION = {"not", "no", "never", "isnt", "arent", "wasnt", "werent", "dont", "doesnt", "didnt", "cannot",
             "cant", "wont", "neither", "nor", "without", "instead", "rather", "than", "except", "besides",
             "unlike", "nt"}
_NEGATED_AFTER = [("not",), ("isnt",), ("wasnt",), ("arent",), ("is", "not"), ("was", "not"), ("are", "not")]
_POLAR = {"yes", "no"}
_LIST = re.compile(r"[,;/]|\s(?:and|or)\s")


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


def final_text(response: str) -> str:
    """The response's final answer text: its last commitment, else its last sentence."""
    final = final_commitment(response)
    return final.text if final is not None else last_sentence(response)


def _named(words: list[str], target: list[str]) -> bool:
    """True if `target` occurs in `words` (one clause) as a whole phrase, neither negated nor hedged."""
    n = len(target)
    for i in range(len(words) - n + 1):
        if words[i:i + n] != target:
            continue
        before, after = words[max(0, i - 3):i], words[i + n:i + n + 2]
        if "but" in before:  # "not Paris but Lyon": the negation ends at "but"
            before = before[len(before) - before[::-1].index("but"):]
        negated = any(w in _NEGATION for w in before) or any(tuple(after[:len(p)]) == p for p in _NEGATED_AFTER)
        hedged = "or" in words[max(0, i - 1):i] or "either" in before or after[:1] == ["or"]
        if not (negated or hedged):
            return True
    return False


def matches(final: str, gold: str) -> bool:
    """True if the final answer text is, or names, the gold answer (see the module docstring)."""
    target = normalize(gold)
    said = normalize(final)
    if not target or not said:
        return False
    if said == target:
        return True
    if target in _POLAR:
        words = said.split()
        if "yes or no" in said or "no or yes" in said:  # echoing the instruction is no answer
            return False
        polar = words[-1] if words[-1] in _POLAR else words[0] if words[0] in _POLAR else None
        return polar == target
    clauses = [said.split()] if _CLAUSE.search(gold) else [normalize(c).split() for c in _CLAUSE.split(final)]
    items = [c for part in _LIST.split(final) if 1 <= len(c := normalize(part).split()) <= 2]
    if len(items) >= 3:  # "Monday, Tuesday, Wednesday": a list of candidates is a hedge
        return False
    return any(_named(words, target.split()) for words in clauses)


def string_reward(response: str, gold: str) -> float:
    """1.0 if the response's final short answer is or names the gold text, else 0.0."""
    if not isinstance(gold, str) or not gold.strip():
        raise ValueError(f"string gold must be a non-empty string, got {gold!r}")
    if not isinstance(response, str) or not response.strip():
        return 0.0
    if is_numeric(gold):
        return math_reward(response, gold)
    if matches(final_text(response), gold):
        return 1.0
    if _MATHY.search(gold):
        try:
            return math_reward(response, gold)
        except ValueError:  # gold is not parseable math after all
            return 0.0
    return 0.0
