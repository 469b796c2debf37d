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
- MCS@20 references; their "noise" rows (k of the same 20 reference draws) are the `mcs-K-ref` rows here, scored
  as their exact expectation over the k-subsets (`subset_errors`), beside SVEB's independent-draw `mcs-K` rows.
Builds carry their protocol in the manifest's config; builds of different protocols never pool.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from typing import Sequence

import numpy as np

from sveb.core.config import CHOICES, PAPER_MAX_TOKENS, BuildConfig
from sveb.core.errors import BuildError
from sveb.estimators import BASELINE

BUILD_PROTOCOLS = ("sveb", "paper")  # BuildConfig.protocol; not the evaluation protocols (sveb.evaluate.protocols)
TIERS = ((0.07, 0.17), (0.17, 0.37), (0.37, 0.77))  # (low, high] screening accuracy, equal problems per tier
# programming adds (0, 0.07] (the authors' code: four tiers of 250 problems there, three of 1,000 elsewhere)
PROGRAMMING_TIERS = ((0.0, 0.07),) + TIERS
SCREEN = 20
MAX_TOKENS = PAPER_MAX_TOKENS  # their max_length
# BuildConfig fields the preset sets (sampling: temperature 0.7, SVEB's default too; max_tokens: MAX_TOKENS on
# `sveb build` unless --max-tokens is given). mc_extra = 4: SVEB's independent MCS@1-4 rows beside theirs.
PRESET = dict(rollouts=32, states_per_problem=1, step_pairs=False, mc=20, mc_extra=4, screen=SCREEN,
              min_acc=TIERS[0][0], max_acc=TIERS[-1][1], protocol="paper")


def tiers_for(domain: str | None) -> tuple[tuple[float, float], ...]:
    """The paper's screening tiers of a domain: equal numbers of problems in each."""
    return PROGRAMMING_TIERS if domain == "programming" else TIERS


def preset_for(domain: str | None) -> dict:
    """PRESET with the domain's accuracy range (programming's lowest tier starts above 0)."""
    tiers = tiers_for(domain)
    return {**PRESET, "min_acc": tiers[0][0], "max_acc": tiers[-1][1]}


REF_KS = (1, 2, 3, 4)  # the authors' noise rows shown (k of the n reference draws)
REF_SUFFIX = "-ref"


def protocol_of(manifest: dict) -> str:
    """A build's protocol; builds made before protocols were recorded are SVEB's. A build of SVEB's protocol with
    some of the paper's choices says which: "sveb+cut=space"."""
    cfg = BuildConfig.from_manifest(manifest)
    return "+".join([cfg.protocol] + [f"{k}={getattr(cfg, k)}" for k in CHOICES if getattr(cfg, k)])


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


# --- their MCS@k "noise" rows: k of the same n reference draws --------------------------------------------------

def subset_errors(rewards: Sequence[float], k: int) -> tuple[float, float]:
    """(E|mean_S - mean|, E(mean_S - mean)^2) over every k-subset S of the n draws, exactly: their `noise_maes`
    draws one subset at random, whose expectation this is. 0/1 rewards: hypergeometric; others: every subset."""
    r = np.asarray(rewards, dtype=float)
    n = len(r)
    if not 1 <= k <= n:
        raise ValueError(f"k={k}: must be in [1, {n}]")
    target = float(r.mean())
    if np.all((r == 0) | (r == 1)):
        m, total = int(r.sum()), math.comb(n, k)
        a = s = 0.0
        for j in range(max(0, k - (n - m)), min(k, m) + 1):
            w = math.comb(m, j) * math.comb(n - m, k - j) / total
            a += w * abs(j / k - target)
            s += w * (j / k - target) ** 2
        return a, s
    if math.comb(n, k) > 2_000_000:
        raise ValueError(f"{math.comb(n, k)} subsets of {n} non-binary rewards: too many to enumerate")
    means = np.array([r[list(c)].mean() for c in itertools.combinations(range(n), k)])
    return float(np.abs(means - target).mean()), float(((means - target) ** 2).mean())


def ref_name(k: int) -> str:
    return f"mcs-{k}{REF_SUFFIX}"


def is_ref_row(name: str) -> bool:
    return name.startswith("mcs-") and name.endswith(REF_SUFFIX)


def _draws(view) -> list[list[float]]:
    """Each state's reference draws, in the view's state order (builds concatenated as in a pooled view)."""
    from sveb.core import schema  # pyarrow
    from sveb import store
    out = []
    for bdir in view.bdirs:
        ids = store.read_table(bdir / "states", schema.STATES).column("state_id").to_pylist()
        refs = store.read_table(bdir / "references", schema.REFERENCES)
        by = dict(zip(refs.column("state_id").to_pylist(), refs.column("mc_rewards").to_pylist()))
        out += [list(by.get(s) or []) for s in ids]
    return out


def ref_rows(view, protocols: Sequence[str], ks: Sequence[int] = REF_KS) -> list[dict]:
    """The authors' MCS@k rows of a paper-protocol view, per protocol present (they read no group, so their errors
    are the same under both; the paired Δ is against that protocol's grpo). Per state, the error is its exact
    expectation over the k-subsets of the reference draws, so the row's MAE is E|mean_k - mean_n| averaged over
    states with no subsampling noise; its CI and tests are every row's (cluster-robust t, clusters by problem). The reference is not
    independent of these estimates (they share draws): that is the authors' definition, shown as such."""
    from sveb.score import scoring  # scipy
    draws = _draws(view)
    if len(draws) != len(view.ref) or not draws or any(not d for d in draws):
        return []  # no stored draws (an imported build): nothing to compute from
    n = min(len(d) for d in draws)
    out = []
    for protocol in protocols:
        base = sorted(k for k in view.est if k[0] == BASELINE and k[2] == protocol)
        b = view.est[base[0]] if base else np.full(len(view.ref), np.nan)
        rows = []
        for k in (k for k in ks if k < n):
            err = np.array([subset_errors(d, k) for d in draws])
            mae, lo, hi = scoring.mean_ci(err[:, 0], view.problem)
            d = err[:, 1] - (b - view.ref) ** 2
            ok = np.isfinite(d)
            delta, dlo, dhi = scoring.mean_ci(d[ok], view.problem[ok])
            rows.append({"model": view.model, "domain": view.domain, "estimator": ref_name(k), "params": "{}",
                         "params_fp": "subsets", "protocol": protocol, "build_fp": view.fp,
                         "n_states": len(err), "n_problems": len(set(view.problem)), "mae": mae, "mae_ci_low": lo,
                         "mae_ci_high": hi, "rmse": float(np.sqrt(err[:, 1].mean())), "bias": 0.0,
                         "bias_ci_low": 0.0, "bias_ci_high": 0.0, "n_builds": len(view.bdirs),
                         "delta_sq": delta, "delta_sq_ci_low": dlo, "delta_sq_ci_high": dhi,
                         "p_delta": scoring.cluster_t_test(d[ok], view.problem[ok]) if ok.any() else float("nan")})
        for r, p in zip(rows, scoring.holm([r["p_delta"] for r in rows])):  # a Holm family of their own
            r["p_holm"] = float(p)
            r["verdict"] = scoring.verdict(r["delta_sq"], p)
        out += rows
    return out
