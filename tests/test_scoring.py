import numpy as np
import pytest
from scipy.stats import binom, ttest_1samp
from scipy.stats import t as student_t

from sveb.score import scoring


def test_mae_rmse_hand_computed():
    est = np.array([0.5, 0.2, 1.0])
    ref = np.array([0.4, 0.5, 1.0])
    mae, lo, hi = scoring.mae_ci(est, ref)
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


def test_interval_is_clustered_and_independent_of_label_order():
    # every cluster sums to 10: clustered, the mean is exactly 5 (zero-width interval); by state it is not
    x = np.array([0, 10, 3, 7, 5, 5.0])
    g = np.array(["a", "a", "b", "b", "c", "c"])
    m, lo, hi = scoring.mean_ci(x, g)
    assert (m, lo, hi) == (5.0, 5.0, 5.0)
    m, lo, hi = scoring.mean_ci(x)
    assert lo < 5 < hi
    # relabelling clusters (another sort order) changes nothing: no resampling, no order
    rng = np.random.default_rng(0)
    x, g = rng.normal(size=60), np.repeat(np.arange(20), 3)
    perm = rng.permutation(20)
    assert np.allclose(scoring.mean_ci(x, g), scoring.mean_ci(x, np.array([f"z{perm[i]}" for i in g])), atol=1e-12)


def test_interval_and_test_are_one_procedure():
    # the 95% interval excludes 0 exactly when the p is below 0.05, on data near the boundary
    rng = np.random.default_rng(11)
    agree = 0
    for _ in range(400):
        g = np.repeat(np.arange(15), rng.integers(1, 4, 15))
        x = rng.normal(rng.normal(0, 0.4), 1, len(g))
        m, lo, hi = scoring.mean_ci(x, g)
        p = scoring.cluster_t_test(x, g)
        assert (lo > 0 or hi < 0) == (p < 0.05)
        agree += 1
    assert agree == 400


def test_interval_covers_the_truth_at_its_level():
    # known truth: clustered data (a shared cluster effect) with mean 0.3; the 95% CR1 interval covers 0.3
    # in about 95% of 2,000 seeded datasets (a state-level interval would cover far less)
    rng = np.random.default_rng(4)
    cover = cover_naive = 0
    n = 2000
    for _ in range(n):
        g = np.repeat(np.arange(40), 4)
        x = 0.3 + rng.normal(0, 1, 40)[g] + rng.normal(0, 0.5, len(g))
        _, lo, hi = scoring.mean_ci(x, g)
        cover += lo <= 0.3 <= hi
        _, lo, hi = scoring.mean_ci(x)
        cover_naive += lo <= 0.3 <= hi
    assert 0.93 <= cover / n <= 0.97
    assert cover_naive / n < 0.85


def test_holm_interval_agrees_with_the_holm_verdict():
    rng = np.random.default_rng(8)
    for _ in range(200):
        g = np.repeat(np.arange(30), 2)
        ds = [rng.normal(rng.normal(0, 0.3), 1, len(g)) for _ in range(5)]
        rows = [scoring.cluster_se(d, g) for d in ds]
        ps = [scoring.cluster_t_test(d, g) for d in ds]
        adj = scoring.holm(ps, m=7)  # a declared family of 7, 5 of them tested
        for (m, se, k), p, pa in zip(rows, ps, adj):
            lo, hi = scoring.holm_interval(m, se, k - 1, p, pa)
            assert (lo > 0 or hi < 0) == (pa < 0.05)
            plain = scoring.t_interval(m, se, k)
            assert lo <= plain[0] and hi >= plain[1]  # never narrower than the unadjusted interval


def test_holm_counts_declared_members_not_tested_as_p_one():
    assert np.allclose(scoring.holm([0.01, 0.02], m=4), [0.04, 0.06])
    assert np.allclose(scoring.holm([0.01, 0.02]), [0.02, 0.02])
    assert np.allclose(scoring.holm([0.01, 0.02], m=1), [0.02, 0.02])  # never fewer than the tested ones


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


def test_score_fields():
    s = scoring.score(np.array([0.5, 0.5]), np.array([0.5, 0.0]), 20, np.array(["a", "a"]))
    assert s["n_states"] == 2 and s["n_problems"] == 1 and s["mae"] == pytest.approx(0.25)
    assert s["bias"] == pytest.approx(0.25) and np.isnan(s["calib_slope"])  # constant estimates: no slope
    assert np.isnan(s["sign_agreement"]) and s["sign_pairs"] == 0           # no rollout/t given


# --- paired squared-error difference, cluster-robust test, Holm, verdicts ---

