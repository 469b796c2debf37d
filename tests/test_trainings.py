"""A trained estimator judged over several trainings (sveb.score.trainings): the two parts of the variance, the
known-truth coverage of the test over trainings, the naive test's under-coverage, and the wiring into the paired
verdicts (sveb.score.pooling.paired)."""

from pathlib import Path

import numpy as np
import pytest

from sveb.score import pooling, scoring
from sveb.score.replicates import default_params
from sveb.score.trainings import cr1_cov, naive, over_trainings, satterthwaite

MU = 0.3  # the true Δ of the simulations


def _simulate(rng, g=40, k=5, r=3, sd_problem=1.0, sd_state=1.0, sd_training=0.3, sd_noise=1.0):
    """d[r, i] = μ + a(problem) + e(state) + b(training) + c(training, state): a problem cluster effect shared by
    every training, a training effect shared by every state, and noise."""
    groups = np.repeat(np.arange(g), k)
    shared = rng.normal(0, sd_problem, g)[groups] + rng.normal(0, sd_state, g * k)
    d = MU + shared[None, :] + rng.normal(0, sd_training, r)[:, None] + rng.normal(0, sd_noise, (r, g * k))
    return d, groups


def _coverage(reps=1000, seed=56, **kw):
    rng = np.random.default_rng(seed)
    hits = np.zeros(2)
    for _ in range(reps):
        d, groups = _simulate(rng, **kw)
        for j, res in enumerate((over_trainings(d, groups), naive(d, groups))):
            hits[j] += res["delta_sq_ci_low"] <= MU <= res["delta_sq_ci_high"]
    return hits / reps


def test_cr1_cov_diagonal_is_the_cluster_variance_and_off_diagonal_the_cross_products():
    d = np.array([[1.0, 3.0, 2.0, 6.0], [0.0, 2.0, 4.0, 2.0]])
    groups = np.array(["a", "a", "b", "b"])
    cov = cr1_cov(d, groups)
    # by hand: N = 4, G = 2, row means 3 and 2; cluster sums (4, 8) and (2, 6); deviations (-2, 2) and (-2, 2)
    assert cov[0, 0] == pytest.approx(2 / 1 * (4 + 4) / 16) and cov[0, 1] == pytest.approx(2 / 1 * (4 + 4) / 16)
    assert np.sqrt(cov[0, 0]) == pytest.approx(scoring.cluster_se(d[0], groups)[1])
    assert np.sqrt(cov[1, 1]) == pytest.approx(scoring.cluster_se(d[1], groups)[1])


def test_the_variance_is_the_shared_part_plus_the_training_spread_over_r():
    rng = np.random.default_rng(1)
    d, groups = _simulate(rng, r=4)
    res = over_trainings(d, groups)
    cov = cr1_cov(d, groups)
    shared = (cov.sum() - np.trace(cov)) / 12
    spread = d.mean(1).var(ddof=1) / 4
    assert res["var_shared"] == pytest.approx(max(shared, 0)) and res["var_training"] == pytest.approx(spread)
    assert res["delta_sq_se"] == pytest.approx(np.sqrt(max(shared, 0) + spread))
    assert res["delta_sq"] == pytest.approx(d.mean()) and res["trainings"] == 4
    assert res["training_sd"] == pytest.approx(d.mean(1).std(ddof=1))
    assert res["df"] == pytest.approx(satterthwaite(max(shared, 0), 39, spread, 3))
    # the CI is the test inverted: it excludes 0 exactly when p < 0.05
    assert (res["delta_sq_ci_low"] > 0 or res["delta_sq_ci_high"] < 0) == (res["p_delta"] < 0.05)


def test_one_training_is_the_ordinary_cluster_test():
    rng = np.random.default_rng(2)
    d, groups = _simulate(rng, r=1)
    res = over_trainings(d, groups)
    a = rng.random(d.shape[1])
    plain = scoring.paired_sq_diff(a, np.zeros_like(a), np.zeros_like(a), groups)  # d = a²
    one = over_trainings((a ** 2)[None, :], groups)
    for c in ("delta_sq", "delta_sq_se", "p_delta", "delta_sq_ci_low", "delta_sq_ci_high"):
        assert one[c] == pytest.approx(plain[c])
    assert res["trainings"] == 1 and np.isnan(res["training_sd"])


