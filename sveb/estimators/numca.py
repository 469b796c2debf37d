r"""Numca as its authors compute it (Hista/Numca paper Sec. 5.1; their code VOXXXX1874/Hista @ 6f4ae4e,
src/rl/utils/numca_dict.py and the in-group loop of src/sveb/numca/evaluate_sta_estim_from_existing.py).

Every rule is a parameter whose default is the authors' choice (docs/estimators.md, "Numca"):
- `numbers`: "digits" = maximal runs of Python's `\d` in the raw str (any Unicode decimal digit; "3.5" is
  "3" and "5", "05" is not "5"); "normalised" = SVEB's integers, decimals and fractions, normalised.
- `drop_last`: the last number of every response is not used.
- `merge`: a number's start moves to the next number's start when that starts fewer than `merge` characters
  later, cascading backwards (0: off). A number counts at a cut when its moved start is at or before the cut.
- The abstract state is the set of distinct numbers so far; each response adds count 1 and its reward once
  to every set it passes through (`binarize`: reward > 0 is 1). V(set) = reward sum / count.
- `unseen`: "zero" = a set no response reached is worth 0.0; "latest" = the latest seen set along the path.
- `read`: "advantages" = V(root) + the advantages V(next) - V(set) of the segments ending at or before the
  cut, a segment skipped when its advantage equals the next one's within 1e-6, a number at character 0
  adding no segment, and (in-group) the segment after the last number worth final reward - V(set) once
  the cut reaches the response's end; "table" = V(set at the cut).
- `clip`: the advantage read-out can leave [0, 1] (a skipped or silent step: 7 of the 1,108 public conformance
  cases); SVEB's evaluator takes probabilities, so values are clipped to [0, 1] (off for conformance).

Protocols. In-group (the paper's) the state's own response is in the table and its full text is read.
Held-out the estimate gets the group without the own rollout and the prefix only: the own numbers are those
of the prefix (a digit run touching the cut may be cut, so it is left out; the prefix's last number is kept,
as it need not be the response's last), merged among themselves (a start may not move to a number past the
cut: unknown), and there is no final segment (no own reward).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sveb.core.errors import UsageError
from sveb.estimators.base import Estimator, ProblemGroup, State
from sveb.estimators.numca_sveb import NUMBER, milestones, norm_text

DIGITS = re.compile(r"\d+")
EQUAL = 1e-6          # the authors' "only add when there is a change"


def parse(text: str, numbers: str = "digits", drop_last: bool = True) -> tuple[list[str], list[int]]:
    """(numbers, start positions) of a text; the last one dropped when `drop_last` (the authors' number_parse)."""
    if numbers == "digits":
        found = [(m.group(0), m.start()) for m in DIGITS.finditer(text)]
    elif numbers == "normalised":
        found = [(norm_text(m.group(0)), m.start()) for m in NUMBER.finditer(text)]
    else:
        raise UsageError(f"numca: numbers must be 'digits' or 'normalised', got {numbers!r}")
    if drop_last:
        found = found[:-1]
    return [n for n, _ in found], [p for _, p in found]


def merge_positions(positions: Sequence[int], threshold: int = 50) -> list[int]:
    """A start moves to the next start when that is fewer than `threshold` characters later (backwards)."""
    out = list(positions)
    for i in range(len(out) - 2, -1, -1):
        if out[i + 1] - out[i] < threshold:
            out[i] = out[i + 1]
    return out


def set_path(numbers: Sequence[str]) -> list[frozenset[str]]:
    """The sets a response passes through: the empty set, then one more distinct number at a time."""
    seen: set[str] = set()
    path = [frozenset()]
    for n in numbers:
        if n not in seen:
            seen.add(n)
            path.append(frozenset(seen))
    return path


def build_table(number_lists: Sequence[Sequence[str]],
                rewards: Sequence[float]) -> dict[frozenset[str], tuple[float, float]]:
    """{set: (count, reward sum)}: each response counted once per set it passes through."""
    table: dict[frozenset[str], tuple[float, float]] = {}
    for nums, r in zip(number_lists, rewards):
        for s in set_path(nums):
            c, tot = table.get(s, (0.0, 0.0))
            table[s] = (c + 1.0, tot + float(r))
    return table


def table_value(table: dict, s: frozenset) -> float | None:
    """V(set), None when no response reached it."""
    hit = table.get(s)
    return None if not hit or hit[0] == 0 else hit[1] / hit[0]


def grouped_states(numbers: Sequence[str], positions: Sequence[int]) -> list[tuple[int, frozenset[str]]]:
    """(moved start, the set once that number is seen) for each new distinct number; equal starts collapse."""
    out: list[tuple[int, frozenset[str]]] = []
    seen: set[str] = set()
    for n, p in zip(numbers, positions):
        if n in seen:
            continue
        seen.add(n)
        nxt = frozenset(seen)
        if out and out[-1][0] == p:
            out[-1] = (p, nxt)
        else:
            out.append((p, nxt))
    return out


def advantage_read(value: Callable[[frozenset], float], states: list[tuple[int, frozenset[str]]], length: int,
                   cut: int, final_reward: float | None) -> float:
    """The authors' read-out: V(root) + the per-character advantages summed up to the cut, an advantage added
    only where it differs from the next character's by more than 1e-6 (once per segment, at its last character)."""
    segs: list[tuple[int, float]] = []          # (end, advantage) of consecutive segments from 0
    cur, last = frozenset(), 0
    for pos, nxt in states:
        pos = max(0, min(pos, length))
        if pos > last:
            segs.append((pos, value(nxt) - value(cur)))
            last = pos
        cur = nxt
    if length > last:
        # in-group: the segment after the last number; held-out: the unknown rest, worth nothing
        segs.append((length, 0.0 if final_reward is None else float(final_reward) - value(cur)))
    total = value(frozenset())
    if not segs or cut <= 0:
        return total
    for j, (end, adv) in enumerate(segs):
        if end - 1 >= cut:                      # its last character is not before the cut
            break
        if end >= length:                       # the loop's end: the last character's advantage, always added
            return total + adv
        if abs(adv - segs[j + 1][1]) > EQUAL:
            total += adv
    return total


@dataclass
class Numca(Estimator):
    """The authors' Numca; each field is one rule (module docstring), defaults theirs. `numca-sveb` is SVEB's
    earlier variant (sveb.estimators.numca_sveb)."""
    description = ("Numca as its authors' code computes it: the value of the prefix's set of digit runs, read as "
                   "the root value plus the segment advantages (VOXXXX1874/Hista numca_dict)")
    grid = {"numbers": ["digits", "normalised"], "drop_last": ["true", "false"], "merge": ["50", "0"],
            "unseen": ["zero", "latest"], "read": ["advantages", "table"]}

    numbers: str = "digits"
    drop_last: bool = True
    merge: int = 50
    unseen: str = "zero"
    read: str = "advantages"
    binarize: bool = True
    clip: bool = True       # the read-out can leave [0, 1] (skipped advantages); the evaluator needs [0, 1]

    def __post_init__(self) -> None:
        for key, allowed in (("numbers", ("digits", "normalised")), ("unseen", ("zero", "latest")),
                             ("read", ("advantages", "table"))):
            if getattr(self, key) not in allowed:
                raise UsageError(f"numca: -P {key}={getattr(self, key)}: must be one of {', '.join(allowed)}")
        if self.merge < 0:
            raise UsageError(f"numca: -P merge={self.merge}: must be >= 0 (0: no merging)")

    def _reward(self, r: float) -> float:
        return (1.0 if r > 0 else 0.0) if self.binarize else float(r)

    def value_of(self, table: dict, own_text: str, cut: int, final_reward: float | None) -> float:
        """One state's value: `own_text` is the whole own response in-group (final_reward known), the prefix
        held-out (final_reward None)."""
        held_out = final_reward is None
        nums, pos = parse(own_text, self.numbers, self.drop_last and not held_out)
        if held_out and nums and self.numbers == "digits" and pos[-1] + len(nums[-1]) >= len(own_text):
            nums, pos = nums[:-1], pos[:-1]     # touches the cut: may be the start of a longer number
        if held_out and self.numbers == "normalised":
            keep = milestones(own_text)         # SVEB's rule for a number that may be cut
            pairs = [(n, p) for n, p in zip(nums, pos) if n in keep]
            nums, pos = [n for n, _ in pairs], [p for _, p in pairs]
        if self.merge:
            pos = merge_positions(pos, self.merge)
        states = grouped_states(nums, pos)
        root = table_value(table, frozenset())
        path = {frozenset(): 0.0 if root is None else root}   # an empty table: the authors' 0.0
        last = path[frozenset()]
        for _, s in states:                     # the path's values in order, for unseen = latest
            v = table_value(table, s)
            last = path[s] = v if v is not None else (last if self.unseen == "latest" else 0.0)
        value = path.__getitem__
        if self.read == "table":
            at = [s for p, s in states if p <= cut]
            return value(at[-1] if at else frozenset())
        length = len(own_text) if not held_out else cut + 1
        return advantage_read(value, states, length, cut, final_reward)

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        members = {r.rollout_idx for r in group.rollouts}
        table = build_table([parse(r.response_text, self.numbers, self.drop_last)[0] for r in group.rollouts],
                            [self._reward(r.reward) for r in group.rollouts])
        out = np.empty(len(states))
        for i, s in enumerate(states):
            own = group.rollout(s.rollout_idx)
            if s.rollout_idx in members:        # in-group: the authors' protocol
                out[i] = self.value_of(table, own.response_text, len(s.prefix_text), self._reward(own.reward))
            else:                               # held-out: the prefix only
                out[i] = self.value_of(table, s.prefix_text, len(s.prefix_text), None)
        return np.clip(out, 0.0, 1.0) if self.clip else out
