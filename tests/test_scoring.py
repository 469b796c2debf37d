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


def test_ref_noise_constant_value():
    # all states have true value 0.3: ref_noise = E|Bin(20, .3)/20 - .3|
    rng = np.random.default_rng(0)
    ref = rng.binomial(20, 0.3, 4000) / 20
    k = np.arange(21)
    exact = float((binom.pmf(k, 20, 0.3) * np.abs(k / 20 - 0.3)).sum())
    assert scoring.ref_noise(ref, 20) == pytest.approx(exact, abs=0.005)


def test_deterministic_values_have_no_noise():
    ref = np.array([0.0] * 50 + [1.0] * 50)
    assert scoring.ref_noise(ref, 20) < 0.01
    assert scoring.oracle_floor(ref, 20) < 0.01


def test_ref_noise_is_not_a_floor_at_small_values():
    # the case: V = 0.01 under 20 draws. Predicting V scores E|X/20 - .01| = 0.0164,
    # predicting the median (0) scores E[X/20] = 0.01: below "ref_noise", so it is no floor
    k = np.arange(21)
    pmf = binom.pmf(k, 20, 0.01)
    assert float((pmf * np.abs(k / 20 - 0.01)).sum()) == pytest.approx(0.0164, abs=5e-4)
    assert float((pmf * k / 20).sum()) == pytest.approx(0.0100, abs=1e-6)
    table_noise = scoring._abs_dev_table(20, (0.01,))[0]
    table_oracle = scoring._oracle_table(20, (0.01,))[0]
    assert table_noise == pytest.approx(0.0164, abs=5e-4)
    assert table_oracle == pytest.approx(0.0100, abs=1e-6)


def test_oracle_floor_bounds_every_predictor_that_knows_v():
    # true values known; the best predictor of a 20-draw reference given V is a median of Bin(20, V)/20.
    # No constant shift of V, and not V itself, beats the oracle floor in expectation (here: on 20000 states).
    rng = np.random.default_rng(1)
    v = rng.beta(0.5, 2.0, 20000)
    ref = rng.binomial(20, v) / 20
    floor = scoring.oracle_floor(ref, 20)
    med = np.array([np.argmax(binom.cdf(np.arange(21), 20, x) >= 0.5) / 20 for x in v])
    assert np.abs(med - ref).mean() == pytest.approx(floor, abs=0.004)   # the floor is what the oracle scores
    for pred in (v, np.clip(v - 0.02, 0, 1), np.clip(v + 0.02, 0, 1), np.full_like(v, np.median(ref))):
        assert np.abs(pred - ref).mean() > floor - 0.004
    assert scoring.ref_noise(ref, 20) > floor                            # predicting V is worse than the oracle


def test_paired_better():
    a = np.full(50, 0.1)
    b = np.full(50, 0.3)
    assert scoring.paired_better(a, b, n_boot=200) == 1.0
    assert scoring.paired_better(b, a, n_boot=200) == 0.0


def test_score_fields():
    s = scoring.score(np.array([0.5, 0.5]), np.array([0.5, 0.0]), 20, np.array(["a", "a"]), 100, 0)
    assert s["n_states"] == 2 and s["n_problems"] == 1 and s["mae"] == pytest.approx(0.25)
