"""Parsing helpers shared by the domain modules: the last \\boxed{} of a text, choice letters, text fields."""

from __future__ import annotations

import re

from sveb.data_builders import SkipRow

LETTERS = "ABCDEFGHIJ"
# An option marker: "(A) x", "A) x", "A. x", "A: x" at the start of a line, or "(A) x" inline.
_OPTION = re.compile(r"^[ \t]*(?:\(([A-J])\)|([A-J])[).:])[ \t]*\S|(?<=\s)\(([A-J])\)[ \t]*\S", re.MULTILINE)
_WRAPPED_LETTER = re.compile(r"^(?:\\(?:text|textbf|mathrm|mathbf)\{)?\(?([A-J])\)?[.:]?\}?$")


def _braced(text: str, start: int) -> str | None:
    """Content of the brace group opening at text[start] == '{', or None if it never closes."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == "\\":  # \{ and \} are literal braces, not grouping
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (nested braces allowed) or \\boxed x; None if absent or unclosed.

    An unclosed last box gives None rather than an earlier box: for gold answers a truncated
    final answer must not silently fall back to an intermediate one.
    """
    if not isinstance(text, str):
        return None
    pos = len(text)
    while True:
        pos = text.rfind("\\boxed", 0, pos)
        if pos < 0:
            return None
        j = pos + len("\\boxed")
        if j < len(text) and text[j].isalpha():  # some other command, e.g. \boxedfoo
            continue
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            inner = _braced(text, j)
            return None if inner is None else inner.strip()
        if j > pos + len("\\boxed"):  # "\boxed 5": one token, up to space or $
            m = re.match(r"[^\s$]+", text[j:])
            return m.group(0) if m else None
        return None


def choice_letter(answer: str) -> str | None:
    """'B', '(B)', 'B.', '\\text{B}' -> 'B'; anything else (option text, two letters) -> None."""
    m = _WRAPPED_LETTER.match(answer.strip())
    return m.group(1) if m else None


def option_letters(question: str) -> set[str]:
    """Letters of the options listed one per line in a question."""
    return {a or b or c for a, b, c in _OPTION.findall(question)}


def require_text(rec: dict, key: str, what: str | None = None) -> str:
    """rec[key] as a stripped, non-empty, UTF-8-encodable str; otherwise SkipRow naming the field."""
    what = what or key
    v = rec.get(key)
    if v is None:
        raise SkipRow(f"missing {what}")
    if not isinstance(v, str):
        raise SkipRow(f"{what} is not a string")
    try:  # lone surrogates (from JSON \\udcxx escapes) would crash hashing and Parquet writes later
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise SkipRow(f"{what} is not valid UTF-8") from None
    if not v.strip():
        raise SkipRow(f"empty {what}")
    return v.strip()
