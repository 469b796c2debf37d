"""Table 4 of the paper as SVEB writes it: estimators as rows, domains as columns, MAE [95% CI] against MCS@n_ref
and the paired verdict against the baseline; and the per-stage timer of a build.

The verdict comes from the per-state difference of squared errors (reference noise cancels in it), a
problem-clustered bootstrap, and Holm's correction over the comparisons of one domain and protocol.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from sveb import scoring

# Build jobs (sveb.shards) -> the stage they are; a nested job call counts in its caller's stage.
STAGE_JOBS = {"rollout_rows": "screening", "finish_rollouts": "rollouts", "reference_shard": "references"}


@contextmanager
def stage_timer(seconds: dict[str, float]):
    """Adds each build stage's wall seconds to `seconds` while the block runs (the jobs of sveb.shards timed
    where the runner calls them; screening covers all G when the filter screens on all of them). Jobs not
    found (renamed) are not timed and get no key."""
    from sveb import shards
    saved = {name: getattr(shards, name) for name in STAGE_JOBS if hasattr(shards, name)}
    depth = [0]

    def timed(fn, stage):
        def run(*args, **kw):
            if depth[0]:
                return fn(*args, **kw)
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                depth[0] -= 1
                seconds[stage] = seconds.get(stage, 0.0) + time.perf_counter() - t0
        return run

    for name, fn in saved.items():
        setattr(shards, name, timed(fn, STAGE_JOBS[name]))
    try:
        yield seconds
    finally:
        for name, fn in saved.items():
            setattr(shards, name, fn)


def holm(p: list[float]) -> list[float]:
    """Holm-adjusted p-values (step-down, monotone, capped at 1)."""
    order = np.argsort(p)
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def paired(est: np.ndarray, base: np.ndarray, ref: np.ndarray, groups: np.ndarray, n_boot: int = 2000,
           seed: int = 0) -> tuple[float, float, float, float]:
    """(mean difference of squared errors est - base, its 95% CI, two-sided bootstrap p) over the same states."""
    d = (est - ref) ** 2 - (base - ref) ** 2
    boots = scoring.bootstrap_means(d, groups, n_boot, seed)
    p = min(1.0, 2 * min(float((boots <= 0).mean()), float((boots >= 0).mean())))
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return float(d.mean()), float(lo), float(hi), p


def verdicts(est: dict[str, np.ndarray], base: str, ref: np.ndarray, groups: np.ndarray, n_boot: int = 2000,
             seed: int = 0, alpha: float = 0.05) -> dict[str, dict]:
    """Each estimator against `base` on one domain and protocol: better / worse / tie, Holm over the table."""
    names = [n for n in est if n != base]
    stats = {n: paired(est[n], est[base], ref, groups, n_boot, seed) for n in names}
    adj = holm([stats[n][3] for n in names])
    out = {}
    for n, p_adj in zip(names, adj):
        delta, lo, hi, _ = stats[n]
        word = "tie" if p_adj >= alpha else ("better" if delta < 0 else "worse")
        out[n] = {"d_sq": delta, "d_lo": lo, "d_hi": hi, "p_holm": p_adj, "verdict": word}
    return out


def cell(row: dict, verdict: dict | None) -> str:
    mark = {"better": " ▲", "worse": " ▼", "tie": " ="}.get((verdict or {}).get("verdict"), "")
    return f"{row['mae']:.3f} [{row['mae_ci_low']:.3f}, {row['mae_ci_high']:.3f}]{mark}"


def markdown(scores: list[dict], verdict: dict, domains: list[str], protocol: str, order: list[str]) -> str:
    """One protocol's table: scores rows (estimator, domain, protocol, mae, ci), verdict[(domain, estimator)]."""
    by = {(r["estimator"], r["domain"]): r for r in scores if r["protocol"] == protocol}
    lines = ["| estimator | " + " | ".join(domains) + " |", "|---|" + "---:|" * len(domains)]
    for name in order:
        cells = [cell(by[(name, d)], verdict.get((d, protocol, name))) if (name, d) in by else "-" for d in domains]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
