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
from sveb.report_format import md_table

# Build jobs (sveb.build_jobs) -> the stage they are; a nested job call counts in its caller's stage.
STAGE_JOBS = {"screen_shard": "screening", "group_shard": "rollouts", "reference_shard": "references"}


@contextmanager
def stage_timer(seconds: dict[str, float]):
    """Adds each build stage's wall seconds to `seconds` while the block runs (the jobs of sveb.build_jobs timed
    where the runner calls them). Jobs not found (renamed) are not timed and get no key."""
    from sveb import build_jobs
    saved = {name: getattr(build_jobs, name) for name in STAGE_JOBS if hasattr(build_jobs, name)}
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
        setattr(build_jobs, name, timed(fn, STAGE_JOBS[name]))
    try:
        yield seconds
    finally:
        for name, fn in saved.items():
            setattr(build_jobs, name, fn)


def verdicts(est: dict[str, np.ndarray], base: str, ref: np.ndarray, groups: np.ndarray, n_boot: int = 2000,
             seed: int = 0) -> dict[str, dict]:
    """Each estimator against `base` on one domain and protocol, with the leaderboard's method (sveb.scoring):
    paired Δ of squared error, cluster-robust t-test, better / worse / no difference after Holm over the table's
    estimators; the MCS@k scale rows are a Holm family of their own, as on the leaderboard (sveb.pooling)."""
    from sveb.pooling import family
    names = [n for n in est if n != base]
    stats = {n: scoring.paired_sq_diff(est[n], est[base], ref, groups, n_boot, seed) for n in names}
    out = {}
    for fam_name in ("main", "scale", "variant"):  # default settings only here: no training-seed replicates
        fam = [n for n in names if family((n, "")) == fam_name]
        for n, p in zip(fam, scoring.holm([stats[n]["p_delta"] for n in fam])):
            out[n] = {"d_sq": stats[n]["delta_sq"], "d_lo": stats[n]["delta_sq_ci_low"],
                      "d_hi": stats[n]["delta_sq_ci_high"], "p_holm": float(p),
                      "verdict": scoring.verdict(stats[n]["delta_sq"], p)}
    return out


def cell(row: dict, verdict: dict | None) -> str:
    mark = {"better": " ▲", "worse": " ▼", "no difference": " ="}.get((verdict or {}).get("verdict"), "")
    return f"{row['mae']:.3f} [{row['mae_ci_low']:.3f}, {row['mae_ci_high']:.3f}]{mark}"


def markdown(scores: list[dict], verdict: dict, domains: list[str], protocol: str, order: list[str]) -> str:
    """One protocol's table: scores rows (estimator, domain, protocol, mae, ci), verdict[(domain, estimator)]."""
    by = {(r["estimator"], r["domain"]): r for r in scores if r["protocol"] == protocol}
    return md_table(["estimator", *domains],
                    [[name, *(cell(by[(name, d)], verdict.get((d, protocol, name))) if (name, d) in by else "-"
                              for d in domains)] for name in order])


def cost_markdown(timing: dict[str, dict[str, float]], states: dict[str, int], domains: list[str]) -> str:
    """Seconds per state of each stage (rows) in each domain (columns); '-' where a domain has no record of it.
    Stages keep their first-seen order: the build's, then the hidden pass, then the estimators'."""
    stages = sorted(dict.fromkeys(k for d in domains for k in timing.get(d, {})),
                    key=lambda k: (k.startswith("eval "), k.startswith("hidden")))
    return md_table(["stage", *domains],
                    [[k, *(f"{timing[d][k] / states[d]:.3f}" if k in timing.get(d, {}) and states.get(d) else "-"
                           for d in domains)] for k in stages])
