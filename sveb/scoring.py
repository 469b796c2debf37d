"""Scores of an estimator against the Monte-Carlo reference. Pure numpy.

Bootstraps resample problems (clusters), not states: states of one problem share
their group and are not independent.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.stats import binom


def _clusters(groups: np.ndarray | None, n: int) -> list[np.ndarray]:
    if groups is None:
        return [np.array([i]) for i in range(n)]
    _, inv = np.unique(groups, return_inverse=True)
    return [np.flatnonzero(inv == g) for g in range(inv.max() + 1)]


def bootstrap_means(x: np.ndarray, groups: np.ndarray | None, n_boot: int, seed: int) -> np.ndarray:
    """Means of x over n_boot cluster-bootstrap resamples (seeded)."""
    x = np.asarray(x, dtype=np.float64)
    clusters = _clusters(groups, len(x))
    sums = np.array([x[c].sum() for c in clusters])
    sizes = np.array([len(c) for c in clusters])
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(clusters), size=(n_boot, len(clusters)))
    return sums[pick].sum(1) / sizes[pick].sum(1)


def mae_ci(est: np.ndarray, ref: np.ndarray, groups=None, n_boot: int = 2000, seed: int = 0,
           level: float = 0.95) -> tuple[float, float, float]:
    err = np.abs(np.asarray(est, float) - np.asarray(ref, float))
    if len(err) == 0:
        return float("nan"), float("nan"), float("nan")
    boots = bootstrap_means(err, groups, n_boot, seed)
    lo, hi = np.quantile(boots, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(err.mean()), float(lo), float(hi)


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


def fit_value_prior(successes: np.ndarray, n: int, grid_size: int = 101, iters: int = 500) -> tuple[np.ndarray, np.ndarray]:
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
    return fit_value_prior(k, n_ref)


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


def paired_better(err_a: np.ndarray, err_b: np.ndarray, groups=None, n_boot: int = 2000, seed: int = 0) -> float:
    """Bootstrap probability that estimator A has lower MAE than B on the same states."""
    diff = np.abs(np.asarray(err_a, float)) - np.abs(np.asarray(err_b, float))
    if len(diff) == 0:
        return float("nan")
    boots = bootstrap_means(diff, groups, n_boot, seed)
    return float(np.mean(boots < 0) + 0.5 * np.mean(boots == 0))


def score(est: np.ndarray, ref: np.ndarray, n_ref: int, groups=None, n_boot: int = 2000, seed: int = 0) -> dict:
    mae, lo, hi = mae_ci(est, ref, groups, n_boot, seed)
    return {
        "n_states": int(len(ref)),
        "n_problems": int(len(np.unique(groups))) if groups is not None else int(len(ref)),
        "mae": mae, "mae_ci_low": lo, "mae_ci_high": hi,
        "rmse": rmse(est, ref),
        "debiased_mse": debiased_mse(est, ref, n_ref),
        "ref_noise": ref_noise(ref, n_ref),
        "oracle_floor": oracle_floor(ref, n_ref),
    }
