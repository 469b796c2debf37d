"""hidden-align and pacs: their kernels against hand computations, and their behaviour on small groups."""

import numpy as np
import pytest
import torch

from sveb.estimators import make
from sveb.estimators.base import State
from sveb.estimators.hidden_align import features, fit_logistic, mean_pairwise_cos, sigmoid
from sveb.estimators.pacs import rloo_coefficients
from tests.helpers.groups import FakeBuild, group_with_hidden

torch.set_num_threads(1)


def test_mean_pairwise_cos():
    a, b, c = np.array([1.0, 0]), np.array([0, 1.0]), np.array([1.0, 1.0])
    assert mean_pairwise_cos([a, a, a]) == pytest.approx(1.0)
    assert mean_pairwise_cos([a, b]) == pytest.approx(0.0)
    assert mean_pairwise_cos([a, b, c]) == pytest.approx((0 + 2 * np.sqrt(0.5)) / 3)
    assert np.isnan(mean_pairwise_cos([a]))


def test_features_prefer_the_nearer_centroid():
    anchors = np.array([[1.0, 0, 0], [1.1, 0.1, 0], [-1.0, 0, 0.2], [-0.9, 0.1, 0]])
    rewards = np.array([1.0, 1.0, 0.0, 0.0])
    d_pos, lp = features(anchors, rewards, np.array([1.0, 0.05, 0]))
    d_neg, _ = features(anchors, rewards, np.array([-1.0, 0.05, 0.1]))
    assert d_pos > 1.5 and d_neg < -1.5
    assert lp == pytest.approx(np.log(2.5 / 2.5))  # (2 + 1/2) / (4 + 1) = 1/2
    assert features(anchors[:2], rewards[:2], np.ones(3)) == (0.0, pytest.approx(np.log(2.5 / 0.5)))  # no incorrect
    assert features(anchors, rewards, None)[0] == 0.0  # t = 0: no hidden state of the prefix


def test_fit_logistic_recovers_a_known_model():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 2))
    y = (rng.random(4000) < sigmoid(0.5 + 2.0 * x[:, 0] - 1.0 * x[:, 1])).astype(float)
    w = fit_logistic(x, y)
    assert w == pytest.approx([0.5, 2.0, -1.0], abs=0.15)


def test_rloo_coefficients_are_the_gradient_of_the_pacs_loss():
    r = torch.tensor([0.3, -1.2, 0.8, 0.1], dtype=torch.float64, requires_grad=True)
    R = torch.tensor([1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    psi = r - (r.sum() - r) / (len(r) - 1)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(psi, R)  # eq. 8, mean over the group
    loss.backward()
    c, value = rloo_coefficients(r.detach().numpy(), R.numpy())
    assert c == pytest.approx(r.grad.numpy())
    assert value == pytest.approx(loss.item())


def test_hidden_align_values_follow_the_state_and_the_diagnostic_is_reported(tmp_path):
    est = make("hidden-align", {"calibration": "fixed"})
    est.prepare(FakeBuild(tmp_path))
    g = group_with_hidden()
    states = [State(f"s{i}", "p", i, 6, "") for i in range(8)]
    held = np.array([est.estimate(g.without(s.rollout_idx), [s])[0] for s in states])
    assert (held[::2] > 0.8).all() and (held[1::2] < 0.2).all()  # correct rollouts' states rate high
    d = est.diagnostics()
    assert d["calibration"] == "fixed" and d["problems"] == 1
    assert d["anchor_cos_correct"] > 0.9 and d["anchor_cos_incorrect"] > 0.9
    assert est.estimate(g, [State("s0", "p", 0, 0, "")])[0] == pytest.approx(4.5 / 9)  # t = 0: the base rate
