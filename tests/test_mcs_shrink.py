"""Issue 58.4: Monte Carlo at matched rollout counts (sveb/estimators/mcs_shrink.py), known answers on synthetic
groups whose true values are drawn, so the truth is known: the moments are unbiased, the fitted beta recovers the
beta it was drawn from, empirical Bayes beats plain MCS@k at the same k, the control-variate form is unbiased."""

from pathlib import Path

import numpy as np
import pytest

from sveb import estimators as reg
from sveb.core.records import BuildData
from sveb.estimators import mcs_shrink as ms
from sveb.estimators.families import declared_members, family_of
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import estimate_all


def test_draws_moment_reads_v_times_one_minus_v_without_bias():
    rng = np.random.default_rng(0)
    v = rng.beta(2, 3, 200_000)
    truth = float(np.mean(v * (1 - v)))
    for k in (1, 2, 3, 4):
        x = rng.binomial(k, v)
        own = rng.binomial(1, v) if k == 1 else None
        q = ms.draws_moment(x, k, own)
        assert abs(q.mean() - truth) < 4 * q.std() / np.sqrt(len(q)), k
    with pytest.raises(ValueError, match="k = 1"):
        ms.draws_moment(np.array([1.0]), 1)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_the_fitted_beta_recovers_the_beta_it_was_drawn_from(k):
    rng = np.random.default_rng(10 + k)
    a, b = 2.0, 5.0
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    fits = []
    for _ in range(60):  # replications: the fit's own Monte-Carlo error, measured
        v = rng.beta(a, b, 3000)
        x = rng.binomial(k, v)
        fits.append(ms.fit_beta(x, k, ms.draws_moment(x, k, rng.binomial(1, v) if k == 1 else None)))
    fits = np.array(fits)
    se = fits.std(axis=0, ddof=1) / np.sqrt(len(fits))
    assert abs(fits[:, 0].mean() - mean) < 4 * se[0]
    assert abs(fits[:, 1].mean() - var) < 4 * se[1] + 1e-4  # + the clip at 0's small upward pull
    assert abs(fits[:, 1].mean() - var) / var < 0.1


def test_concentration_and_posterior_mean_by_hand():
    assert ms.concentration(0.02, 0.2) == pytest.approx(10.0)
    assert ms.concentration(-0.01, 0.2) == ms.C_MAX  # no spread beyond the draws' noise: the group mean
    assert ms.posterior_mean(2, 4, 0.25, 4.0) == pytest.approx((2 + 1) / 8)
    assert ms.cv_coefficient(np.zeros(3), np.zeros(3), np.zeros(3)) == 0.0
    assert ms.shrunk_coefficient(-2.0, 1.0, 1.0) == pytest.approx(-2.0 * (1 - 1 / 4))  # b = -2, se = 1
    assert ms.shrunk_coefficient(0.5, 1.0, 1.0) == 0.0  # within its own noise of 0
    # u = -(x/k - own) z = (-0.5, 0): b = -1 with se 1 (one problem each): no evidence, so 0; one problem: se 0.5
    assert ms.cv_coefficient(np.array([1.0, 0.0]), np.array([0.0, 0.0]), np.array([0.5, 0.5])) == 0.0
    assert ms.cv_coefficient(np.array([1.0, 1.0]), np.zeros(2), np.array([0.5, 0.5]), groups=[0, 1]) == \
        pytest.approx(-2.0 * (1 - 2.0 / 4.0))  # b = -1 / 0.5, se^2 = 0.5 / 0.25


def synthetic(seed: int, problems: int = 300, g: int = 8, conc: float = 4.0, k: int = 4):
    """A build in memory: per problem a root value mu, G rollouts; states on rollouts 0 and 1 with values drawn
    from a beta of mean mu (a value averages to the root's over rollouts), their own rollout's reward and k extra
    draws sampled from that value. Returns the BuildData and the true value of each state."""
    rng = np.random.default_rng(seed)
    probs, rolls, states, extras, truth = {}, {}, [], {}, {}
    for p in range(problems):
        pid = f"p{p}"
        mu = rng.beta(2, 2)
        probs[pid] = {"problem_id": pid}
        rewards = list(rng.binomial(1, mu, g).astype(float))
        for j in (0, 1):
            v = rng.beta(conc * mu + 1e-3, conc * (1 - mu) + 1e-3)
            sid = f"{pid}-{j}"
            rewards[j] = float(rng.binomial(1, v))  # the own rollout continues the state's prefix
            extras[sid] = tuple(float(x) for x in rng.binomial(1, v, k))
            states.append({"state_id": sid, "problem_id": pid, "rollout_idx": j, "t": 5, "prefix_text": ""})
            truth[sid] = v
        rolls[pid] = [{"rollout_idx": i, "prompt_token_ids": [1], "response_token_ids": [2] * 10,
                       "response_text": "", "reward": r} for i, r in enumerate(rewards)]
    data = BuildData(Path("synthetic"), {"model": "synthetic", "build_fp": "x"}, probs, rolls, states, {}, extras)
    return data, np.array([truth[s["state_id"]] for s in states])


