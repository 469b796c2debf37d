"""Scores of an estimator against the Monte-Carlo reference. Pure numpy.

Intervals and tests sum over problems (clusters), not states: states of one problem share their group and are
not independent. One procedure everywhere: the cluster-robust (CR1) t, whose interval is its test inverted.
When several builds (seeds) are pooled, a cluster is the problem itself (one problem drawn by two seeds is one).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.stats import binom
from scipy.stats import t as student_t

ALPHA = 0.05  # verdicts: Holm-adjusted p below this


def cluster_members(groups: np.ndarray | None, n: int) -> list[np.ndarray]:
    if groups is None:
        return [np.array([i]) for i in range(n)]
    _, inv = np.unique(groups, return_inverse=True)
    return [np.flatnonzero(inv == g) for g in range(inv.max() + 1)]


def cluster_se(x: np.ndarray, groups=None) -> tuple[float, float, int]:
    """(mean, standard error, clusters G) of x, cluster-robust: with cluster sums S_g, sizes n_g, N states and
    mean m = sum S_g / N, Var(m) = G/(G-1) * sum (S_g - m n_g)^2 / N^2 (the CR1 sandwich of an intercept-only
    regression). With one state per cluster it is the paired t-test's. se NaN with fewer than 2 clusters.
    Depends on the cluster labels only through which states share one: no resampling, no order."""
    x = np.asarray(x, float)
    if len(x) == 0:
        return float("nan"), float("nan"), 0
    clusters = cluster_members(groups, len(x))
    g = len(clusters)
    m = float(x.mean())
    if g < 2:
        return m, float("nan"), g
    sums = np.array([x[c].sum() for c in clusters])
    sizes = np.array([len(c) for c in clusters], dtype=float)
    var = g / (g - 1) * float(((sums - m * sizes) ** 2).sum()) / len(x) ** 2
    return m, float(np.sqrt(max(var, 0.0))), g


def t_interval(m: float, se: float, g: int, level: float = 0.95) -> tuple[float, float]:
    """m ± t_{G-1} se: the interval that excludes 0 exactly when `cluster_t_test` gives p < 1 - level."""
    if not (np.isfinite(m) and np.isfinite(se)) or g < 2:
        return float("nan"), float("nan")
    if se <= 1e-15:
        return m, m
    half = float(student_t.ppf(1 - (1 - level) / 2, g - 1)) * se
    return m - half, m + half


def mean_ci(x: np.ndarray, groups=None, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of x and its cluster-robust (CR1) t-interval: the test of `cluster_t_test` inverted, so a paired
    Δ's interval and its p can never disagree (NaN for no data; NaN bounds with fewer than 2 clusters)."""
    m, se, g = cluster_se(x, groups)
    return (m, *t_interval(m, se, g, level))


def mae_ci(est: np.ndarray, ref: np.ndarray, groups=None, level: float = 0.95) -> tuple[float, float, float]:
    return mean_ci(np.abs(np.asarray(est, float) - np.asarray(ref, float)), groups, level=level)


def bias_ci(est: np.ndarray, ref: np.ndarray, groups=None, level: float = 0.95) -> tuple[float, float, float]:
    """Mean signed error (estimate - reference) with its clustered CI: > 0 means the estimator over-predicts.
    Unbiased for E[f - V] since the reference is an unbiased draw of V."""
    return mean_ci(np.asarray(est, float) - np.asarray(ref, float), groups, level=level)


