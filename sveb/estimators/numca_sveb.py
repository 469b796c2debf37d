r"""`numca-sveb`: SVEB's earlier reading of Numca (paper Sec. 5.1, Algorithm 1), kept as a named preset.

The authors' own algorithm is `sveb.estimators.numca` (the `numca` default); this module is what SVEB
measured as `numca` before 2026-11-25.

The abstract state of a prefix is the set of normalised numbers it contains; its value is the
mean final reward of the group's rollouts that passed through that set (each rollout counted once
per set). Numbers: integers, decimals, a/b and \frac{a}{b}, optional sign; "1,000" -> "1000",
"3.50" -> "3.5", "-0" -> "0", integer fractions reduced ("6/8" -> "3/4", "4/2" -> "2").
A number touching the end of a prefix, or followed by an open tail ("3/", "1,0", "\frac{1}{"), is
left out: it may be cut. Rollouts are walked character by character (no tokenizer is needed), a
superset of the token-level walk: a cut such as "12." of "12.5" adds a transient set {.., 12}.
Unseen sets fall back to the latest set along the prefix's own walk that was seen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean

_SIGN = r"(?:(?<![\w)\]}])[-+\u2212])?"  # a sign only where it cannot be a binary operator
_NUM = r"(?:\d{1,3}(?:(?:,|\{,\})\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_PLAIN = r"(?<![\d.])" + _NUM
NUMBER = re.compile(
    r"(?P<frac>" + _SIGN + r"\\[dt]?frac\{\s*(?P<fn>[-+\u2212]?" + _NUM + r")\s*\}\{\s*(?P<fd>[-+\u2212]?"
    + _NUM + r")\s*\})"
    r"|(?P<sign>" + _SIGN + r")(?P<a>" + _PLAIN + r")(?:/(?P<b>" + _NUM + r"))?"
)
# Tails that may still grow into a longer number: an open \frac, "1,0" (thousands), "3/" (fraction).
_OPEN_TAIL = re.compile(r"(?:\\[dt]?frac\{[^{}]*(?:\}\{[^{}]*)?|(?<=\d)(?:,|\{,\})\d{0,2}|(?<=\d)/)$")
_TAIL_WINDOW = 120


def _norm_decimal(s: str) -> tuple[bool, str]:
    """'-003.50' -> (True, '3.5'); the sign is returned separately."""
    s = s.replace("{,}", "").replace(",", "")
    neg = s[:1] in ("-", "\u2212")
    s = s.lstrip("+-\u2212")
    whole, _, frac = s.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return neg, whole + ("." + frac if frac else "")


def _signed(neg: bool, body: str) -> str:
    return "-" + body if neg and body.strip("0.") else body  # "-0" is "0"


def _fraction(neg: bool, num: str, den: str) -> str:
    nneg, n = _norm_decimal(num)
    dneg, d = _norm_decimal(den)
    neg ^= nneg ^ dneg
    if "." not in n and "." not in d and d != "0":
        f = Fraction(int(n), int(d))  # 6/8 and 3/4 are one milestone; 4/2 is 2
        body = str(abs(f))
        return _signed(neg and f != 0, body)
    return _signed(neg, f"{n}/{d}")


@lru_cache(maxsize=65536)
def norm_text(matched: str) -> str:
    return _normalise(NUMBER.fullmatch(matched))


def _normalise(m: re.Match) -> str:
    if m.group("frac"):
        return _fraction(m.group("frac")[:1] in ("-", "\u2212"), m.group("fn"), m.group("fd"))
    neg = m.group("sign") in ("-", "\u2212")
    if m.group("b") is not None:
        return _fraction(neg, m.group("a"), m.group("b"))
    return _signed(neg, _norm_decimal(m.group("a"))[1])


def _cut(text: str, end: int) -> int:
    """Where the text effectively ends: before an open tail that may still grow into a number."""
    tail = _OPEN_TAIL.search(text, max(0, end - _TAIL_WINDOW), end)
    return tail.start() if tail else end


def _scan(text: str, start: int, end: int) -> set[str]:
    """Numbers matched in text[start:end] (regex endpos acts as the end of the string)."""
    return {norm_text(m.group()) for m in NUMBER.finditer(text, start, end)
            if not (m.end() == end and text[end - 1].isdigit())}  # touching the cut: maybe partial


def milestones_upto(text: str, end: int) -> frozenset[str]:
    """milestones(text[:end]) without slicing."""
    return frozenset(_scan(text, 0, _cut(text, end)))


def milestones(text: str) -> frozenset[str]:
    """Normalised numbers of a prefix; a number touching the end (possibly cut) is left out."""
    return milestones_upto(text, len(text))


_NUMERIC_CHARS = set("0123456789.,/{}")


def _change_points(text: str) -> list[int]:
    """Prefix lengths where the milestone set can change: at or just after a numeric character."""
    pts = {len(text)}
    for i, c in enumerate(text):
        if c in _NUMERIC_CHARS:
            pts.add(i + 1)
            pts.add(min(i + 2, len(text)))
    return sorted(pts)


_SETTLED = 48  # a match ending this far before the cut is matched the same in every longer prefix


@lru_cache(maxsize=4096)
def abstract_path(text: str) -> tuple[frozenset[str], ...]:
    """The sequence of distinct consecutive abstract states along a text, starting at the empty set.

    Equal to milestones(text[:p]) over every p, but incremental: numbers far before the cut
    come from one full scan, only the last stretch is rescanned.
    """
    full = list(NUMBER.finditer(text))
    path = [frozenset()]
    settled: set[str] = set()
    nxt = q = 0
    for p in _change_points(text):
        end = _cut(text, p)
        if end - _SETTLED < q:  # the cut moved back (an open \frac): restart the settled part
            settled, nxt, q = set(), 0, 0
        while nxt < len(full) and full[nxt].end() <= end - _SETTLED:
            settled.add(norm_text(full[nxt].group()))
            q = full[nxt].end()
            nxt += 1
        s = frozenset(settled | _scan(text, q, end))
        if s != path[-1]:
            path.append(s)
    return tuple(path)


def build_table(texts: Sequence[str], rewards: Sequence[float]) -> dict[frozenset[str], float]:
    """Algorithm 1: each rollout counts once per abstract state it passes through."""
    sums: dict[frozenset[str], list[float]] = {}
    for text, r in zip(texts, rewards):
        for s in set(abstract_path(text)):
            acc = sums.setdefault(s, [0, 0.0])
            acc[0] += 1
            acc[1] += r
    return {s: tot / n for s, (n, tot) in sums.items()}


def lookup(table: dict[frozenset[str], float], prefix: str, default: float) -> float:
    """Value of the prefix's abstract state; unseen -> its latest earlier abstract state that was seen."""
    state = milestones(prefix)
    if state in table:
        return table[state]
    for s in reversed(abstract_path(prefix)):
        if s in table:
            return table[s]
    return default


@dataclass
class NumcaSVEB(Estimator):
    description = ("SVEB's earlier Numca variant: normalised numbers (ints, decimals, fractions), the value of the "
                   "prefix's set, unseen sets fall back to the latest seen")

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        table = build_table([r.response_text for r in group.rollouts], list(group.rewards))
        default = group_mean(group)
        return np.array([lookup(table, s.prefix_text, default) for s in states], dtype=np.float64)
