"""The metrics neighbouring benchmarks read (sveb.score.ranks, calibration, choices): known answers on small
hand-made data, and simulations where the truth is known: the noise-corrected metric is unbiased for (or, for
Spearman, much closer to) its value against the true values, the uncorrected one is not."""

import math

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from sveb.score import calibration as cal
from sveb.score import choices, ranks


def test_rank_known_answers():
    est, ref = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.25, 0.5, 1.0])
    r = ranks.rank_metrics(est, ref, 4, np.array([0, 0, 1, 1]))
    assert r["spearman_raw"] == pytest.approx(1.0) and r["kendall"] == pytest.approx(1.0)
    assert r["spearman_within_raw"] == pytest.approx(1.0) and r["kendall_within"] == pytest.approx(1.0)
    r = ranks.rank_metrics(est[::-1].copy(), ref, 4, np.array([0, 0, 1, 1]))
    assert r["kendall"] == pytest.approx(-1.0) and r["kendall_within"] == pytest.approx(-1.0)
    # 3 of 3 pairs of one problem: tau = (2 - 1) / 3 when one pair is discordant
    assert ranks.within("kendall", np.array([1., 3., 2.]), np.array([1., 2., 3.]), np.zeros(3)) == pytest.approx(1 / 3)
    assert ranks.corrected(0.5, 1.0) == pytest.approx(0.5)  # a noiseless reference changes nothing
    assert ranks.corrected(0.5, 0.5) > 0.5 and math.isnan(ranks.corrected(0.5, -0.1))


def test_within_problem_ranks_are_scipys_per_problem():
    rng = np.random.default_rng(0)
    for _ in range(20):
        g, e, r = rng.integers(0, 20, 120), rng.integers(0, 5, 120).astype(float), rng.integers(0, 4, 120) / 3
        for kind, fn in (("spearman", spearmanr), ("kendall", kendalltau)):
            per = [fn(e[g == k], r[g == k])[0] for k in np.unique(g)
                   if (g == k).sum() > 1 and np.ptp(e[g == k]) > 0 and np.ptp(r[g == k]) > 0]
            assert ranks.within(kind, e, r, g) == pytest.approx(np.mean(per))


def _noisy(rng, problems=100, per=4, n=20, a=0.7, sd=0.15):
    v = np.clip(np.repeat(rng.beta(a, a, problems), per) + rng.normal(0, 0.15, problems * per), 0, 1)
    f = v + rng.normal(0, sd, len(v))
    return v, f, rng.binomial(n, v) / n, np.repeat(np.arange(problems), per)


@pytest.mark.slow  # 150 simulated datasets per setting: seconds each
@pytest.mark.parametrize("a,sd", [(0.7, 0.15), (2.0, 0.1), (1.0, 0.05)])
def test_spearman_correction_removes_the_attenuation(a, sd):
    """150 seeded datasets: the raw Spearman with a 20-draw reference falls short of the Spearman with the true
    values by 0.03-0.06; the corrected one is within 0.01 of it (pooled) and within 0.03 within problem, where
    the raw one is 0.06-0.15 short."""
    rng = np.random.default_rng(int(a * 10 + sd * 100))
    gap = []
    for _ in range(150):
        v, f, ref, g = _noisy(rng, a=a, sd=sd)
        r = ranks.rank_metrics(f, ref, 20, g)
        truth, truth_w = spearmanr(f, v)[0], ranks.within("spearman", f, v, g)
        gap.append([r["spearman"] - truth, r["spearman_raw"] - truth, r["spearman_within"] - truth_w,
                    r["spearman_within_raw"] - truth_w])
    gap = np.array(gap).mean(0)
    assert abs(gap[0]) < 0.01 and gap[1] < -0.025
    assert abs(gap[2]) < 0.03 and gap[3] < -0.05