def calibration_slope(est: np.ndarray, ref: np.ndarray) -> float:
    """OLS slope of the reference on the estimate: 1 for a calibrated estimator, < 1 when its values spread
    too far (over-confident), > 1 when too little. NaN when the estimates do not vary. Reference noise is
    in the response, so it does not bias the slope."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    if len(est) < 2:
        return float("nan")
    dx = est - est.mean()
    var = float(dx @ dx)
    return float(dx @ (ref - ref.mean()) / var) if var > 1e-12 * len(est) else float("nan")


def rmse(est: np.ndarray, ref: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(est, float) - np.asarray(ref, float)) ** 2)))


def debiased_mse(est: np.ndarray, ref: np.ndarray, n_ref: int) -> float:
    """Unbiased estimate of E[(f - V)^2]: the reference's own variance V(1-V)/n is removed,
    using the unbiased estimate V̂(1-V̂)/(n-1) of it."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    return float(np.mean((est - ref) ** 2 - ref * (1 - ref) / (n_ref - 1)))


@lru_cache(maxsize=64)
def _abs_dev_table(n: int, grid: tuple[float, ...]) -> np.ndarray:
    """E|Binom(n, p)/n - p| for each p in grid."""
    p = np.array(grid)
    k = np.arange(n + 1)
    pmf = binom.pmf(k[None, :], n, p[:, None])
    return (pmf * np.abs(k[None, :] / n - p[:, None])).sum(1)


def fit_value_prior(successes: np.ndarray, n: int, grid_size: int = 101,
                    iters: int = 500) -> tuple[np.ndarray, np.ndarray]:
    """Nonparametric MLE (EM on a grid) of the distribution of true values behind k-of-n counts."""
    grid = np.linspace(0, 1, grid_size)
    lik = binom.pmf(np.asarray(successes)[:, None], n, grid[None, :])  # [N, grid]
    w = np.full(grid_size, 1.0 / grid_size)
    for _ in range(iters):
        post = lik * w
        post /= post.sum(1, keepdims=True)
        w = post.mean(0)
    return grid, w


@lru_cache(maxsize=64)
def _oracle_table(n: int, grid: tuple[float, ...]) -> np.ndarray:
    """min_f E|Binom(n, p)/n - f| for each p in grid: f = a median of Binom(n, p)/n."""
    p = np.array(grid)
    k = np.arange(n + 1)
    pmf = binom.pmf(k[None, :], n, p[:, None])
    med = np.argmax(np.cumsum(pmf, axis=1) >= 0.5, axis=1) / n
    return (pmf * np.abs(k[None, :] / n - med[:, None])).sum(1)


def _prior(ref: np.ndarray, n_ref: int) -> tuple[np.ndarray, np.ndarray]:
    k = np.rint(np.asarray(ref, float) * n_ref).astype(int)
    return _prior_of(tuple(k.tolist()), n_ref)


@lru_cache(maxsize=64)
def _prior_of(k: tuple[int, ...], n_ref: int) -> tuple[np.ndarray, np.ndarray]:
    """The fitted prior of one set of k-of-n counts: ref_noise and oracle_floor of every score row of a table
    read the same references, so the EM runs once per set, not twice per row."""
    return fit_value_prior(np.array(k, dtype=int), n_ref)


def ref_noise(ref: np.ndarray, n_ref: int) -> float:
    """Expected MAE of the *true* values V against the n_ref-draw reference, under the NPMLE prior
    fitted to the references. Not a lower bound: the MAE-optimal prediction under a noisy reference
    is the median of Bin(n_ref, V)/n_ref, not V (see `oracle_floor`)."""
    if len(ref) == 0:
        return float("nan")
    grid, w = _prior(ref, n_ref)
    return float(w @ _abs_dev_table(n_ref, tuple(grid)))


def oracle_floor(ref: np.ndarray, n_ref: int) -> float:
    """Expected MAE of the best predictor that knows each state's true value V (it predicts the median
    of Bin(n_ref, V)/n_ref), under the same fitted prior. No estimator, which knows at most V, can
    expect a lower MAE: a lower bound in expectation, as good as the fitted prior."""
    if len(ref) == 0:
        return float("nan")
    grid, w = _prior(ref, n_ref)
    return float(w @ _oracle_table(n_ref, tuple(grid)))