def test_cluster_t_test_hand_computed():
    # d = 1,2,3,4 in clusters a,a,b,b: sums 3,7, mean 2.5, residual sums -2,+2,
    # Var = 2/1 * 8 / 16 = 1, t = 2.5 on 1 df
    p = scoring.cluster_t_test(np.array([1.0, 2, 3, 4]), np.array(["a", "a", "b", "b"]))
    assert p == pytest.approx(2 * student_t.sf(2.5, 1))
    assert np.isnan(scoring.cluster_t_test(np.array([1.0, 2]), np.array(["a", "a"])))  # one cluster
    assert scoring.cluster_t_test(np.full(6, 0.2), np.arange(6)) == 0.0                 # exact difference


def test_cluster_t_test_with_singletons_is_the_paired_t_test():
    rng = np.random.default_rng(2)
    d = rng.normal(0.1, 1, 40)
    assert scoring.cluster_t_test(d) == pytest.approx(ttest_1samp(d, 0).pvalue)


def test_paired_sq_diff_hand_computed():
    a, b, r = np.array([0.5, 0.2]), np.array([0.4, 0.6]), np.array([0.3, 0.2])
    out = scoring.paired_sq_diff(a, b, r, np.array([0, 1]))
    # (0.04 - 0.01), (0 - 0.16)
    assert out["delta_sq"] == pytest.approx((0.03 - 0.16) / 2)
    assert out["delta_sq_ci_low"] <= out["delta_sq"] <= out["delta_sq_ci_high"]


def test_reference_noise_cancels_in_the_paired_difference():
    # true values known: the paired Δ of squared error against a 20-draw reference estimates the
    # difference of *true* MSEs
    rng = np.random.default_rng(5)
    v = rng.beta(0.7, 1.5, 30000)
    ref = rng.binomial(20, v) / 20
    a, b = np.clip(v + 0.08, 0, 1), np.clip(0.8 * v + 0.1, 0, 1)
    truth = np.mean((a - v) ** 2 - (b - v) ** 2)
    assert scoring.paired_sq_diff(a, b, ref)["delta_sq"] == pytest.approx(truth, abs=1e-3)


def test_shrinking_toward_zero_wins_mae_but_not_the_paired_difference():
    # the example: V = 0.02, 20-draw reference. Predicting 0 lowers expected MAE by ~0.007
    # (0.020 vs 0.0267) but raises the squared error by V^2 = 0.0004.
    rng = np.random.default_rng(7)
    problems = np.repeat(np.arange(300), 4)
    v = np.full(len(problems), 0.02)
    ref = rng.binomial(20, v) / 20
    truth, shrunk = v, np.zeros_like(v)
    assert np.abs(shrunk - ref).mean() < np.abs(truth - ref).mean() - 0.004   # MAE: shrinking "wins"
    out = scoring.paired_sq_diff(shrunk, truth, ref, problems)
    assert out["delta_sq"] == pytest.approx(0.0004, abs=1.5e-4)
    assert out["delta_sq_ci_low"] > 0 and out["p_delta"] < 0.05               # it loses here
    assert scoring.verdict(out["delta_sq"], scoring.holm([out["p_delta"]])[0]) == "worse"


def _null_rejections(groups_for_test, n_sims=1500):
    """Share of simulated datasets where two estimators of equal true MSE are declared different. Errors
    share a per-problem component (states of one problem are correlated), as real estimates do."""
    rng = np.random.default_rng(11)
    n_prob, per = 40, 5
    problems = np.repeat(np.arange(n_prob), per)
    hits = 0
    for _ in range(n_sims):
        v = np.repeat(rng.beta(1, 2, n_prob), per)
        ref = rng.binomial(20, v) / 20
        a, b = (np.clip(v + np.repeat(rng.normal(0, 0.15, n_prob), per) + rng.normal(0, 0.05, len(v)), 0, 1)
                for _ in range(2))
        d = (a - ref) ** 2 - (b - ref) ** 2
        hits += scoring.cluster_t_test(d, problems if groups_for_test else None) < 0.05
    return hits / n_sims


def test_paired_test_rejects_at_the_nominal_rate_under_the_null():
    rate = _null_rejections(True)
    assert 0.035 <= rate <= 0.07, rate
    # the same data tested as if states were independent rejects far too often: clustering matters
    assert _null_rejections(False, 600) > 0.12


def test_holm_hand_computed():
    # sorted 0.01, 0.02, 0.04, 0.30 -> 4*0.01, 3*0.02, max(0.06, 2*0.04), max(0.08, 0.30)
    adj = scoring.holm([0.04, 0.01, 0.30, 0.02])
    assert np.allclose(adj, [0.08, 0.04, 0.30, 0.06])
    adj = scoring.holm([0.5, float("nan"), 0.02])  # NaN is not in the family: m = 2
    assert adj[0] == pytest.approx(0.5) and np.isnan(adj[1]) and adj[2] == pytest.approx(0.04)
    assert np.allclose(scoring.holm([0.6, 0.7]), [1.0, 1.0])  # capped at 1, monotone
    assert len(scoring.holm([])) == 0


