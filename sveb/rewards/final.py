"""Where a response commits to its final answer (shared by the math and short-text graders).

Weak models rarely stop after their first answer: they box a value and then revise it, write
"The answer is 4. Wait, ... So it is 5.", or use the word "answer" as a verb ("To answer this, the
total is 3 + 4 ..."). The rule is: the LAST commitment wins, where a commitment is
  - a \\boxed{...} / \\fbox{...};
  - an answer phrase: "the answer is X", "Answer: X", "the answer to the question is X",
    "final answer/result/total is X" (the noun "answer", never the verb: "To answer this, ..." is not one);
  - after one of those, a conclusion about "it" revising it: "So it is X", "Therefore it's X" (X
    must start like a value). Before any answer, "so it is 2*7 = 14" is a step, not a commitment;
  - a "#### X" line (GSM8K style).
Numbers after the last commitment do not override it ("The answer is 8.\\n\\nQuestion 2: ... 5" -> 8).

A commitment's own sentence can retract its value and give another: "the answer is 12, no wait, 14",
"x = 5... actually x = 7", "12. Sorry, 14." Then the replacement is the answer (`settle`). A replacement
must look like an answer (a value with at most two words after it, up to its clause's end), so
"12, no doubt", "12. Actually, let me check: ..." and "12. Actually, 3 of them were eaten" keep 12. A
\\boxed{} value is never re-read this way: a box is the response's most explicit commitment.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from typing import NamedTuple

_VERB = r"(?:is|was|are|be|equals|would\s+be|should\s+be|will\s+be|must\s+be)"
# The noun "answer": directly followed by a verb/colon, "answer to/for X is", or after a determiner
# (then a short gap, commas allowed: "The answer, therefore, is 5"). Never "To answer this, the total is"
# nor "We may check our answer: ...".
_ANSWER = (
    r"\banswers?\b(?:\s*\**\s*[:=]|\s+" + _VERB + r"\b|\s+(?:to|for|of)\b[^.\n:=,]{0,40}?\b" + _VERB + r"\b)"
    r"|\b(?:the|my|our|final|correct|right)\s+answer\b[^.\n:=]{0,25}?\b" + _VERB + r"\b"
)
_RESULT = r"\bfinal\s+(?:result|total|value|count|number|amount|sum)\b[^.\n:=,]{0,30}?(?:\b" + _VERB + r"\b|[:=])"
_CONCLUSION = (r"\b(?:so|thus|therefore|hence)\b,?\s+it(?:\s+" + _VERB + r"\b|['\u2019]s\b)"
               r"(?=\s*[-\u2212+$\\(\[\d])")
_HASHES = r"(?m)^[ \t]*####(?=[ \t]*[-\u2212$\\\d])"  # "#### 72"; not a markdown heading "## Step 2"
_ANCHOR = re.compile(f"(?:{_ANSWER})|(?:{_RESULT})", re.IGNORECASE)
_CONCLUSION_ANCHOR = re.compile(_CONCLUSION, re.IGNORECASE)
_HASH_ANCHOR = re.compile(_HASHES)
_CHECKING = re.compile(r"\b(?:check|verify|confirm|test)\w*\s+(?:\w+\s+)?$", re.IGNORECASE)  # "check our answer:"
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_WINDOW = 2000  # an answer sentence is read from at most this many characters (bounds the work per phrase)
_SENTENCE_END = re.compile(r"(?<!\\)[.;!?](?=\s|$)|\n")  # "\\!" is LaTeX spacing
# Closing pleasantries are not the answer sentence ("... is Paris. I hope it is correct.").
_CLOSING = re.compile(r"^\W*(?:i\s+hope|hope\s+(?:this|that|it)|let\s+me\s+know|feel\s+free|good\s+luck)",
                      re.IGNORECASE)


# A retraction: a pause, a marker ("no wait", "sorry", "actually", "I mean", "or rather", ...), then
# optionally "it's" / "the answer is" before the replacement value.
_MARKER = (r"(?:no\s*,?\s*wait|wait\s*,?\s*no|wait|no|nope|sorry|oops|actually|i\s+mean|i\s+meant|or\s+rather"
           r"|correction|scratch\s+that|make\s+(?:that|it)|my\s+(?:mistake|bad))\b[\s,.:!\u2013\u2014-]*"
           r"(?:i\s+meant?\b[\s,]*)?"
           r"(?:(?:so\s+)?(?:it['\u2019]s|it\s+is|it\s+should\s+be|it\s+must\s+be|that['\u2019]s|the\s+answer\s+is"
           r"|make\s+(?:that|it))\b[\s:]*)?")
_RETRACT = re.compile(r"(?:[,;:.!?\u2013\u2014\u2026]+\s*|\s+-+\s*|\s+(?=(?:no\s*,?\s*wait|wait\s*,?\s*no|or\s+rather"
                      r"|i\s+mean|actually)\b))" + _MARKER, re.IGNORECASE)
_RETRACT_START = re.compile(r"[ \t]*" + _MARKER, re.IGNORECASE)  # a sentence that opens with a retraction
_VALUE_START = re.compile(r"[-\u2212+$\\(\[]?\s*\d|\$|\\[(\[a-z]|[A-Za-z]\s*=(?!=)")
_CLAUSE_END = re.compile(r",\s+(?=[A-Za-z])|\s+(?:because|since|as|which|so|but)\b|(?<!\\)[.;!?](?=\s|$)|\n")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")  # a word, not a LaTeX command


def answer_like(text: str) -> bool:
    """True if text opens with a value and its clause has at most two words ("14 apples", "x = 7")."""
    clause = _CLAUSE_END.split(text, 1)[0]
    return bool(_VALUE_START.match(clause)) and len(_WORD.findall(clause)) <= 2


def settle(text: str) -> str:
    """The value a commitment's text settles on: after its last retraction whose replacement is
    answer-like ("12, no wait, 14" -> "14"), else the text itself."""
    for m in _RETRACT.finditer(text):
        if answer_like(text[m.end():]):
            text = text[m.end():]
            return settle(text)  # "12, no, 14. Sorry, 15" -> "15"
    return text


class Commitment(NamedTuple):
    start: int   # where the commitment begins in the response
    text: str    # boxed content, or the sentence after the answer phrase
    boxed: bool


def _group(text: str, open_at: int) -> tuple[str, int]:
    """(content, end) of the brace group whose '{' is at text[open_at]; unclosed -> the rest of the text."""
    depth, j = 1, open_at + 1
    while j < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        j += 1
    return (text[open_at + 1:j - 1] if depth == 0 else text[open_at + 1:]).strip(), j


def braced(text: str, open_at: int) -> str:
    """Content of the brace group whose '{' is at text[open_at]; unclosed -> the rest of the text."""
    return _group(text, open_at)[0]


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} or \\fbox{...}, braces balanced; None if absent."""
    found = list(_BOX.finditer(text))
    return braced(text, found[-1].end() - 1) if found else None


