"""How estimators follow a policy that moved (issue 59). Two builds hold the same states (`sveb rereference`): per
state ΔV = V_new − V_old from their two sets of Monte-Carlo draws, and each estimator's estimate of ΔV, its value
on the new policy's build minus its value on the old one, matched by state_id. Pure numpy: the caller reads the
builds (benchmarks/moved_policy.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def value_shift(old: Sequence[float], new: Sequence[float]) -> tuple[float, float]:
    """(ΔV, its standard error) of one state from its old and new draws (at least 2 each). Equal counts are paired
    draw by draw: a re-reference seeds draw j as the source's draw j, so the pairs are i.i.d. and their spread is
    the difference's, correlated or not; unequal counts: the two means' errors combined."""
    o, n = np.asarray(old, dtype=float), np.asarray(new, dtype=float)
    if len(o) < 2 or len(n) < 2:
        raise ValueError(f"a state needs at least 2 draws under each policy (got {len(o)} and {len(n)})")
    if len(o) == len(n):
        se = float(np.std(n - o, ddof=1) / np.sqrt(len(o)))
    else:
        se = float(np.sqrt(np.var(n, ddof=1) / len(n) + np.var(o, ddof=1) / len(o)))
    return float(n.mean() - o.mean()), se


def tracking(dv: np.ndarray, se: np.ndarray, est: np.ndarray, clusters: Sequence | None = None) -> dict:
    """How estimates `est` of ΔV follow the reference ΔV `dv` (per-state standard errors `se`).

    mae: mean |est − dv| (the reference's noise included); mse_debiased: mean (est − dv)² − mean se² (the reference
    draws are independent of the estimates, so their noise adds mean se²); slope: the least-squares slope of est on
    dv, the share of ΔV the estimator tracks (1 follows it, 0 ignores it), attenuated by the reference noise;
    slope_corrected: cov / (var dv − mean se²), NaN where the noise is as large as ΔV's spread; slope_se:
    cluster-robust (by `clusters`, e.g. problem ids; default each state its own) standard error of the slope."""
    dv, se, est = (np.asarray(x, dtype=float) for x in (dv, se, est))
    n = len(dv)
    if n < 3:
        raise ValueError(f"{n} states: a slope needs at least 3")
    noise = float(np.mean(se ** 2))
    xc = dv - dv.mean()
    sxx = float(xc @ xc)
    cov = float(xc @ (est - est.mean())) / (n - 1)
    var = sxx / (n - 1)
    slope = cov / var if var > 0 else float("nan")
    resid = (est - est.mean()) - slope * xc
    g = np.arange(n) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    score = np.bincount(g, weights=xc * resid)
    true_var = var - noise
    return {"n": n, "mae": float(np.mean(np.abs(est - dv))),
            "mse_debiased": float(np.mean((est - dv) ** 2) - noise),
            "slope": slope, "slope_se": float(np.sqrt(score @ score) / sxx) if sxx > 0 else float("nan"),
            "slope_corrected": cov / true_var if true_var > 0 else float("nan")}


def compare(old_refs: Mapping[str, Sequence[float]], new_refs: Mapping[str, Sequence[float]],
            old_est: Mapping[str, Mapping[str, float]], new_est: Mapping[str, Mapping[str, float]],
            problem_of: Mapping[str, str] | None = None) -> dict:
    """The comparison: {"states": ΔV's summary, "estimators": one `tracking` row each}.

    old_refs/new_refs: state_id -> its reference draws under each policy; old_est/new_est: estimator -> state_id ->
    value on each build; problem_of: state_id -> problem_id (the slope's clusters). Only states both builds hold
    count; an estimator only on the states it has under both."""
    ids = sorted(set(old_refs) & set(new_refs))
    if len(ids) < 3:
        raise ValueError(f"the two builds share {len(ids)} states; a re-reference holds its source's")
    shifts = dict(zip(ids, (value_shift(old_refs[i], new_refs[i]) for i in ids)))
    dv = np.array([shifts[i][0] for i in ids])
    se = np.array([shifts[i][1] for i in ids])
    noise, var = float(np.mean(se ** 2)), float(np.var(dv, ddof=1))
    g = np.unique([problem_of[i] for i in ids] if problem_of else ids, return_inverse=True)[1]
    sums = np.bincount(g, weights=dv - dv.mean())  # the mean's SE, clustered: a problem's states move together
    states = {"n": len(ids), "unmatched": len(set(old_refs) ^ set(new_refs)), "dv_mean": float(dv.mean()),
              "dv_mean_se": float(np.sqrt(sums @ sums) / len(ids)),
              "dv_sd": float(np.sqrt(var)), "noise_var": noise,
              "reliability": 1 - noise / var if var > 0 else float("nan"),
              "moved": float(np.mean(np.abs(dv) > 2 * se))}  # share of states whose ΔV is 2 SE from 0
    rows = []
    for name in [k for k in old_est if k in new_est]:
        idx = [k for k, i in enumerate(ids) if i in old_est[name] and i in new_est[name]]
        if len(idx) < 3:
            continue
        d = np.array([new_est[name][ids[k]] - old_est[name][ids[k]] for k in idx])
        clusters = [problem_of[ids[k]] for k in idx] if problem_of else None
        rows.append({"estimator": name, **tracking(dv[idx], se[idx], d, clusters)})
    return {"states": states, "estimators": rows}
