"""The Hista/Numca authors' "generated SVEB JSON" (github.com/VOXXXX1874/Hista, src/sveb/common.py `make_result`), both
ways: records <-> SVEB tables. Pure: reading and writing files is sveb.store.hista_io's.

A record is one state: {problem, solution, verifier, correct_responses, wrong_responses, response (the rollout the
state is cut from), sampled_response (= response[:position], a prefix in characters), output_reward,
unbiased_state_value (mean of the continuation rewards), unbiased_state_value_noise (for k = 1..n: |target - mean of
k random draws|, not the draws)}.

Import: one problem per distinct `problem` string; its group as the authors' `build_offline_pools` makes it:
correct_responses (reward 1) + wrong_responses (reward 0) of its first record, then each record's `response` not yet
in the pool (reward 1 if output_reward > 0.5). One state per record, on the pool entry equal to its response,
t = len(sampled_response) characters (no tokenizer: no token ids are stored), reference value unbiased_state_value
with n = len(unbiased_state_value_noise) (their mcs_num), 20 where the list is empty; the draws are unknown.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from sveb.core.errors import SvebError
from sveb.data_builders import declared, make_problem, problem_id
from sveb.data_builders.hista import fields

FORMAT = "hista-json"
KEYS = ("problem", "solution", "verifier", "correct_responses", "wrong_responses", "response", "sampled_response",
        "output_reward", "unbiased_state_value", "unbiased_state_value_noise")
DEFAULT_N_REF = 20  # the authors' --mcs_num
T_UNIT = "characters"
# Which estimators an imported build refuses is read from their declared capabilities (refusal), never a name list.
TOKEN_LEVEL = "the estimators that read token ids or hidden states or train on them (`sveb ls estimators`)"
UNAVAILABLE = f"unavailable for an imported {FORMAT} build"
# The file's unbiased_state_value_noise per state, kept beside the tables so that an export gives it back.
NOISE_TABLE = "hista_noise"


class HistaJsonError(SvebError, ValueError):
    pass


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer past a float's range, e.g. 1e400 written out in digits
        return False


def _shown(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 24 else f"{s[:12]}... ({len(s)} digits)"


def _encodable(v: Any) -> bool:
    """Whether a string (or each of a list's) is Unicode text UTF-8 can write: JSON lets a lone surrogate through
    as an escape (\\ud800), which no file or table can hold."""
    try:
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, str):
                x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_record(i: int, rec: Any) -> None:
    """One-line error naming the record (0-based index in the list) and the field, or nothing."""
    def bad(key: str, why: str):
        raise HistaJsonError(f"record {i}: field '{key}': {why}")
    if not isinstance(rec, dict):
        raise HistaJsonError(f"record {i}: not a JSON object")
    for key in KEYS:
        if key not in rec:
            bad(key, "missing")
    for key in ("problem", "solution", "response", "sampled_response"):
        if not isinstance(rec[key], str):
            bad(key, f"expected a string, got {type(rec[key]).__name__}")
    if rec["verifier"] is not None and not isinstance(rec["verifier"], str):
        bad("verifier", f"expected a string or null, got {type(rec['verifier']).__name__}")
    for key in ("correct_responses", "wrong_responses"):
        if not _str_list(rec[key]):
            bad(key, "expected a list of strings")
    for key in ("problem", "solution", "verifier", "response", "sampled_response", "correct_responses",
                "wrong_responses"):
        if not _encodable(rec[key]):
            bad(key, "not valid Unicode text (a lone surrogate escape such as \\ud800)")
    for key in ("output_reward", "unbiased_state_value"):
        if not _is_num(rec[key]):
            bad(key, f"expected a number, got {type(rec[key]).__name__}")
        if not _finite(rec[key]):
            bad(key, f"not a finite number ({_shown(rec[key])})")
    if not 0.0 <= rec["unbiased_state_value"] <= 1.0:
        bad("unbiased_state_value", f"{rec['unbiased_state_value']} is not in [0, 1]")
    noise = rec["unbiased_state_value_noise"]
    if not isinstance(noise, list) or not all(_is_num(x) for x in noise):
        bad("unbiased_state_value_noise", "expected a list of numbers")
    if not all(_finite(x) for x in noise):
        bad("unbiased_state_value_noise", "holds a non-finite number")
    if not rec["response"].startswith(rec["sampled_response"]):
        bad("sampled_response", "not a prefix of 'response'")


def check_records(doc: Any) -> list[dict]:
    if not isinstance(doc, list):
        raise HistaJsonError(f"expected a JSON list of records, got a JSON {type(doc).__name__}")
    if not doc:
        raise HistaJsonError("no records")
    for i, rec in enumerate(doc):
        check_record(i, rec)
    return doc


def to_tables(records: list[dict], domain: str) -> tuple[dict[str, list[dict]], dict]:
    """(rows of problems, rollouts, states, references; a summary for the manifest) of checked records."""
    pids: dict[str, str] = {}       # problem string -> problem id
    pools: dict[str, list[list]] = {}  # problem id -> [[text, reward], ...]
    problems, states, refs = [], [], []
    seen_ids: set[str] = set()
    noise_rows, noise_table = [], []
    for i, rec in enumerate(records):
        text = rec["problem"]
        if text not in pids:
            pid = problem_id(domain, text)
            if pid in pools:  # two strings the normalisation makes one: the authors keep them apart, so do we
                pid = problem_id(domain, f"{text}\x00{i}")
            pids[text] = pid
            f = fields(rec, strict=False)
            problems.append(make_problem(domain, FORMAT, text, f["answer"], f["answer_type"], f["tests"],
                                         {**f["meta"], "record": i}))
            pools[pid] = [[r, 1.0] for r in rec["correct_responses"]] + [[r, 0.0] for r in rec["wrong_responses"]]
        pid = pids[text]
        texts = [r for r, _ in pools[pid]]
        if rec["response"] not in texts:
            pools[pid].append([rec["response"], 1.0 if rec["output_reward"] > 0.5 else 0.0])
            texts.append(rec["response"])
        own, t = texts.index(rec["response"]), len(rec["sampled_response"])
        sid = f"{pid}-{own}-{t}"
        if sid in seen_ids:  # the same cut of the same rollout twice: two measurements, two states
            sid = f"{sid}-r{i}"
        seen_ids.add(sid)
        states.append({"state_id": sid, "problem_id": pid, "rollout_idx": own, "t": t, "T": len(rec["response"]),
                       "prefix_text": rec["sampled_response"]})
        noise = rec["unbiased_state_value_noise"]
        refs.append({"state_id": sid, "mc_rewards": [], "value": float(rec["unbiased_state_value"]),
                     "n_ref": len(noise) or DEFAULT_N_REF, "extra_rewards": [], "finish_reasons": []})
        noise_rows.append(noise)
        noise_table.append({"state_id": sid, "noise": [float(x) for x in noise]})
    rollouts = [{"problem_id": pid, "rollout_idx": j, "prompt_token_ids": [], "response_token_ids": [],
                 "response_text": r, "reward": w, "finish_reason": "unknown", "seed": -1}
                for pid, pool in pools.items() for j, (r, w) in enumerate(pool)]
    sizes = sorted({len(p) for p in pools.values()})
    width = max((len(n) for n in noise_rows), default=0)
    noise_by_k = [_mean([n[k] for n in noise_rows if k < len(n)]) for k in range(width)]
    summary = {"n_problems": len(problems), "n_states": len(states), "group_sizes": sizes,
               "n_ref": sorted({r["n_ref"] for r in refs}), "reference_noise_mae_by_k": noise_by_k,
               "rollout_accuracy": _mean([w for pool in pools.values() for _, w in pool])}
    return {"problems": problems, "rollouts": rollouts, "states": states, "references": refs,
            NOISE_TABLE: noise_table}, summary


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def noise_maes(rewards: list[float], rng: random.Random) -> list[float]:
    """For k = 1..n: |mean of the n draws - mean of k of them drawn without replacement| (the authors' noise_maes)."""
    target = sum(rewards) / len(rewards)
    return [abs(target - sum(rng.sample(rewards, k)) / k) for k in range(1, len(rewards) + 1)]


def verifier_of(problem: dict) -> str | None:
    """A problem's verifier: the one it came with (an import or a hista-json source), else its domain's."""
    meta = json.loads(problem["meta"] or "{}") if isinstance(problem["meta"], str) else problem["meta"] or {}
    if "verifier" in meta:
        return meta["verifier"]
    return declared()[problem["domain"]].verifier if problem["domain"] in declared() else "default"


def solution_of(problem: dict) -> str:
    """The gold as the authors store it: the answer, or a code problem's test cases as JSON text."""
    if problem["answer_type"] == "code" and not problem["answer"]:
        return problem["tests"] or "[]"
    return problem["answer"]


def common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def from_tables(problems: dict[str, dict], rollouts: dict[str, list[dict]], states: list[dict],
                references: dict[str, dict], noise: dict[str, list[float]] | None = None) -> tuple[list[dict], int]:
    """One record per state (rollouts grouped by problem, in rollout_idx order); also how many states' prefix text
    was not a prefix of their rollout's text (a cut inside a character: cut back to the common prefix). The noise
    MAEs come from the reference draws, else from `noise` (an imported file's own), else []."""
    out, recut = [], 0
    for s in states:
        p, ref = problems[s["problem_id"]], references[s["state_id"]]
        rolls = rollouts[s["problem_id"]]
        own = next(r for r in rolls if r["rollout_idx"] == s["rollout_idx"])
        prefix = s["prefix_text"]
        if not own["response_text"].startswith(prefix):
            prefix, recut = common_prefix(prefix, own["response_text"]), recut + 1
        draws = [float(x) for x in ref["mc_rewards"][: ref["n_ref"]]]
        out.append({
            "problem": p["question"], "solution": solution_of(p), "verifier": verifier_of(p),
            "correct_responses": [r["response_text"] for r in rolls if r["reward"] > 0],
            "wrong_responses": [r["response_text"] for r in rolls if not r["reward"] > 0],
            "response": own["response_text"], "sampled_response": prefix, "output_reward": float(own["reward"]),
            "unbiased_state_value": float(ref["value"]),
            "unbiased_state_value_noise": noise_maes(draws, random.Random(s["state_id"])) if draws
            else list((noise or {}).get(s["state_id"], []))})
    return out, recut


def refusal(name: str, manifest: dict, caps) -> str | None:
    """Why estimator `name` cannot run on this build (an imported hista-json one), in one line; None if it can.
    `caps`: its declared capabilities (a registry entry, or a dict; sveb.estimators.base.Estimator): one that reads
    the reference draws (MCS@k) needs draws the file does not hold; one that reads token ids (hidden states,
    log-probs, training on them) needs the token ids it does not hold either."""
    if manifest.get("export", {}).get("format") != FORMAT:
        return None
    has = caps.get if isinstance(caps, dict) else (lambda k: getattr(caps, k, None))
    if has("reads_references"):
        return f"{name}: {UNAVAILABLE} (its reference draws are unknown: the file holds their mean only)"
    if has("reads_tokens") or has("needs_hidden") or has("needs_training"):
        return (f"{name}: {UNAVAILABLE} (it reads token ids or hidden states; the file has text only, "
                f"and t counts characters)")
    return None