def values(name: str, data: BuildData, protocol: str = "held-out", own: bool = False):
    est = reg.make(name)
    prepare(est, data)
    return estimate_all(est, data, protocol, own=own, progress=False)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_empirical_bayes_beats_plain_mcs_at_the_same_k(k):
    data, v = synthetic(k)
    plain, eb = values(f"mcs-{k}", data)[0], values(f"mcs-eb-{k}", data)[0]
    d = (eb - v) ** 2 - (plain - v) ** 2
    assert d.mean() < -4 * d.std(ddof=1) / np.sqrt(len(d)), (k, d.mean())


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_control_variate_form_is_unbiased_and_below_empirical_bayes(k):
    data, v = synthetic(20 + k, problems=600)
    eb, cv = values(f"mcs-eb-{k}", data)[0], values(f"mcs-cv-{k}", data)[0]
    err = cv - v
    assert abs(err.mean()) < 4 * err.std(ddof=1) / np.sqrt(len(err))
    d = (eb - v) ** 2 - (cv - v) ** 2  # the group's outcomes are worth more as a prior than as a control
    assert d.mean() < -4 * d.std(ddof=1) / np.sqrt(len(d))


def test_the_control_variate_coefficient_is_zero_within_its_error():
    # the control is independent of the draws' noise, so the risk-minimising coefficient is 0: fitted on 10
    # replicate builds, the raw fit's mean is 0 within Monte-Carlo error, its stated SE is about its spread, and
    # the coefficient used is the raw one pulled toward 0 by that SE
    raw, se, used = [], [], []
    for seed in range(10):
        data, _ = synthetic(100 + seed, problems=300)
        est = reg.make("mcs-cv-2")
        prepare(est, data)
        d = est.diagnostics()
        raw.append(d["coefficient_raw"]), se.append(d["coefficient_se"]), used.append(d["coefficient"])
        assert abs(d["coefficient"]) <= abs(d["coefficient_raw"])
    assert abs(np.mean(raw)) < 4 * np.std(raw, ddof=1) / np.sqrt(len(raw))
    assert 0.5 < np.std(raw, ddof=1) / np.mean(se) < 2
    assert np.mean(np.abs(used)) < np.mean(np.abs(raw))


@pytest.mark.parametrize("name", ["mcs-eb-1", "mcs-eb-3", "mcs-cv-1", "mcs-cv-2"])
def test_held_out_no_estimate_reads_its_own_outcome(name):
    data, _ = synthetic(5, problems=40)
    vals, shift, _ = values(name, data, own=True)  # the evaluator's flip of the own reward in the group
    assert np.all(shift == 0)
    # and the prior: a problem's own rewards and draws change nothing of its estimates (fitted on the others)
    first = data.states[0]["problem_id"]
    rolls = {**data.rollouts, first: [{**r, "reward": 1.0 - r["reward"]} if r["rollout_idx"] == 0 else r
                                      for r in data.rollouts[first]]}
    est, est2 = reg.make(name), reg.make(name)
    prepare(est, data)
    prepare(est2, BuildData(data.bdir, data.manifest, data.problems, rolls, data.states, {}, data.extras))
    assert est._param_for(first) == pytest.approx(est2._param_for(first), rel=1e-12, abs=1e-15)  # float sums
    assert not np.allclose(est._sums, est2._sums)  # the build's fit (the others' prior) does read it


def test_registered_as_reference_scale_in_the_scale_variant_family():
    fam = declared_members()
    assert fam["scale-variant"] == tuple(f"mcs-{f}-{k}" for f in ("eb", "cv") for k in (1, 2, 3, 4))
    for name in fam["scale-variant"]:
        e = reg.entry(name)
        assert e.role == "scale" and e.reads_references and family_of(name, None) == "scale-variant"
        assert name not in fam["main"] + fam["scale"] + fam["variant"]
    assert reg.make("mcs-eb-3").k == 3 and reg.make("mcs-cv-1").k == 1
    assert "mcs-eb-2" not in reg.names() and "mcs-eb-2" in reg.names(extra=True)  # not run by default