def test_reliability_is_unbiased_for_var_v_over_var_ref():
    rng = np.random.default_rng(3)
    v = rng.beta(0.8, 0.8, 500)
    got = [ranks.reliability(rng.binomial(20, v) / 20, 20) for _ in range(300)]
    truth = v.var(ddof=1) / (v.var(ddof=1) + np.mean(v * (1 - v)) / 20)
    assert abs(np.mean(got) - truth) < 3 * np.std(got) / np.sqrt(len(got)) + 1e-3


def test_calibration_known_answers():
    # one bin (every estimate 0.55): gap |0.55 - 0.5|; noise s = sum ref(1-ref)/(n-1) / n_b^2
    est, ref = np.full(4, 0.55), np.array([0.25, 0.75, 0.5, 0.5])
    c = cal.calibration(est, ref, 4)
    s = np.sum(ref * (1 - ref) / 3) / 16
    assert c["ece_raw"] == pytest.approx(0.05) and c["brier_reliability"] == pytest.approx(0.0025 - s)
    assert c["ece"] == 0.0  # the debiased square is below 0: nothing to tell from the noise
    assert c["brier"] == pytest.approx(np.mean((est - ref) ** 2 + ref * (1 - ref)))
    assert c["brier_resolution"] == pytest.approx(0.0)  # one bin: no resolution (w = 1 removes nothing)
    # a perfect two-bin estimator against a noiseless reference: no reliability term, resolution = spread
    c = cal.calibration(np.array([0.05, 0.05, 0.95, 0.95]), np.array([0.05, 0.05, 0.95, 0.95]), 10 ** 6)
    assert c["brier_reliability"] == pytest.approx(0, abs=1e-6) and c["brier_resolution"] == pytest.approx(0.2025)


@pytest.mark.slow  # 3,000 simulated references: seconds
def test_calibration_debiasing_is_unbiased_and_the_raw_one_is_not():
    """3,000 draws of an 8-draw reference over fixed states (true values known): the debiased reliability and
    resolution and the Brier score are unbiased within 3 Monte-Carlo standard errors; the plug-in reliability
    and resolution are more than 5 above."""
    rng = np.random.default_rng(1)
    v = rng.beta(0.8, 0.8, 300)
    f = np.clip(v + rng.normal(0.05, 0.15, 300), 0, 1)
    truth = cal.truth(f, v)
    got = []
    for _ in range(3000):
        ref = rng.binomial(8, v) / 8
        c = cal.calibration(f, ref, 8)
        b = cal._bins(f, cal.BINS)
        raw_res = sum((b == k).mean() * (ref[b == k].mean() - ref.mean()) ** 2 for k in np.unique(b))
        got.append([c["brier_reliability"], c["brier_resolution"], c["brier"], c["ece_raw"] ** 2, raw_res])
    got = np.array(got)
    mean, se = got.mean(0), got.std(0) / np.sqrt(len(got))
    for i, key in enumerate(("brier_reliability", "brier_resolution", "brier")):
        assert abs(mean[i] - truth[key]) < 3 * se[i], key
    assert mean[3] - truth["brier_reliability"] > 5 * se[3]
    assert mean[4] - truth["brier_resolution"] > 5 * se[4]


def test_auroc_known_answers():
    assert choices.auroc(np.array([0.9, 0.8, 0.1, 0.2]), np.array([1, 1, 0, 0])) == 1.0
    assert choices.auroc(np.array([0.1, 0.8, 0.9, 0.2]), np.array([1, 1, 0, 0])) == 0.25
    assert choices.auroc(np.array([0.5, 0.5]), np.array([1, 0])) == 0.5  # a tie is half
    rng = np.random.default_rng(0)
    s, y = rng.random(50).round(1), rng.random(50) < 0.4
    brute = np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in s[y] for b in s[~y]])
    assert choices.auroc(s, y) == pytest.approx(brute)
    assert math.isnan(choices.auroc(s, np.ones(50, bool)))
    assert math.isnan(choices.auroc_own(s, y.astype(float), "in-group"))  # the estimate may see the outcome
    assert choices.auroc_own(s, y.astype(float), "held-out") == pytest.approx(brute)