def cluster_t_test(x: np.ndarray, groups=None) -> float:
    """Two-sided p-value for "the mean of x is 0": t = m / se (`cluster_se`, CR1), Student t with G-1 degrees of
    freedom. With one state per cluster it is the paired t-test. NaN with fewer than 2 clusters."""
    return _t_p(*cluster_se(x, groups))


def _t_p(m: float, se: float, g: int) -> float:
    """The two-sided p of t = m / se on g - 1 degrees of freedom (`cluster_se`'s output)."""
    if g < 2:
        return float("nan")
    if se <= 1e-15:  # every cluster has the same mean: the difference is exact, or exactly nothing
        return 1.0 if abs(m) <= 1e-15 else 0.0
    return float(2 * student_t.sf(abs(m) / se, g - 1))


def paired_sq_diff(est_a: np.ndarray, est_b: np.ndarray, ref: np.ndarray, groups=None) -> dict:
    """Paired difference of squared error of A against B on the same states:
    d_i = (a_i - ref_i)^2 - (b_i - ref_i)^2; < 0 means A is closer. Against an unbiased reference independent
    of both estimates, E[d_i] = (a_i - V_i)^2 - (b_i - V_i)^2: the reference's noise cancels, so the mean
    estimates the difference of true MSEs and cannot be won by shrinking toward a noisy reference's median
    (as MAE can). One procedure gives the CI and the p: the cluster-robust t (`cluster_se`); `delta_sq_se` and
    `df` let a family's adjusted interval (`holm_interval`) and the detectable Δ come from the same."""
    a, b, r = (np.asarray(x, float) for x in (est_a, est_b, ref))
    d = (a - r) ** 2 - (b - r) ** 2
    m, se, g = cluster_se(d, groups)
    lo, hi = t_interval(m, se, g)
    return {"delta_sq": m, "delta_sq_ci_low": lo, "delta_sq_ci_high": hi,
            "p_delta": _t_p(m, se, g), "delta_sq_se": se, "df": g - 1}


def holm_interval(m: float, se: float, df: int, p: float, p_holm: float, alpha: float = ALPHA) -> tuple[float, float]:
    """The t-interval at the level Holm's step-down spends on this hypothesis, 1 - alpha p / p_holm (p_holm / p
    is its effective multiplier, between 1 and the family size). It excludes 0 exactly when p_holm < alpha, so
    the adjusted interval and the verdict always agree; with p_holm = p (a family of one) it is the plain
    (1 - alpha) interval."""
    if not all(np.isfinite(v) for v in (m, se, p, p_holm)) or df < 1:
        return float("nan"), float("nan")
    if se <= 1e-15 or p <= 0.0:
        return m, m
    return t_interval(m, se, df + 1, 1 - alpha * p / p_holm)


def holm(pvals, m: int | None = None) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control): sorted ascending p_(1..m),
    adj_(i) = max_{j<=i} min(1, (m - j + 1) p_(j)). NaN entries are not in the family and stay NaN. `m`: the
    declared family size when larger than the tested count (the members not tested count as p = 1)."""
    p = np.asarray(pvals, float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    size = max(len(order), m or 0)
    out[order] = np.minimum(1.0, np.maximum.accumulate((size - np.arange(len(order))) * p[order]))
    return out


def verdict(delta: float, p_adj: float, alpha: float = ALPHA) -> str:
    """better / worse / no difference from the Holm-adjusted p and the sign of the paired Δ (n/a: untested)."""
    if not (np.isfinite(delta) and np.isfinite(p_adj)):
        return "n/a"
    if p_adj >= alpha or delta == 0:
        return "no difference"
    return "better" if delta < 0 else "worse"


def concordance(est: np.ndarray, ref: np.ndarray, problems: np.ndarray) -> float:
    """Within-problem pairwise concordance: over pairs of states of one problem whose references differ, the
    share where sign(est_a - est_b) matches sign(ref_a - ref_b), ties of the estimates counting 1/2; averaged
    over problems (each problem weighs the same). Pairs whose references tie are skipped (no order to get
    right). Independent of calibration: any increasing map of the estimates scores the same. NaN: no pair."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    per_problem = []
    for idx in cluster_members(np.asarray(problems), len(est)):
        i, j = np.triu_indices(len(idx), 1)
        dr = np.sign(ref[idx[i]] - ref[idx[j]])
        de = np.sign(est[idx[i]] - est[idx[j]])
        keep = dr != 0
        if keep.any():
            per_problem.append(np.where(de[keep] == 0, 0.5, de[keep] == dr[keep]).mean())
    return float(np.mean(per_problem)) if per_problem else float("nan")


