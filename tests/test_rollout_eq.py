"""k_eq, the rollout-equivalent (sveb.score.rollout_eq): hand-computed values, MCS@k of independent draws reads
about its own k, estimators with a known error variance get the k the formula gives, the Fieller interval covers,
and a debiased MSE at or below 0 is an open interval, not a number."""

import math

import numpy as np
import pytest

from sveb.core import metrics
from sveb.score.rollout_eq import k_eq, ratio_fieller, sq_err_unbiased, v1v_unbiased


def test_hand_computed():
    # n = 4, ref 1/4 and 3/4: u = (3/16)(4/3) = 1/4 each; f = 1, 0: d = (3/4)^2 - (3/16)/3 = 1/2 each; k = 1/2
    ref, est = np.array([0.25, 0.75]), np.array([1.0, 0.0])
    assert v1v_unbiased(ref, 4) == pytest.approx([0.25, 0.25])
    assert sq_err_unbiased(est, ref, 4) == pytest.approx([0.5, 0.5])
    assert k_eq(est, ref, 4)["k_eq"] == pytest.approx(0.5)


def test_unbiased_pieces():
    """m(n-m)/(n(n-1)) is unbiased for V(1-V) and the debiased square for (f-V)^2: exact expectations."""
    from scipy.stats import binom
    n, v, f = 7, 0.3, 0.55
    m = np.arange(n + 1)
    w = binom.pmf(m, n, v)
    assert w @ v1v_unbiased(m / n, n) == pytest.approx(v * (1 - v))
    assert w @ sq_err_unbiased(np.full(n + 1, f), m / n, n) == pytest.approx((f - v) ** 2)


def _data(rng, problems=400, per=4, n=20):
    v = np.clip(np.repeat(rng.beta(0.7, 0.7, problems), per) + rng.normal(0, 0.1, problems * per), 0.02, 0.98)
    return v, rng.binomial(n, v) / n, np.repeat(np.arange(problems), per)


def test_mcs_k_of_independent_draws_reads_its_own_k():
    rng = np.random.default_rng(0)
    v, ref, g = _data(rng)
    for k in (1, 2, 3, 4, 8):
        r = k_eq(rng.binomial(k, v) / k, ref, 20, g)
        assert r["k_eq_ci_low"] < k < r["k_eq_ci_high"], (k, r)
        assert abs(r["k_eq"] / k - 1) < 0.25


@pytest.mark.parametrize("sd", [0.05, 0.1, 0.2, 0.4])
def test_known_error_variance(sd):
    """f = V + e with Var e = sd^2, independent of V: k_eq = E[V(1-V)] / sd^2."""
    rng = np.random.default_rng(int(sd * 100))
    v, ref, g = _data(rng, problems=600)
    truth = float(np.mean(v * (1 - v))) / sd ** 2
    r = k_eq(v + rng.normal(0, sd, len(v)), ref, 20, g)
    assert r["k_eq_ci_low"] < truth < r["k_eq_ci_high"], (truth, r)


def test_fieller_interval_covers_at_its_level():
    """300 seeded datasets of 30 problems x 4 states, MCS@2: the 95% interval covers k = 2 in 91-99% of them."""
    rng = np.random.default_rng(5)
    cover = []
    for _ in range(300):
        v, ref, g = _data(rng, problems=30)
        r = k_eq(rng.binomial(2, v) / 2, ref, 20, g)
        cover.append(r["k_eq_ci_low"] <= 2 <= r["k_eq_ci_high"])
    assert 0.91 <= np.mean(cover) <= 0.99


def test_exact_values_are_worth_more_than_any_finite_k_shown_as_open_interval():
    rng = np.random.default_rng(2)
    v, ref, g = _data(rng)
    r = k_eq(v, ref, 20, g)  # the true values: debiased MSE has expectation 0
    assert r["k_eq_ci_high"] == math.inf and r["k_eq_ci_low"] > 20
    if r["k_eq"] == math.inf:
        assert metrics.fmt_ci(r, "k_eq") == f">{metrics.fmt(r['k_eq_ci_low'], 'k_eq')}"
    else:
        assert metrics.fmt_ci(r, "k_eq").endswith(", ∞]")
    assert metrics.fmt(math.inf, "k_eq") == "∞" and metrics.csv_cell("k_eq", math.inf) == "inf"


def test_undefined_cases():
    assert math.isnan(k_eq(np.array([0.3, 0.6]), np.array([0.0, 1.0]), 20, np.array([0, 1]))["k_eq"])  # no V(1-V)
    r = k_eq(np.array([0.3, 0.6]), np.array([0.5, 0.4]), 20, np.array([0, 0]))  # one cluster: no interval
    assert np.isfinite(r["k_eq"]) and math.isnan(r["k_eq_ci_low"]) and math.isnan(r["k_eq_ci_high"])
    rho, lo, hi = ratio_fieller(np.array([1.0, -1.0, 0.5]), np.array([0.01, 0.0, 0.02]), np.arange(3))
    assert lo == -math.inf and hi == math.inf  # the denominator is not significantly above 0
