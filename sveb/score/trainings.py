"""The paired test of a trained estimator over several trainings (training seeds). Pure numpy/scipy, no I/O.

A trained estimator's Δ against the baseline is a draw over two sources: the problems (and states) of the build,
and its own training. With R trainings scored on the same N states, d[r, i] the per-state difference of
squared error of training r, the estimate is the mean over trainings Δ̄ = mean_r Δ_r (Δ_r = mean_i d[r, i]).
Write Δ_r = μ + A + B_r, where A is the part every training shares (which problems and states were drawn) and
B_r the training's own part (its seed's effect and its state-by-training noise), independent over r. Then
    Var(Δ̄) = Var(A) + Var(B) / R.
- Var(B): the sample variance of the R training-level Δ_r (A cancels in their differences), so Var(B)/R is
  estimated by s²/R, on R - 1 degrees of freedom.
- Var(A): the covariance of two trainings' Δ, estimated cluster-robustly (CR1, clusters = problems) from the
  products of their cluster sums, averaged over the R(R - 1) ordered pairs r != r'. B_r and B_r' are independent,
  so only A enters it (a training's own noise enters its own variance, never the cross products); on G - 1
  degrees of freedom. A negative estimate (possible when A is small) is taken as 0: conservative.
The t-test of Δ̄ uses se = sqrt(Var(A) + s²/R) on Welch-Satterthwaite degrees of freedom. The naive SE (the CR1
SE of the per-state mean over trainings) estimates Var(A) + Var(B_state-part)/R and misses the seed's shared
effect, so it under-covers when trainings differ (tests/test_trainings.py measures both).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as student_t

from sveb.score import scoring

ALPHA = 0.05


def _codes(groups, n: int) -> tuple[np.ndarray, int]:
    if groups is None:
        return np.arange(n), n
    _, inv = np.unique(np.asarray(groups), return_inverse=True)
    return inv, int(inv.max()) + 1 if n else 0


def cr1_cov(d: np.ndarray, groups=None) -> np.ndarray:
    """R x R cluster-robust (CR1) covariance of the R row means of d (R x N): G/(G-1) Σ_g (S_rg - m_r n_g)(S_r'g -
    m_r' n_g) / N², with S_rg row r's sum over cluster g. Its diagonal is `scoring.cluster_se`'s variance."""
    d = np.atleast_2d(np.asarray(d, float))
    r, n = d.shape
    code, g = _codes(groups, n)
    if g < 2:
        return np.full((r, r), np.nan)
    sums = np.stack([np.bincount(code, weights=row, minlength=g) for row in d])
    sizes = np.bincount(code, minlength=g).astype(float)
    dev = sums - d.mean(1, keepdims=True) * sizes
    return g / (g - 1) * (dev @ dev.T) / n ** 2


def satterthwaite(v1: float, df1: float, v2: float, df2: float) -> float:
    """Welch-Satterthwaite degrees of freedom of v1 + v2 (estimated variances on df1 and df2 degrees of freedom)."""
    den = (v1 ** 2 / df1 if v1 > 0 else 0.0) + (v2 ** 2 / df2 if v2 > 0 else 0.0)
    return float((v1 + v2) ** 2 / den) if den > 0 else float(df1)


def over_trainings(d, groups=None, level: float = 0.95) -> dict:
    """The test of the mean paired Δ over R trainings (d: R x N, the same states in every row; groups: the
    states' clusters): delta_sq (Δ̄), its CI, p_delta, delta_sq_se, df (Satterthwaite), and trainings (R),
    training_sd (sd of the Δ_r, ddof 1), var_shared and var_training (the two parts of se², see the module).
    With R = 1 it is the ordinary CR1 test of that training (scoring.paired_sq_diff's), training_sd NaN."""
    d = np.atleast_2d(np.asarray(d, float))
    r, n = d.shape
    code, g = _codes(groups, n)
    per = d.mean(1)
    m = float(per.mean()) if n else float("nan")
    if r == 1 or g < 2:
        mm, se, gg = scoring.cluster_se(d.mean(0), groups)
        v_a, v_b, df = (se ** 2 if np.isfinite(se) else float("nan")), 0.0, gg - 1
        sd = float("nan") if r == 1 else float(per.std(ddof=1))
    else:
        cov = cr1_cov(d, groups)
        v_a = max(0.0, float((cov.sum() - np.trace(cov)) / (r * (r - 1))))
        sd = float(per.std(ddof=1))
        v_b = sd ** 2 / r
        df = satterthwaite(v_a, g - 1, v_b, r - 1)
    se = float(np.sqrt(v_a + v_b)) if np.isfinite(v_a) else float("nan")
    if not (np.isfinite(se) and df >= 1):
        p, lo, hi = float("nan"), float("nan"), float("nan")
    elif se <= 1e-15:
        p, lo, hi = (1.0 if abs(m) <= 1e-15 else 0.0), m, m
    else:
        p = float(2 * student_t.sf(abs(m) / se, df))
        half = float(student_t.ppf(1 - (1 - level) / 2, df)) * se
        lo, hi = m - half, m + half
    return {"delta_sq": m, "delta_sq_ci_low": lo, "delta_sq_ci_high": hi, "p_delta": p, "delta_sq_se": se,
            "df": float(df), "trainings": int(r), "training_sd": sd, "var_shared": v_a, "var_training": v_b}


def mae_over_trainings(runs, ref, groups=None, level: float = 0.95) -> dict:
    """The MAE of R trainings' estimates `runs` (R arrays on the same states as `ref`) as the mean over trainings,
    with this module's test applied to the absolute errors: its CI carries the between-training spread, as the Δ
    beside it (`delta_sq` is then the MAE, `training_sd` the sd of the per-training MAEs)."""
    ref = np.asarray(ref, float)
    return over_trainings(np.stack([np.abs(np.asarray(a, float) - ref) for a in runs]), groups, level)


def naive(d, groups=None) -> dict:
    """The test that ignores the training spread: the CR1 test of the per-state mean over trainings (what pooling
    the trainings' states as if they were one estimator's would give). For comparison only."""
    d = np.atleast_2d(np.asarray(d, float))
    m, se, g = scoring.cluster_se(d.mean(0), groups)
    lo, hi = scoring.t_interval(m, se, g)
    return {"delta_sq": m, "delta_sq_se": se, "df": g - 1, "delta_sq_ci_low": lo, "delta_sq_ci_high": hi}