def sentence_after(text: str, pos: int) -> str:
    """The text from pos to the end of its sentence; inline LaTeX runs to the end of the line
    (a sentence cut could split "$3.5$" or "\\(x. y\\)")."""
    rest = text[pos:pos + _WINDOW].lstrip(" \t:*=")
    if rest.startswith(("$", "\\(", "\\[")):
        return rest.split("\n", 1)[0].strip()
    end = _SENTENCE_END.search(rest)
    while end and rest[end.start()] != "\n":  # "12. Actually, 14." is one answer sentence
        opener = _RETRACT_START.match(rest, end.end())
        if not (opener and answer_like(rest[opener.end():])):
            break
        end = _SENTENCE_END.search(rest, opener.end())
    return (rest[:end.start()] if end else rest).strip(" \t*")


def commitments(text: str) -> list[Commitment]:
    """Every commitment of a response, in order of position."""
    found, starts, reach = [], [], []  # reach[i]: the furthest end of boxes 0..i (boxes can nest)
    for m in _BOX.finditer(text):
        content, end = _group(text, m.end() - 1)
        found.append(Commitment(m.start(), content, True))
        starts.append(m.start())
        reach.append(max(end, reach[-1] if reach else 0))
    for rx in (_ANCHOR, _HASH_ANCHOR):
        for m in rx.finditer(text):
            i = bisect.bisect_right(starts, m.start()) - 1
            inside = i >= 0 and reach[i] > m.start()  # "\\boxed{\\text{the answer is 5}}"
            if not inside and not _CHECKING.search(text, max(0, m.start() - 40), m.start()):
                found.append(Commitment(m.start(), sentence_after(text, m.end()), False))
    first = min((c.start for c in found), default=len(text))
    for m in _CONCLUSION_ANCHOR.finditer(text, first):  # a revision only after an answer was given:
        found.append(Commitment(m.start(), sentence_after(text, m.end()), False))  # else a step ("so it is 2*7")
    return sorted(found, key=lambda c: c.start)


def final_commitment(text: str, accept: Callable[[Commitment], bool] | None = None) -> Commitment | None:
    """The last commitment with some text (that `accept` accepts), or None if the response never commits."""
    for c in reversed(commitments(text)):
        if c.text and (accept is None or accept(c)):
            return c
    return None


def last_sentence(text: str) -> str:
    """The last sentence of the last non-empty line, skipping closing pleasantries."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    parts = [p for p in re.split(r"(?<=[.!?])\s+", lines[-1].strip()) if p.strip()]
    while len(parts) > 1 and _CLOSING.match(parts[-1]):
        parts.pop()
    return parts[-1].rstrip(".!?") if parts else ""
