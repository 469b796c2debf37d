"""pacs's value construction: V = sigma(logit p + psi) on the leave-one-out base rate (issue 17), against a
world where the true V(s) is known, and through the estimator with its prefix scores given directly."""

import numpy as np
import pytest

from sveb.core.errors import UsageError
from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.pacs import base_rate, pacs_value


def test_base_rate_clips_half_a_rollout_from_the_ends():
    assert base_rate([1, 0, 0, 1]) == 0.5
    assert base_rate([0, 0, 0, 0]) == pytest.approx(1 / 8)
    assert base_rate([1] * 7) == pytest.approx(1 - 1 / 14)
    assert base_rate([]) == 0.5
    assert pacs_value(0.0, [1, 0, 0, 0]) == pytest.approx(0.25)  # psi = 0: the base rate itself
    assert pacs_value(np.log(3), [1, 0]) == pytest.approx(0.75)   # logit 1/2 + log 3 -> 3/4
    assert pacs_value(0.0, [0, 0, 0, 0], "sigmoid") == 0.5


def simulate(mu, lo, hi, problems=800, G=8, seed=0):
    """Problems with success rate p; rollout i's outcome R_i ~ Bernoulli(p) and its prefix carries evidence
    whose log-likelihood ratio is L_i (PACS's signal at its best: r_i = L_i). The true value of the
    prefix is then the Bayes posterior sigma(logit p + L_i). Returns |error| of calibrated, sigmoid, LOO mean."""
    rng = np.random.default_rng(seed)
    errs = {"calibrated": [], "sigmoid": [], "loo": []}
    for _ in range(problems):
        p = rng.uniform(lo, hi)
        R = (rng.random(G) < p).astype(float)
        L = 2 * mu * rng.normal(mu * (2 * R - 1), 1.0)
        truth = 1 / (1 + np.exp(-(np.log(p / (1 - p)) + L)))
        for i in range(G):
            others, psi = np.delete(R, i), L[i] - np.delete(L, i).mean()
            for how in ("calibrated", "sigmoid"):
                errs[how].append(pacs_value(psi, others, how) - truth[i])
            errs["loo"].append(others.mean() - truth[i])
    return {k: np.abs(v).mean() for k, v in errs.items()}, float(np.mean(errs["calibrated"]))


@pytest.mark.parametrize("mu,lo,hi", [(0.5, 0.05, 0.95), (1.0, 0.05, 0.95), (0.5, 0.02, 0.3)])
def test_calibrated_value_tracks_the_known_posterior(mu, lo, hi):
    mae, bias = simulate(mu, lo, hi)
    assert mae["calibrated"] < 0.6 * mae["sigmoid"]   # the 1/2-centred value pays the level offset
    assert mae["calibrated"] < mae["loo"]             # and the signal adds to the base rate
    assert abs(bias) < 0.07


class Stub:
    manifest = {"build_fp": "b"}


def test_estimator_uses_the_group_it_receives(tmp_path):
    """Prefix scores given directly (no model): r = [0, 1.0] for rollout 0, [0, -1.0] for the others."""
    est = make("pacs")
    assert est.value == "calibrated"
    est._data, est._train = Stub(), (tmp_path, ())
    est._scores = {("p", i): np.array([0.0, 1.0 if i == 0 else -1.0]) for i in range(4)}
    rolls = tuple(Rollout(i, (1,), (5,), "x", float(i in (0, 1))) for i in range(4))
    group = ProblemGroup({"problem_id": "p"}, rolls, rolls)
    s0, s1 = State("a", "p", 0, 0, ""), State("b", "p", 0, 1, "")
    # in-group: the base rate leaves rollout 0 out (1 of 3 others correct); psi(t=1) = 1 - (-1) = 2
    v = est.estimate(group, [s0, s1])
    assert v == pytest.approx([1 / 3, 1 / (1 + np.exp(-(np.log(0.5) + 2.0)))])
    held = est.estimate(group.without(0), [s0, s1])  # held-out: the same rollouts received, the same values
    assert held == pytest.approx(v)
    flipped = tuple(r if r.rollout_idx else Rollout(0, (1,), (5,), "x", 0.0) for r in rolls)
    assert est.estimate(ProblemGroup({}, flipped, flipped), [s0, s1]) == pytest.approx(v)  # own reward unread
    old = make("pacs", {"value": "sigmoid"})
    old._data, old._train, old._scores = est._data, est._train, est._scores
    assert old.estimate(group, [s0, s1]) == pytest.approx([0.5, 1 / (1 + np.exp(-2.0))])


def test_unknown_value_is_a_usage_error(tmp_path):
    est = make("pacs", {"value": "logit"})
    with pytest.raises(UsageError, match="value=logit"):
        est.prepare(None)
