"""sveb.score.power: the CR1 standard error, the minimum detectable Δ and Cochran's Q, on cases with known answers."""

import numpy as np
import pytest
from scipy.stats import chi2
from scipy.stats import t as student_t

from sveb.score import power, scoring


def test_cluster_se_is_the_one_the_t_test_divides_by():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(30), 4)
    x = rng.normal(0.1, 1, 30)[groups] + rng.normal(0, 0.5, 120)
    m, se, g = scoring.cluster_se(x, groups)
    assert g == 30 and m == pytest.approx(x.mean())
    assert scoring.cluster_t_test(x, groups) == pytest.approx(2 * student_t.sf(abs(m) / se, g - 1), rel=1e-9)
    # one state per cluster: the paired t-test's standard error
    y = rng.normal(0, 1, 40)
    assert scoring.cluster_se(y)[1] == pytest.approx(y.std(ddof=1) / np.sqrt(40))


def test_mde_formula_and_its_edges():
    assert power.mde(0.01, 49, 0.05, 1) == pytest.approx(
        (student_t.ppf(0.975, 49) + student_t.ppf(0.8, 49)) * 0.01)
    assert power.mde(0.01, 49, 0.05, 9) > power.mde(0.01, 49, 0.05, 1)  # a larger family: a stricter level
    assert np.isnan(power.mde(0.0, 49)) and np.isnan(power.mde(float("nan"), 49)) and np.isnan(power.mde(0.1, 0))


@pytest.mark.parametrize("m", [1, 9])
def test_a_true_delta_equal_to_the_mde_is_detected_about_80_percent_of_the_time(m):
    """Known truth: 50 clusters of 4 states, cluster effects N(0, 1) and state noise N(0, 1); the true Δ is
    the MDE computed from the true standard error. The CR1 t-test at alpha / m rejects in about 80% of 2000
    seeded datasets (binomial sd 0.9%)."""
    g, k, sims = 50, 4, 2000
    groups = np.repeat(np.arange(g), k)
    true_se = np.sqrt((1 + 1 / k) / g)  # sd of a cluster mean over sqrt(G)
    delta = power.mde(true_se, g - 1, 0.05, m)
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(sims):
        x = delta + rng.normal(0, 1, g)[groups] + rng.normal(0, 1, g * k)
        hits += scoring.cluster_t_test(x, groups) < 0.05 / m
    assert hits / sims == pytest.approx(0.80, abs=0.035)


def test_cochran_q_identical_deltas_give_q_zero_p_one():
    res = power.cochran_q([0.01, 0.01, 0.01, 0.01, 0.01], [0.002, 0.004, 0.003, 0.01, 0.005])
    assert res["q"] == pytest.approx(0.0, abs=1e-20) and res["p"] == pytest.approx(1.0)
    assert res["i2"] == 0.0 and res["df"] == 4 and res["pooled"] == pytest.approx(0.01)


def test_cochran_q_by_hand():
    # Δ = 0 and 1, se 1 each: pooled 0.5, Q = 0.25 + 0.25, df 1
    res = power.cochran_q([0.0, 1.0], [1.0, 1.0])
    assert res["pooled"] == 0.5 and res["q"] == pytest.approx(0.5) and res["p"] == pytest.approx(chi2.sf(0.5, 1))
    assert res["i2"] == 0.0 and res["pooled_se"] == pytest.approx(np.sqrt(0.5))
    # weights 1/se²: Δ = (0, 3), se = (1, 2) -> w = (1, 1/4), pooled 0.6, Q = 0.36 + 0.25 * 5.76 = 1.8
    res = power.cochran_q([0.0, 3.0], [1.0, 2.0])
    assert res["pooled"] == pytest.approx(0.6) and res["q"] == pytest.approx(1.8)
    # I² = (Q - df) / Q: Q = 10 on 4 df -> 0.6
    d = np.array([0, 0, 0, 0, 1.0])
    se = np.full(5, np.sqrt(0.4 / 1.0))  # Q = (1 - 0.2)²/0.4 + 4 * 0.2²/0.4 = 1.6 + 0.4 = 2.0
    assert power.cochran_q(d, se)["q"] == pytest.approx(2.0)
    res = power.cochran_q(d, se / np.sqrt(5))
    assert res["q"] == pytest.approx(10.0) and res["i2"] == pytest.approx(0.6)
    # entries without a usable se are left out; below two entries there is no test
    assert power.cochran_q([0.0, 1.0, 5.0], [1.0, 1.0, 0.0])["k"] == 2
    assert np.isnan(power.cochran_q([0.1], [0.1])["p"])


