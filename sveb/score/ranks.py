"""Rank correlation of the estimate with the reference (QVal's lead metric), pooled and within problem, raw and
corrected for the reference's noise. Pure numpy/scipy.

The reference is V plus binomial noise of variance V(1-V)/n, which pulls any correlation with it towards 0. For
Spearman the correction is Spearman's for attenuation, applied on the Pearson scale of a Gaussian copula: rho_s
is mapped to its Pearson equivalent 2 sin(pi rho_s / 6), divided by the square root of the reference's
reliability, and mapped back (clipped to [-1, 1]). The reliability
is Var(V) / Var(ref) = 1 - E[V(1-V)/n] / Var(ref), each term unbiased from the reference draws (within problem:
the within-problem variances). The estimator's own noise is its property and is not corrected. Exact under a
Gaussian copula, approximate for binomial noise (tests/test_rank_metrics.py bounds the remaining bias). Kendall's
tau is reported raw: the same correction through tau -> sin(pi tau / 2) over-corrects by as much as the noise
attenuates under the reference's ties (k of 20 levels), so it is left uncorrected and read between estimators on
the same states only.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import kendalltau, spearmanr

from sveb.score.scoring import cluster_members


def _corr(kind: str, x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float((spearmanr if kind == "spearman" else kendalltau)(x, y)[0])


def reliability(ref: np.ndarray, n_ref: int, groups=None) -> float:
    """Var(V) / Var(ref) estimated from the references (`groups`: within problem, from the deviations from each
    problem's mean, problems with one state left out). NaN where the reference does not vary."""
    ref = np.asarray(ref, float)
    noise = ref * (1 - ref) / (n_ref - 1)  # unbiased for V(1-V)/n per state
    if groups is None:
        if len(ref) < 2:
            return float("nan")
        var, mean_noise = float(ref.var(ddof=1)), float(noise.mean())
    else:
        ss, dof, nz = 0.0, 0, []
        for c in cluster_members(groups, len(ref)):
            if len(c) > 1:
                ss += float(((ref[c] - ref[c].mean()) ** 2).sum())
                dof += len(c) - 1
                nz.append(noise[c])
        if dof == 0:
            return float("nan")
        var, mean_noise = ss / dof, float(np.concatenate(nz).mean())
    return 1 - mean_noise / var if var > 0 else float("nan")


def corrected(rho_s: float, rel: float) -> float:
    """A Spearman correlation with the reference, disattenuated by the reference's reliability on the Gaussian
    copula's Pearson scale; NaN where the reliability is not positive."""
    if not (np.isfinite(rho_s) and np.isfinite(rel)) or rel <= 0:
        return float("nan")
    p = float(np.clip(2 * np.sin(np.pi * rho_s / 6) / np.sqrt(rel), -1, 1))
    return float(6 / np.pi * np.arcsin(p / 2))


def group_ranks(x: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Ranks (1-based, ties averaged) of x within each group (inv: group codes 0..G-1), all groups at once."""
    order = np.lexsort((x, inv))
    xs, gs = x[order], inv[order]
    n = len(x)
    new_group = np.r_[True, gs[1:] != gs[:-1]]
    new_block = new_group | np.r_[True, xs[1:] != xs[:-1]]
    pos = np.arange(n) - np.maximum.accumulate(np.where(new_group, np.arange(n), 0))  # 0-based within group
    block = np.cumsum(new_block) - 1
    avg = np.bincount(block, pos) / np.bincount(block)
    out = np.empty(n)
    out[order] = avg[block] + 1
    return out


def _within_spearman(est: np.ndarray, ref: np.ndarray, groups) -> np.ndarray:
    """Per problem, Pearson's r of the within-problem ranks (Spearman's rho); NaN where either is constant."""
    _, inv = np.unique(groups, return_inverse=True)
    a, b = group_ranks(est, inv), group_ranks(ref, inv)
    size = np.bincount(inv).astype(float)
    a, b = a - (np.bincount(inv, a) / size)[inv], b - (np.bincount(inv, b) / size)[inv]
    sab, saa, sbb = (np.bincount(inv, x) for x in (a * b, a * a, b * b))
    ok = (saa > 1e-12) & (sbb > 1e-12)
    return np.where(ok, sab / np.sqrt(np.where(ok, saa * sbb, 1.0)), np.nan)


def _within_kendall(est: np.ndarray, ref: np.ndarray, groups) -> np.ndarray:
    """Per problem, Kendall's tau-b over its pairs of states: (concordant - discordant) / sqrt((pairs - ties in
    est)(pairs - ties in ref)); NaN where either is constant."""
    clusters = [c for c in cluster_members(groups, len(est)) if len(c) > 1]
    if not clusters:
        return np.array([])
    pairs = [np.triu_indices(len(c), 1) for c in clusters]
    i = np.concatenate([c[p[0]] for c, p in zip(clusters, pairs)])
    j = np.concatenate([c[p[1]] for c, p in zip(clusters, pairs)])
    g = np.repeat(np.arange(len(clusters)), [len(p[0]) for p in pairs])
    de, dr = np.sign(est[i] - est[j]), np.sign(ref[i] - ref[j])
    n0 = np.bincount(g).astype(float)
    s = np.bincount(g, de * dr)
    denom = (n0 - np.bincount(g, de == 0)) * (n0 - np.bincount(g, dr == 0))
    return np.where(denom > 0, s / np.sqrt(np.where(denom > 0, denom, 1.0)), np.nan)


def within(kind: str, est: np.ndarray, ref: np.ndarray, groups) -> float:
    """Mean over problems (each weighing the same) of the rank correlation among a problem's states; problems
    where the estimate or the reference does not vary are left out."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    if len(est) == 0:
        return float("nan")
    vals = (_within_spearman if kind == "spearman" else _within_kendall)(est, ref, np.asarray(groups))
    vals = vals[np.isfinite(vals)]
    return float(np.mean(vals)) if len(vals) else float("nan")


def rank_metrics(est: np.ndarray, ref: np.ndarray, n_ref: int, groups=None) -> dict:
    """spearman and spearman_within corrected for the reference's noise, the raw values beside them (`..._raw`),
    and Kendall's tau-b pooled and within problem (raw)."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    groups = np.arange(len(ref)) if groups is None else np.asarray(groups)
    raw, raw_w = _corr("spearman", est, ref), within("spearman", est, ref, groups)
    return {"spearman": corrected(raw, reliability(ref, n_ref)), "spearman_raw": raw,
            "spearman_within": corrected(raw_w, reliability(ref, n_ref, groups)), "spearman_within_raw": raw_w,
            "kendall": _corr("kendall", est, ref), "kendall_within": within("kendall", est, ref, groups)}