def test_the_test_over_trainings_covers_the_true_delta_and_the_naive_one_does_not():
    """Known truth: 1,000 seeded simulations of 40 problems x 5 states x 3 trainings, a training effect of sd 0.3
    beside a shared SE of about 0.17. The 95% interval over trainings covers μ about 95% of the time; the naive
    one (the states' mean over trainings, CR1 over problems) misses the training effect."""
    ours, plain = _coverage()
    assert 0.92 <= ours <= 0.98
    assert plain < 0.89


def test_without_a_training_effect_the_test_is_not_needlessly_wide():
    ours, plain = _coverage(reps=600, seed=7, sd_training=0.0)
    assert 0.93 <= ours <= 0.98 and 0.93 <= plain <= 0.98


def _view(arrays: dict, params: dict, problem, ref):
    return pooling.View(Path("b"), "m", "number", "complete", [], problem, ref, np.full(len(ref), 0.5),
                        est={(n, pfp, "held-out"): a for (n, pfp), a in arrays.items()}, params=params)


def test_paired_tests_a_trained_estimator_over_its_trainings_and_flags_one_training():
    import json
    rng = np.random.default_rng(3)
    n = 200
    problem = np.repeat(np.arange(50), 4).astype(object)
    ref = rng.uniform(0.2, 0.8, n)
    base = ref + rng.normal(0, 0.2, n)
    d = json.loads(default_params("ppo-1"))
    arrays = {("grpo", "g"): base, ("hista", "h"): ref + rng.normal(0, 0.2, n)}
    params = {("grpo", "g"): "{}", ("hista", "h"): default_params("hista"), ("ppo-1", "s0"): default_params("ppo-1")}
    arrays[("ppo-1", "s0")] = ref + rng.normal(0, 0.15, n)
    one = pooling.paired(_view(arrays, params, problem, ref), "held-out")
    assert one[("ppo-1", "s0")]["trainings"] == 1 and one[("hista", "h")]["trainings"] is None
    for k, shift in ((1, 0.05), (2, -0.04)):  # two more trainings, each with its own offset
        arrays[("ppo-1", f"s{k}")] = ref + shift + rng.normal(0, 0.15, n)
        params[("ppo-1", f"s{k}")] = json.dumps({**d, "seed": k}, sort_keys=True)
    out = pooling.paired(_view(arrays, params, problem, ref), "held-out")
    r = out[("ppo-1", "s0")]
    per = np.stack([(arrays[("ppo-1", f"s{k}")] - ref) ** 2 - (base - ref) ** 2 for k in range(3)])
    want = over_trainings(per, problem)
    assert r["trainings"] == 3 and r["training_seeds"] == "0,1,2"
    assert r["delta_sq"] == pytest.approx(per.mean()) and r["delta_sq_se"] == pytest.approx(want["delta_sq_se"])
    assert r["training_sd"] == pytest.approx(per.mean(1).std(ddof=1))
    assert r["family"] == "main" and r["verdict"] == scoring.verdict(r["delta_sq"], r["p_holm"])
    assert out[("ppo-1", "s1")]["family"] == "alone" and out[("ppo-1", "s1")]["trainings"] == 1
    assert out[("hista", "h")]["p_delta"] == pytest.approx(one[("hista", "h")]["p_delta"])  # others untouched


def test_table4_names_the_trained_estimators_that_rest_on_one_training():
    from sveb.experiment.table4_files import one_training
    rows = [{"estimator": n, "verdict": v} for n, v in (("grpo", ""), ("ppo-1", "worse"), ("hista", "no difference"),
                                                       ("probe", "no difference"), ("ppo-1", "better"))]
    (line, blank) = one_training(rows)
    assert line.startswith("One training: ppo-1, probe (") and blank == ""
    assert one_training([{"estimator": "hista", "verdict": "better"}]) == []


def test_the_terminal_table_names_the_rows_that_rest_on_one_training():
    from rich.console import Console

    from sveb.present import leaderboard
    base = {c: None for c in leaderboard.columns()} | {"model": "m", "domain": "number", "protocol": "held-out",
                                                        "kind": "build", "build_fp": "b", "seeds": "0"}
    rows = [base | {"estimator": "grpo", "params_fp": "g", "params": "{}"},
            base | {"estimator": "ppo-1", "params_fp": "p", "params": default_params("ppo-1"), "trainings": 1},
            base | {"estimator": "hista", "params_fp": "h", "params": default_params("hista")}]
    console = Console(width=120, record=True)
    leaderboard.print_pivot(rows, console)
    shown = " ".join(console.export_text().split())
    assert "one training: ppo-1 (its test has no training spread)" in shown and "hista (" not in shown
