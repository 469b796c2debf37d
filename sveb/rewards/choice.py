"""Multiple-choice answers: extract the response's final option letter and compare with the gold letter.

Patterns are tried tier by tier (most explicit first); inside a tier the LAST match wins, so
"A is wrong because ... so the answer is C" gives C.
"""

from __future__ import annotations

import re

LETTERS = "ABCDEFGHIJ"  # up to 10 options (MMLU-Pro style)
# A letter token; a bare "I" followed by a lowercase word is the pronoun ("I think ..."), not option I.
_L = r"(?P<l>[A-HJ]|I(?!\s+[a-z']))(?![A-Za-z0-9'])"

_TIERS = [re.compile(p, re.MULTILINE) for p in (
    # 1. \boxed{B}, \boxed{(B)}, \boxed{\text{B}}, \boxed{B) Blue whale}
    r"\\boxed\{\s*(?:\\text(?:bf)?\{)?\s*\(?" + _L,
    # 2. "answer is (B)" or "(b)", "Answer: B", "answer would be option C", "**Answer:** D"
    r"(?i:\banswer\b)(?:[^\n.]{0,30}?\b(?i:is|be|was)\b)?\s*\**\s*[:=\-]?\s*\**\s*"
    r"(?i:(?:option|choice|letter)\s+)?(?:\((?P<lc>[a-j])\)|[(\[]?\s*" + _L + ")",
    # 3. "the correct option is B", "option B is correct", "(B) is the right answer"
    r"(?i:\b(?:correct|right|best)\s+(?:option|choice)\b)(?:[^\n.]{0,20}?\b(?i:is|be)\b)?\s*[:=]?\s*\**[(\[]?" + _L
    + r"|(?i:\b(?:option|choice)\s+)?[(\[]?" + _L.replace("P<l>", "P<l1>")
    + r"[)\]]?\s+(?i:is\s+(?:the\s+)?(?:correct|right|best))",
    # 4. Formatted letters: "(B)", "B)", "B." / "B:" / "**B**" starting a line.
    r"\((?P<l>[A-J])\)|(?<![A-Za-z0-9])(?P<l2>[A-J])\)|^\s*\**(?P<l3>[A-J])(?:[.:]|\*\*|\s*$)",
)]


def extract_choice(response: str) -> str | None:
    """The final option letter of a response (upper case), or None if none is found."""
    if not isinstance(response, str):
        return None
    text = response.strip()
    if len(text) <= 4:  # "B", "(B)", "B.", "**B**"
        bare = re.fullmatch(r"[*(\[\s]*([A-Ja-j])[)\].:*\s]*", text)
        if bare:
            return bare.group(1).upper()
    for tier in _TIERS:
        last = None
        for last in tier.finditer(text):
            pass
        if last is not None:
            letter = next(v for k, v in last.groupdict().items() if k.startswith("l") and v)
            return letter.upper()
    return None


def _gold_letter(gold: str) -> str:
    letter = extract_choice(gold) if isinstance(gold, str) else None
    if letter is None:
        raise ValueError(f"choice gold must be an option letter A-J, got {gold!r}")
    return letter


def choice_reward(response: str, gold: str) -> float:
    """1.0 if the response's final option letter equals the gold letter, else 0.0."""
    gold_letter = _gold_letter(gold)
    return 1.0 if extract_choice(response) == gold_letter else 0.0