def _domains(rng, deltas, g=50, k=4):
    """Per domain: the paired Δ of squared error's CR1 estimate and se on simulated clustered differences."""
    groups = np.repeat(np.arange(g), k)
    out = []
    for d in deltas:
        x = d + rng.normal(0, 0.02, g)[groups] + rng.normal(0, 0.02, g * k)
        m, se, _ = scoring.cluster_se(x, groups)
        out.append((m, se))
    return out


def test_q_rejects_at_its_level_when_every_domain_has_the_same_true_delta():
    """Known truth: five domains, one true Δ. Over 1000 seeded datasets, Q's rejection rate at 0.05 is near
    0.05 (binomial sd 0.7%; the se is estimated from 50 clusters, so a little above is expected)."""
    rng = np.random.default_rng(11)
    sims = 1000
    rejections = 0
    for _ in range(sims):
        d, se = zip(*_domains(rng, [0.003] * 5))
        rejections += power.cochran_q(d, se)["p"] < 0.05
    assert 0.03 <= rejections / sims <= 0.08


def test_q_detects_a_domain_that_differs():
    rng = np.random.default_rng(12)
    d, se = zip(*_domains(rng, [0.0, 0.0, 0.0, 0.0, 0.02]))
    res = power.cochran_q(d, se)
    assert res["p"] < 1e-4 and res["i2"] > 0.8


def test_interaction_holm_over_the_estimators_of_one_protocol():
    cells = []
    for protocol in ("held-out", "in-group"):
        for i, dom in enumerate(["a", "b", "c"]):
            cells.append({"protocol": protocol, "estimator": "same", "domain": dom, "delta_sq": 0.01,
                          "delta_sq_se": 0.005})
            cells.append({"protocol": protocol, "estimator": "varies", "domain": dom, "delta_sq": 0.05 * i,
                          "delta_sq_se": 0.005})
    rows = power.interaction(cells)
    assert [(r["protocol"], r["estimator"]) for r in rows] == [
        ("held-out", "same"), ("held-out", "varies"), ("in-group", "same"), ("in-group", "varies")]
    by = {(r["protocol"], r["estimator"]): r for r in rows}
    same, varies = by[("held-out", "same")], by[("held-out", "varies")]
    assert same["q"] == pytest.approx(0, abs=1e-12) and same["p_holm"] == pytest.approx(1.0) and not same["differs"]
    assert varies["df"] == 2 and varies["differs"]
    assert varies["p_holm"] == pytest.approx(min(1.0, 2 * varies["p"]))  # the smaller p of two: times 2


def test_power_inverts_the_mde_and_matches_a_simulated_t_test():
    assert power.power(0.0, 0.01, 200) == pytest.approx(0.05, abs=1e-9)  # no effect: the test's level
    assert power.power(power.mde(0.01, 200), 0.01, 200) == pytest.approx(0.80, abs=0.01)
    assert power.power(-0.003, 0.001, 99) == power.power(0.003, 0.001, 99)  # two-sided
    assert power.power(0.002, 0.001, 99) < power.power(0.003, 0.001, 99) < power.power(0.003, 0.0008, 99)
    assert np.isnan(power.power(0.01, 0.0, 49)) and np.isnan(power.power(0.01, 0.01, 0))
    # a simulated t-test of n normal draws (se = sd / sqrt(n), df = n - 1) rejects as often as it says
    rng = np.random.default_rng(3)
    n, sd, delta = 40, 1.0, 0.4
    x = rng.normal(delta, sd, (20000, n))
    t = x.mean(1) / (x.std(1, ddof=1) / np.sqrt(n))
    hit = np.mean(np.abs(t) > student_t.ppf(0.975, n - 1))
    assert hit == pytest.approx(power.power(delta, sd / np.sqrt(n), n - 1), abs=0.01)
