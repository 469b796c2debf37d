import numpy as np
import pytest
from scipy.stats import binom

from sveb import scoring


def test_mae_rmse_hand_computed():
    est = np.array([0.5, 0.2, 1.0])
    ref = np.array([0.4, 0.5, 1.0])
    mae, lo, hi = scoring.mae_ci(est, ref, n_boot=500, seed=1)
    assert mae == pytest.approx((0.1 + 0.3 + 0.0) / 3)
    assert lo <= mae <= hi
    assert scoring.rmse(est, ref) == pytest.approx(np.sqrt((0.01 + 0.09) / 3))


def test_debiased_mse_hand_computed():
    est, ref = np.array([0.5]), np.array([0.25])
    # (0.25)^2 - 0.25*0.75/19
    assert scoring.debiased_mse(est, ref, 20) == pytest.approx(0.0625 - 0.1875 / 19)


def test_debiased_mse_is_unbiased_for_true_error():
    rng = np.random.default_rng(0)
    v = rng.uniform(0, 1, 20000)
    ref = rng.binomial(20, v) / 20
    est = np.clip(v + 0.1, 0, 1)
    assert scoring.debiased_mse(est, ref, 20) == pytest.approx(np.mean((est - v) ** 2), abs=2e-3)


def test_bootstrap_seeded_and_clustered():
    x = np.arange(10.0)
    g = np.repeat(np.arange(5), 2)
    a = scoring.bootstrap_means(x, g, 300, seed=3)
    b = scoring.bootstrap_means(x, g, 300, seed=3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, scoring.bootstrap_means(x, g, 300, seed=4))
    # every cluster sums to 10: a cluster bootstrap always gives 5, a state bootstrap would not
    x = np.array([0, 10, 3, 7, 5, 5.0])
    g = np.array(["a", "a", "b", "b", "c", "c"])
    assert np.allclose(scoring.bootstrap_means(x, g, 200, seed=0), 5.0)
    assert not np.allclose(scoring.bootstrap_means(x, None, 200, seed=0), 5.0)


def test_noise_floor_constant_value():
    # all states have true value 0.3: floor = E|Bin(20, .3)/20 - .3|
    rng = np.random.default_rng(0)
    ref = rng.binomial(20, 0.3, 4000) / 20
    k = np.arange(21)
    exact = float((binom.pmf(k, 20, 0.3) * np.abs(k / 20 - 0.3)).sum())
    assert scoring.noise_floor(ref, 20) == pytest.approx(exact, abs=0.005)


def test_noise_floor_deterministic_values_is_zero():
    ref = np.array([0.0] * 50 + [1.0] * 50)
    assert scoring.noise_floor(ref, 20) < 0.01


def test_paired_better():
    a = np.full(50, 0.1)
    b = np.full(50, 0.3)
    assert scoring.paired_better(a, b, n_boot=200) == 1.0
    assert scoring.paired_better(b, a, n_boot=200) == 0.0


def test_score_fields():
    s = scoring.score(np.array([0.5, 0.5]), np.array([0.5, 0.0]), 20, np.array(["a", "a"]), 100, 0)
    assert s["n_states"] == 2 and s["n_problems"] == 1 and s["mae"] == pytest.approx(0.25)