def step_sign_agreement(est: np.ndarray, ref: np.ndarray, problems: np.ndarray, rollouts: np.ndarray,
                        t: np.ndarray) -> tuple[float, int]:
    """Step advantage sign agreement: over pairs of states cut from the same rollout (same problem and
    rollout index, t1 < t2), the share where sign(est(s2) - est(s1)) matches sign(ref(s2) - ref(s1)); pairs
    whose references tie are left out, ties of the estimates count 1/2 (chance level). Returns the share
    (NaN when no pair) and the number of pairs used."""
    est, ref, t = (np.asarray(x, float) for x in (est, ref, t))
    codes: dict = {}
    keys = np.array([codes.setdefault((p, r), len(codes)) for p, r in zip(problems, rollouts)], dtype=int)
    scores = []
    for idx in cluster_members(keys, len(est)) if len(est) else []:
        i, j = np.triu_indices(len(idx), 1)
        early = t[idx[i]] < t[idx[j]]
        first, second = np.where(early, idx[i], idx[j]), np.where(early, idx[j], idx[i])
        dr = np.sign(ref[second] - ref[first])
        de = np.sign(est[second] - est[first])
        keep = (dr != 0) & (t[idx[i]] != t[idx[j]])
        scores += list(np.where(de[keep] == 0, 0.5, de[keep] == dr[keep]))
    return (float(np.mean(scores)) if scores else float("nan")), len(scores)


def own_shift_stats(shift: np.ndarray) -> dict:
    """The own-outcome shift as a distribution (mean, 95th percentile, max over measured states), so that
    "bounded" can be checked; NaN where nothing was measured."""
    s = np.asarray(shift, float)
    s = s[np.isfinite(s)]
    if len(s) == 0:
        return {"own_share": float("nan"), "own_shift_p95": float("nan"), "own_shift_max": float("nan")}
    return {"own_share": float(s.mean()), "own_shift_p95": float(np.quantile(s, 0.95)), "own_shift_max": float(s.max())}


def score(est: np.ndarray, ref: np.ndarray, n_ref: int, groups=None, rollouts=None, t=None) -> dict:
    """Every per-estimator score; `rollouts` and `t` (per state) give the step advantage sign agreement."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    problems = np.asarray(groups) if groups is not None else np.arange(len(ref))
    mae, lo, hi = mae_ci(est, ref, groups)
    bias, blo, bhi = bias_ci(est, ref, groups)
    sign, pairs = (step_sign_agreement(est, ref, problems, rollouts, t) if rollouts is not None and t is not None
                   else (float("nan"), 0))
    return {
        "n_states": int(len(ref)),
        "n_problems": int(len(np.unique(problems))),
        "mae": mae, "mae_ci_low": lo, "mae_ci_high": hi,
        "rmse": rmse(est, ref) if len(ref) else float("nan"),
        "debiased_mse": debiased_mse(est, ref, n_ref) if len(ref) else float("nan"),
        "ref_noise": ref_noise(ref, n_ref),
        "oracle_floor": oracle_floor(ref, n_ref),
        "bias": bias, "bias_ci_low": blo, "bias_ci_high": bhi,
        "calib_slope": calibration_slope(est, ref),
        "concordance": concordance(est, ref, problems),
        "sign_agreement": sign, "sign_pairs": int(pairs),
    }