def test_verdicts():
    assert scoring.verdict(-0.01, 0.01) == "better"
    assert scoring.verdict(0.01, 0.049) == "worse"
    assert scoring.verdict(-0.01, 0.05) == "no difference"
    assert scoring.verdict(float("nan"), 0.01) == "n/a" and scoring.verdict(0.1, float("nan")) == "n/a"


# --- bias, calibration, ranking ---

def test_bias_and_calibration_slope():
    est, ref = np.array([0.2, 0.4, 0.6]), np.array([0.1, 0.5, 0.5])
    b, lo, hi = scoring.bias_ci(est, ref)
    assert b == pytest.approx(0.1 / 3) and lo <= b <= hi
    # slope of ref on est: cov = (-0.2*-0.267 + 0 + 0.2*0.133) / var (0.08)
    assert scoring.calibration_slope(est, ref) == pytest.approx(np.polyfit(est, ref, 1)[0])
    rng = np.random.default_rng(3)
    v = rng.uniform(0, 1, 20000)
    ref = rng.binomial(20, v) / 20
    assert scoring.calibration_slope(v, ref) == pytest.approx(1.0, abs=0.03)        # calibrated
    assert scoring.calibration_slope(0.5 + 2 * (v - 0.5), ref) == pytest.approx(0.5, abs=0.02)  # too spread


def test_concordance_hand_computed():
    # problem a: refs 0.1, 0.5, 0.5 (the tied pair is skipped); est orders (0,1) right and (0,2) tied -> 0.75
    # problem b: refs 0.2, 0.8, est reversed -> 0; mean over problems 0.375
    est = np.array([0.1, 0.3, 0.1, 0.9, 0.2])
    ref = np.array([0.1, 0.5, 0.5, 0.2, 0.8])
    prob = np.array(["a", "a", "a", "b", "b"])
    assert scoring.concordance(est, ref, prob) == pytest.approx((0.75 + 0.0) / 2)
    assert np.isnan(scoring.concordance(est[:1], ref[:1], prob[:1]))
    # any increasing map of the estimates scores the same
    assert scoring.concordance(est ** 3, ref, prob) == scoring.concordance(est, ref, prob)


def test_step_sign_agreement_hand_computed():
    # rollout (p, 0): t=5 -> ref 0.2, t=9 -> ref 0.6 (up); est up -> 1
    # rollout (p, 1): t=9 ref 0.5, t=3 ref 0.9 (down from t=3 to t=9); est tie -> 1/2
    # rollout (q, 0): refs tie -> left out; (q, 1): a single state -> no pair. Same rollout_idx in
    # different problems is a different rollout.
    prob = np.array(["p", "p", "p", "p", "q", "q", "q"])
    roll = np.array([0, 0, 1, 1, 0, 0, 1])
    t = np.array([5, 9, 9, 3, 2, 4, 7])
    ref = np.array([0.2, 0.6, 0.5, 0.9, 0.3, 0.3, 0.5])
    est = np.array([0.1, 0.2, 0.4, 0.4, 0.1, 0.9, 0.0])
    share, pairs = scoring.step_sign_agreement(est, ref, prob, roll, t)
    assert pairs == 2 and share == pytest.approx(0.75)
    share, pairs = scoring.step_sign_agreement(est[4:], ref[4:], prob[4:], roll[4:], t[4:])
    assert pairs == 0 and np.isnan(share)


def test_sign_agreement_knows_true_values():
    # an estimator that knows V agrees more often than chance; a constant one scores exactly 1/2
    rng = np.random.default_rng(4)
    n = 4000
    prob, roll = np.repeat(np.arange(n // 2), 2), np.zeros(n, int)
    t = np.tile([10, 50], n // 2)
    v = rng.uniform(0, 1, n)
    ref = rng.binomial(20, v) / 20
    assert scoring.step_sign_agreement(v, ref, prob, roll, t)[0] > 0.75
    assert scoring.step_sign_agreement(np.full(n, 0.3), ref, prob, roll, t)[0] == 0.5


def test_own_shift_stats():
    s = scoring.own_shift_stats(np.array([0.0, 0.1, 0.2, float("nan"), 0.3]))
    assert s["own_share"] == pytest.approx(0.15) and s["own_shift_max"] == pytest.approx(0.3)
    assert s["own_shift_p95"] == pytest.approx(np.quantile([0, 0.1, 0.2, 0.3], 0.95))
    assert all(np.isnan(x) for x in scoring.own_shift_stats(np.full(3, np.nan)).values())