def test_auroc_of_the_true_value_for_its_own_outcome():
    """Outcomes drawn from V: the AUROC of V itself matches its exact value from the distribution of V."""
    rng = np.random.default_rng(4)
    v = rng.choice([0.2, 0.5, 0.8], 30000)
    y = rng.random(len(v)) < v
    # P(V_pos > V_neg) + 1/2 P(tie) with P(V = x | pos) proportional to x, P(V = x | neg) to 1 - x
    x = np.array([0.2, 0.5, 0.8])
    pp, pn = x / x.sum(), (1 - x) / (1 - x).sum()
    exact = sum(pp[i] * pn[j] * (1.0 if i > j else 0.5 if i == j else 0.0) for i in range(3) for j in range(3))
    assert choices.auroc(v, y) == pytest.approx(exact, abs=0.01)


def test_sibling_top1_known_answers():
    # problem a: two sets by stage (pos < 0.5, >= 0.5); problem b: one state per stage (no set)
    problems = np.array(["a", "a", "a", "a", "a", "b", "b"])
    pos = np.array([0.1, 0.2, 0.3, 0.7, 0.9, 0.1, 0.9])
    ref = np.array([0.2, 0.8, 0.8, 0.5, 0.1, 0.3, 0.4])
    est = np.array([0.1, 0.9, 0.3, 0.2, 0.6, 0.5, 0.5])
    top1, chance, sets = choices.sibling_top1(est, ref, problems, pos)
    # set 1: ref best {1, 2}, est best {1}: hit 1, chance 2/3; set 2: ref best {3}, est best {4}: hit 0, chance 1/2
    assert sets == 2 and top1 == pytest.approx(0.5) and chance == pytest.approx((2 / 3 + 1 / 2) / 2)
    est2 = est.copy()
    est2[[3, 4]] = 0.5  # estimate ties split the hit
    assert choices.sibling_top1(est2, ref, problems, pos)[0] == pytest.approx((1 + 0.5) / 2)
    assert choices.sibling_top1(est, np.full(7, 0.5), problems, pos)[2] == 0  # references all tie: no set


def test_drop_f1_known_answers():
    # rollouts: r0 falls by 0.4 at step 0 (between its cuts 0 and 1); r1 has no fall of 0.3; r2 falls twice,
    # first at step 0 (by 0.3), then by 0.5
    problems = np.array(["p"] * 9)
    rollouts = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    t = np.array([5, 10, 20, 5, 10, 20, 5, 10, 20])
    ref = np.array([0.9, 0.5, 0.4, 0.5, 0.6, 0.5, 0.9, 0.6, 0.1])
    # estimator: r0 and r2 fall most at step 1 (wrong: both first falls are at 0), r1 no fall
    est = np.array([0.9, 0.85, 0.4, 0.5, 0.5, 0.5, 0.9, 0.6, 0.2])
    f1, n = choices.drop_f1(est, ref, problems, rollouts, t)
    assert n == 3 and f1 == 0.0  # both drops missed: the accuracy on drop rollouts is 0
    est = ref.copy()  # the reference itself: r0 hit, r1 right (no fall), r2 missed: its largest fall is not its first
    f1, _ = choices.drop_f1(est, ref, problems, rollouts, t)
    a, b = 1 / 2, 1.0
    assert f1 == pytest.approx(2 * a * b / (a + b))
    f1, n = choices.drop_f1(est, ref, problems, np.arange(9), t)
    assert math.isnan(f1) and n == 0  # one cut per rollout: nothing to localise
    # a fall of exactly 0.3 between k/n references counts (0.7 - 0.4 is 0.29999... in floating point)
    f1, n = choices.drop_f1(np.array([0.7, 0.4, 0.5, 0.5]), np.array([0.7, 0.4, 0.5, 0.5]), np.array(["p"] * 4),
                            np.array([0, 0, 1, 1]), np.array([1, 2, 1, 2]))
    assert n == 2 and f1 == 1.0
