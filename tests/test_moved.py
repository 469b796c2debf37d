"""sveb.score.moved: ΔV between two policies' references of the same states, and how estimates of it track it."""

import numpy as np
import pytest

from sveb.score.moved import compare, tracking, value_shift


def test_value_shift_by_hand():
    dv, se = value_shift([0, 1, 0, 1], [1, 1, 0, 1])  # paired differences 1, 0, 0, 0: sd 0.5
    assert dv == pytest.approx(0.25) and se == pytest.approx(0.5 / 2)
    dv, se = value_shift([0, 1], [1, 1, 0])  # unequal counts: variances 1/2 and 1/3 over their counts
    assert dv == pytest.approx(2 / 3 - 1 / 2) and se == pytest.approx(np.sqrt(1 / 4 + 1 / 9))
    with pytest.raises(ValueError, match="at least 2 draws"):
        value_shift([1], [0, 1])


def test_tracking_of_a_perfect_a_blind_and_a_half_estimate():
    rng = np.random.default_rng(0)
    dv, se = rng.normal(0, 0.2, 50), np.full(50, 0.05)
    same = tracking(dv, se, dv)
    assert same["mae"] == 0 and same["slope"] == pytest.approx(1) and same["mse_debiased"] == pytest.approx(-0.0025)
    assert same["slope_se"] == pytest.approx(0, abs=1e-12)
    blind = tracking(dv, se, np.zeros(50))
    assert blind["slope"] == 0 and blind["mae"] == pytest.approx(np.mean(np.abs(dv)))
    half = tracking(dv, se, 0.5 * dv + 0.1)
    assert half["slope"] == pytest.approx(0.5) and half["slope_corrected"] > 0.5
    assert np.isnan(tracking(dv, np.full(50, 1.0), dv)["slope_corrected"])  # noise swamps ΔV's spread
    with pytest.raises(ValueError):
        tracking(dv[:2], se[:2], dv[:2])


def test_on_simulated_draws_the_corrected_slope_and_mse_recover_the_truth():
    """States with true ΔV; 20 Bernoulli draws under each policy (independent); an estimator that sees the true
    ΔV plus noise of its own (sd 0.1). The raw slope is attenuated by the reference noise; the corrected one is 1,
    and the debiased squared error is the estimator's own noise variance."""
    rng = np.random.default_rng(1)
    n = 3000
    p_old = rng.uniform(0.2, 0.8, n)
    true = np.clip(p_old + rng.normal(0, 0.15, n), 0, 1) - p_old
    old = {f"s{i}": (rng.random(20) < p_old[i]).astype(float) for i in range(n)}
    new = {f"s{i}": (rng.random(20) < p_old[i] + true[i]).astype(float) for i in range(n)}
    est_old = {"good": {f"s{i}": 0.5 for i in range(n)}, "grpo": {f"s{i}": p_old[i] for i in range(n)}}
    est_new = {"good": {f"s{i}": 0.5 + true[i] + rng.normal(0, 0.1) for i in range(n)},
               "grpo": {f"s{i}": p_old[i] for i in range(n)}}
    out = compare(old, new, est_old, est_new, problem_of={f"s{i}": f"p{i // 4}" for i in range(n)})
    st = out["states"]
    assert st["n"] == n and st["unmatched"] == 0 and st["dv_mean"] == pytest.approx(true.mean(), abs=0.01)
    assert 0.3 < st["reliability"] < 0.8
    good, grpo = out["estimators"]
    assert good["estimator"] == "good" and good["slope"] < 0.85 and good["slope_corrected"] == pytest.approx(1, abs=0.1)
    assert good["slope"] == pytest.approx(st["reliability"], abs=0.08)
    assert good["mse_debiased"] == pytest.approx(0.01, abs=0.003)
    assert grpo["slope"] == 0 and grpo["mae"] > good["mae"]
    assert 0 < good["slope_se"] < 0.05
    # the mean's SE is clustered by problem: here states are independent, so it is about sd/√n
    assert st["dv_mean_se"] == pytest.approx(st["dv_sd"] / np.sqrt(n), rel=0.15)


def test_the_mean_shift_se_counts_a_problem_once():
    """Four copies of each state under one problem: the clustered SE is the one-copy SE, not half of it."""
    rng = np.random.default_rng(2)
    old = {f"s{i}": list(rng.random(8) < 0.5) for i in range(40)}
    new = {f"s{i}": list(rng.random(8) < 0.6) for i in range(40)}
    one = compare(old, new, {}, {}, {f"s{i}": f"p{i}" for i in range(40)})["states"]
    four = compare({f"{k}-{c}": v for k, v in old.items() for c in range(4)},
                   {f"{k}-{c}": v for k, v in new.items() for c in range(4)}, {}, {},
                   {f"{k}-{c}": k for k in old for c in range(4)})["states"]
    assert four["dv_mean"] == pytest.approx(one["dv_mean"])
    assert four["dv_mean_se"] == pytest.approx(one["dv_mean_se"])


def test_only_shared_states_count():
    old = {"a": [0, 1], "b": [1, 1], "c": [0, 0], "d": [1, 0], "x": [1, 1]}
    new = {"a": [1, 1], "b": [1, 0], "c": [0, 1], "d": [1, 1], "y": [0, 0]}
    est = {"e": {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}, "few": {"a": 0.0}}
    out = compare(old, new, est, {"e": {"a": 0.5, "b": 0.1, "c": 0.6, "d": 0.4, "y": 0.0}, "few": {"a": 1.0}})
    assert out["states"]["n"] == 4 and out["states"]["unmatched"] == 2
    assert [r["estimator"] for r in out["estimators"]] == ["e"] and out["estimators"][0]["n"] == 4
    with pytest.raises(ValueError, match="share 1 states"):
        compare({"a": [0, 1]}, {"a": [1, 1]}, {}, {})
