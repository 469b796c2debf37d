"""A build's tables checked against each other before any estimator reads them: an export edited by hand (its
card's hashes recomputed to match) can be self-consistent and still wrong. Each problem, state, rollout and
reference is one row; states point at a rollout of their problem and cut it inside its length. One line names
the first row that breaks this; without it, a duplicated state or rollout is scored twice (or skews a group mean)
and an unknown id ends in a traceback after scores are half written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sveb.core.errors import EvalError


def _dup(ids) -> str | None:
    seen = Counter(ids)
    return next((k for k, n in seen.items() if n > 1), None)


def check_structure(bdir: Path, problems: list[dict], states: list[dict], rollouts: dict[str, list[dict]],
                    refs: list[dict] | None) -> None:
    """Refuse (EvalError, one line) a build whose tables disagree; refs None: a train build read without them."""
    def refuse(what: str):
        raise EvalError(f"{bdir}: {what}; refused (an edited or damaged export: restore it, or rebuild)")
    if not problems:
        refuse("the problems table is empty")
    pid = _dup(p["problem_id"] for p in problems)
    if pid is not None:
        refuse(f"problem {pid} appears twice in problems")
    if refs is not None and not states:
        refuse("the states table is empty")
    sid = _dup(s["state_id"] for s in states)
    if sid is not None:
        refuse(f"state {sid} appears twice in states")
    by_idx: dict[str, dict[int, dict]] = {}
    for p, rows in rollouts.items():
        idx = _dup(r["rollout_idx"] for r in rows)
        if idx is not None:
            refuse(f"rollout {idx} of problem {p} appears twice in rollouts")
        by_idx[p] = {r["rollout_idx"]: r for r in rows}
    known = {p["problem_id"] for p in problems}
    for s in states:
        if s["problem_id"] not in known:
            refuse(f"state {s['state_id']} names problem {s['problem_id']}, which the problems table lacks")
        r = by_idx.get(s["problem_id"], {}).get(s["rollout_idx"])
        if r is None:
            refuse(f"state {s['state_id']} names rollout {s['rollout_idx']} of problem {s['problem_id']}, "
                   "which the rollouts table lacks")
        # a build imported from the authors' files has no token ids: its t and T count characters
        ids = r["response_token_ids"] or []
        n, unit = (len(ids), "tokens") if ids else (len(r["response_text"] or ""), "characters")
        if s["T"] != n or not 0 <= s["t"] <= n:
            refuse(f"state {s['state_id']} cuts at t {s['t']} of T {s['T']}, but its rollout has {n} response "
                   f"{unit} (need 0 <= t <= T = that length)")
    if refs is not None:
        sid = _dup(r["state_id"] for r in refs)
        if sid is not None:
            refuse(f"state {sid} has two rows in references")
        ids = {s["state_id"] for s in states}
        extra = next((r["state_id"] for r in refs if r["state_id"] not in ids), None)
        if extra is not None:
            refuse(f"references hold state {extra}, which the states table lacks")
