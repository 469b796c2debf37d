"""The rollout-equivalent k_eq of an estimator: the number k of fresh continuations whose Monte-Carlo mean has
the estimator's expected squared error against the true value. Pure numpy.

MCS@k of independent draws has E[(MCS@k - V)^2] = E[V(1-V)] / k, so k_eq = E[V(1-V)] / E[(f - V)^2]. Both means
are estimated without bias from the n reference draws of each state (m successes): u = m(n-m) / (n(n-1)) for
V(1-V), and d = (f - ref)^2 - ref(1-ref)/(n-1) for (f - V)^2 (`scoring.debiased_mse`, per state). The interval
is Fieller's for the ratio rho = 1/k_eq = mean d / mean u with the verdicts' cluster-robust (CR1) covariance of
the two means over problems: the set of rho whose t-test of mean(d - rho u) = 0 does not reject, so it is the
delta method inverted exactly, needs no seed, and stays valid where mean d is near or below 0 (k unbounded).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import t as student_t

from sveb.score.scoring import cluster_members


def v1v_unbiased(ref: np.ndarray, n_ref: int) -> np.ndarray:
    """Per state, m(n-m) / (n(n-1)) with ref = m/n: unbiased for V(1-V) (NaN for n < 2)."""
    ref = np.asarray(ref, float)
    if n_ref < 2:
        return np.full(len(ref), np.nan)
    return ref * (1 - ref) * n_ref / (n_ref - 1)


def sq_err_unbiased(est: np.ndarray, ref: np.ndarray, n_ref: int) -> np.ndarray:
    """Per state, (f - ref)^2 - ref(1-ref)/(n-1): unbiased for (f - V)^2 (the reference's own variance removed)."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    return (est - ref) ** 2 - ref * (1 - ref) / (n_ref - 1)


def ratio_fieller(d: np.ndarray, u: np.ndarray, groups=None, level: float = 0.95) -> tuple[float, float, float]:
    """rho = mean d / mean u and its Fieller interval under the CR1 covariance of the two means (clusters:
    `groups`). (lo, hi) = (-inf, inf) where mean u is not significantly above 0 (the interval is unbounded)."""
    d, u = np.asarray(d, float), np.asarray(u, float)
    n = len(d)
    if n == 0 or not np.isfinite(d).all() or not np.isfinite(u).all() or u.mean() <= 0:
        return float("nan"), float("nan"), float("nan")
    D, U = float(d.mean()), float(u.mean())
    rho = D / U
    clusters = cluster_members(groups, n)
    g = len(clusters)
    if g < 2:
        return rho, float("nan"), float("nan")
    sizes = np.array([len(c) for c in clusters], float)
    ed = np.array([d[c].sum() for c in clusters]) - D * sizes
    eu = np.array([u[c].sum() for c in clusters]) - U * sizes
    c = g / (g - 1) / n ** 2
    vdd, vdu, vuu = (float(c * x @ y) for x, y in ((ed, ed), (ed, eu), (eu, eu)))
    t2 = float(student_t.ppf(1 - (1 - level) / 2, g - 1)) ** 2
    # (D - rho U)^2 <= t^2 (vdd - 2 rho vdu + rho^2 vuu): a rho^2 + b rho + c0 <= 0
    a, b, c0 = U * U - t2 * vuu, -2 * (D * U - t2 * vdu), D * D - t2 * vdd
    if a <= 0:
        return rho, float("-inf"), float("inf")
    disc = max(b * b - 4 * a * c0, 0.0)  # >= 0 up to rounding: rho itself satisfies the inequality
    r = np.sqrt(disc)
    return rho, float((-b - r) / (2 * a)), float((-b + r) / (2 * a))


def _inv(x: float) -> float:
    return 1 / x if x > 0 else float("inf")


def k_eq(est: np.ndarray, ref: np.ndarray, n_ref: int, groups=None, level: float = 0.95) -> dict:
    """k_eq = E[V(1-V)] / debiased MSE with its Fieller interval (`ratio_fieller` on 1/k_eq, inverted): inf where
    the debiased MSE is <= 0 (no finite k matches it; the lower bound still says how many rollouts it is worth
    at least); NaN where no state has 0 < ref < 1 (E[V(1-V)] estimates 0: no rollout count is defined)."""
    nan = float("nan")
    if len(np.asarray(ref)) == 0 or n_ref < 2:
        return {"k_eq": nan, "k_eq_ci_low": nan, "k_eq_ci_high": nan}
    rho, lo, hi = ratio_fieller(sq_err_unbiased(est, ref, n_ref), v1v_unbiased(ref, n_ref), groups, level)
    if not np.isfinite(rho):
        return {"k_eq": nan, "k_eq_ci_low": nan, "k_eq_ci_high": nan}
    if np.isnan(lo) or np.isnan(hi):  # fewer than 2 clusters: no interval
        return {"k_eq": _inv(rho), "k_eq_ci_low": nan, "k_eq_ci_high": nan}
    return {"k_eq": _inv(rho), "k_eq_ci_low": _inv(hi), "k_eq_ci_high": _inv(lo)}
