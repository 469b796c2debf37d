"""The Hista/Numca authors' protocol as their scripts run it (`--preset paper`, issue 31).

SVEB's own protocol ("sveb") departs from theirs where their choice biases the measurement; this one ("paper")
reproduces their `src/sveb/common.py` (VOXXXX1874/Hista), so the two can be compared build for build:
- G = 32 (their `--grpo_num 32`; the paper's tables say @40: their scripts made the tables, so 32 here);
- one state per problem, in the group's first rollout, cut at a uniformly chosen space character: the prefix is
  the text before that space (a response without a space is cut at its end); the choice is seeded from the build
  config, where theirs was unseeded;
- the continuation prompt is the rendered prompt plus the prefix text, re-tokenised, and a continuation gets the
  full max_tokens on top of the prefix (SVEB's: the budget the rollout had left);
- screening on 20 samples of their own, tiers (0.07, 0.17], (0.17, 0.37], (0.37, 0.77] with equal numbers of
  problems each; number domain: >= 4 distinct integers across the union of the correct screening responses (text
  before `\\boxed`), none of them in the question or the solution;
- MCS@20 references; their "noise" rows (k of the same 20 reference draws) are the `mcs-K-ref` rows, scored in
  sveb.score.paper_rows as their exact expectation over the k-subsets, beside SVEB's independent-draw `mcs-K` rows.
Builds carry their protocol in the manifest's config (sveb.core.config.protocol_of); builds of different protocols
never pool.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence

from sveb.core.config import CHOICES, PAPER_MAX_TOKENS
from sveb.core.errors import BuildError
from sveb.data_builders import declared

BUILD_PROTOCOLS = ("sveb", "paper")  # BuildConfig.protocol; not the evaluation protocols (sveb.evaluate.protocols)
TIERS = ((0.07, 0.17), (0.17, 0.37), (0.37, 0.77))  # (low, high] screening accuracy, equal problems per tier
SCREEN = 20
MAX_TOKENS = PAPER_MAX_TOKENS  # their max_length
# BuildConfig fields the preset sets (sampling: temperature 0.7, SVEB's default too; max_tokens: MAX_TOKENS on
# `sveb build` unless --max-tokens is given). mc_extra = 4: SVEB's independent MCS@1-4 rows beside theirs.
PRESET = dict(rollouts=32, states_per_problem=1, step_pairs=False, mc=20, mc_extra=4, screen=SCREEN,
              min_acc=TIERS[0][0], max_acc=TIERS[-1][1], protocol="paper")


def tiers_for(domain: str | None) -> tuple[tuple[float, float], ...]:
    """The paper's screening tiers of a domain: equal numbers of problems in each (its Domain's `paper_tiers`,
    else TIERS; programming adds (0, 0.07])."""
    d = declared().get(domain) if domain else None
    return d.paper_tiers if d is not None and d.paper_tiers else TIERS


def preset_for(domain: str | None) -> dict:
    """PRESET with the domain's accuracy range (programming's lowest tier starts above 0)."""
    tiers = tiers_for(domain)
    return {**PRESET, "min_acc": tiers[0][0], "max_acc": tiers[-1][1]}


def validate(cfg) -> None:
    """The protocol and its choices, each a one-line BuildError naming its flag."""
    if cfg.protocol not in BUILD_PROTOCOLS:
        raise BuildError(f"protocol {cfg.protocol}: must be one of {', '.join(BUILD_PROTOCOLS)}")
    for name, values in CHOICES.items():
        if cfg.choice(name) not in values:
            raise BuildError(f"--{name} {cfg.choice(name)}: must be {' or '.join(values)}")
    who = "the paper's protocol" if cfg.protocol == "paper" else "--cut space"
    if cfg.choice("cut") == "space" and (cfg.states_per_problem != 1 or cfg.step_pairs):
        raise BuildError(f"--states-per-problem {cfg.states_per_problem}: {who} cuts one state per problem, in the "
                         f"group's first rollout (and no --step-pairs)")
    low = tiers_for(cfg.domain)[0]
    if cfg.choice("tiers") == "paper" and cfg.screen >= 1 and 1 / cfg.screen > low[1] + 1e-9:
        raise BuildError(f"--screen {cfg.screen}: the paper's lowest {cfg.domain} tier ({low[0]:g}, {low[1]:g}] needs "
                         f"at least {math.ceil(1 / low[1] - 1e-9)} screens (one correct of --screen must fall in it; "
                         f"the paper's {SCREEN})")
    if cfg.choice("tiers") == "paper" and cfg.screen < 1:
        raise BuildError(f"--screen {cfg.screen}: the paper's protocol screens on {SCREEN} separate samples"
                         if cfg.protocol == "paper" else f"--screen {cfg.screen}: --tiers paper screens on samples "
                         f"of their own (at least 1; the paper's {SCREEN})")


def fp_parts(cfg) -> list:
    """What the paper protocol adds to the rollouts fingerprint (nothing for SVEB's: old builds keep theirs)."""
    if cfg.protocol == "sveb":
        return []
    return [{"protocol": cfg.protocol, "tiers": [list(t) for t in tiers_for(cfg.domain)],
             "number": "union-integers-before-boxed",
             "cut": "space-in-first-rollout", "continuation": "retokenised-full-budget"}]


def choice_parts(cfg, stage: str) -> list:
    """A single choice switched from SVEB's (protocol "sveb"), marked on the first stage it changes: tiers and the
    cut on the states (the screens and the group keep SVEB's seeds, so the two builds share their draws), the
    continuation on the references (the states stay SVEB's too). The paper protocol, every choice its, is marked
    on the rollouts as before (`fp_parts`); a build of SVEB's choices gets no mark."""
    if cfg.protocol == "paper":
        return []
    marks = {"states": {"tiers": {"tiers": [list(t) for t in tiers_for(cfg.domain)],
                                  "number": "union-integers-before-boxed"},
                        "cut": {"cut": "space-in-first-rollout", "prefix": "retokenised-text"}},
             "references": {"continuation": {"continuation": "full-budget"}}}[stage]
    return [mark for k, mark in marks.items() if cfg.choice(k) != CHOICES[k][0]]


# --- screening -----------------------------------------------------------------------------------------------

def tier_of(acc: float, tiers: Sequence[tuple[float, float]] = TIERS) -> int | None:
    """Index of the tier (low, high] holding a screening accuracy, or None."""
    for i, (lo, hi) in enumerate(tiers):
        if lo + 1e-9 < acc <= hi + 1e-9:
            return i
    return None


def quotas(problems: int, n: int = len(TIERS)) -> list[int]:
    """Problems per tier: equal, the first tiers one more when `problems` is not a multiple of the tier count."""
    return [problems // n + (i < problems % n) for i in range(n)]


def shortfall(problems: int, kept_accuracy: Sequence[float], tiers: Sequence[tuple[float, float]] = TIERS) -> str:
    """What a build that kept fewer problems than asked says under the paper's tiers: each short tier, kept of
    its quota (the sparsest tier decides how many candidates the build needs)."""
    kept = [0] * len(tiers)
    for acc in kept_accuracy:
        tier = tier_of(acc, tiers)
        if tier is not None:
            kept[tier] += 1
    short = [f"({lo:g}, {hi:g}] {k} of {q}" for (lo, hi), k, q in zip(tiers, kept, quotas(problems, len(tiers)))
             if k < q]
    return "the paper's tiers ran short (" + "; ".join(short) + ")" if short else ""


def _integers(text: str) -> set[int]:
    """Their `extract_numbers_from_string`: every `\\d+` run (any Unicode decimal digit) as an int; a text with a
    run Python will not convert (over 4,300 digits) gives none at all, as their try/except does."""
    try:
        return {int(x) for x in re.findall(r"\d+", text)}
    except ValueError:
        return set()


def novel_integers(problem: dict, texts: Sequence[str], rewards: Sequence[float]) -> set[int]:
    """Distinct integers across the union of the correct responses (each read up to its first `\\box`, as their
    `resp.split('\\\\box')[0]`), none of them in the question or the solution (the answer, and a worked solution
    where the source keeps one in `meta`)."""
    seen: set[int] = set()
    for text, r in zip(texts, rewards):
        if r > 0:
            seen |= _integers(text.split("\\box")[0])
    return seen - _integers(problem["question"]) - _integers(str(problem["answer"])) - _integers(_solution(problem))


def _solution(problem: dict) -> str:
    meta = problem.get("meta") or "{}"
    try:
        meta = json.loads(meta) if isinstance(meta, str) else meta
    except ValueError:
        return ""
    return str(meta.get("solution", "")) if isinstance(meta, dict) else ""


def passes(cfg, problem: dict, texts: Sequence[str], rewards: Sequence[float], min_novel: int
           ) -> tuple[bool, float | None]:
    """(kept, screening accuracy); a problem with no screening rows is skipped, as theirs are (accuracy None)."""
    if not len(rewards):
        return False, None
    acc = sum(rewards) / len(rewards)
    ok = tier_of(acc, tiers_for(getattr(cfg, "domain", None))) is not None
    if ok and min_novel:
        ok = len(novel_integers(problem, texts, rewards)) >= min_novel
    return ok, acc


# --- the cut ---------------------------------------------------------------------------------------------------

def space_cut(text: str, rng: random.Random) -> int:
    """Their cut: a uniformly chosen index of a space character (the prefix is text[:index]); len(text) if none."""
    spaces = [i for i, c in enumerate(text) if c == " "]
    return rng.choice(spaces) if spaces else len(text)


def token_cut(tokenizer, ids: Sequence[int], text: str, pos: int) -> int:
    """The rollout's response tokens wholly inside text[:pos] (the most t with decode(ids[:t]) a prefix of it): the
    state's t, for the estimators that read tokens or hidden states. Binary search on the decoded text with its
    trailing U+FFFD dropped (a byte-level token that ends inside a character decodes to one, which is no prefix
    although later tokens are), then back down to the last t whose whole decoding is a prefix."""
    head = text[:pos]
    decode = lambda t: tokenizer.decode(list(ids[:t]))  # noqa: E731
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if head.startswith(decode(mid).rstrip("\ufffd")):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not head.startswith(decode(lo)):
        lo -= 1
    return lo


def continuation_prompt(tokenizer, messages: list[dict], prefix_text: str) -> list[int]:
    """The rendered prompt plus the prefix text, re-tokenised (their `render_prompt(...) + response[:position]`)."""
    return list(tokenizer.encode(tokenizer.render_chat(messages) + prefix_text))
