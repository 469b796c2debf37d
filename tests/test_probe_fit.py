"""The probe's fit: the offset logistic equals sklearn's at offset 0 and recovers known weights with one,
binomial rows, and the grouped CV's choice of regularisation."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from sveb.core.errors import UsageError
from sveb.estimators.probe_fit import OffsetLogistic, binomial_rows, fit_cv, log_loss


def test_offset_logistic_equals_sklearn_at_zero_offset():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = (rng.random(400) < 1 / (1 + np.exp(-(X @ [1.0, -2.0, 0.0] + 0.3)))).astype(float)
    w = rng.uniform(0.5, 2, 400)
    for C in (0.01, 1.0):
        ours = OffsetLogistic(C).fit(X, y, np.zeros(400), w)
        ref = LogisticRegression(C=C, tol=1e-10, max_iter=5000).fit(X, y, sample_weight=w)
        np.testing.assert_allclose(ours.coef_, ref.coef_[0], atol=1e-4)
        assert ours.intercept_ == pytest.approx(ref.intercept_[0], abs=1e-4)


def test_offset_logistic_recovers_weights_on_top_of_an_offset():
    """y ~ sigmoid(offset + 1.5 x): the fitted slope is 1.5 and the intercept 0, not what a fit without the
    offset would give."""
    rng = np.random.default_rng(1)
    x, off = rng.standard_normal((20000, 1)), rng.normal(0, 2, 20000)
    y = (rng.random(20000) < 1 / (1 + np.exp(-(off + 1.5 * x[:, 0])))).astype(float)
    m = OffsetLogistic(100.0).fit(x, y, off, np.ones(20000))
    assert m.coef_[0] == pytest.approx(1.5, abs=0.08) and m.intercept_ == pytest.approx(0.0, abs=0.06)


def test_binomial_rows_and_log_loss_by_hand():
    idx, lab, w = binomial_rows(np.array([0.25, 1.0]), np.array([4.0, 1.0]))
    assert sorted(zip(idx.tolist(), lab.tolist(), w.tolist())) == [(0, 0.0, 3.0), (0, 1.0, 1.0), (1, 1.0, 1.0)]
    # 4 trials at p = 0.25 with 1 success: -(log .25 + 3 log .75) / 4
    assert log_loss(np.array([0.25]), np.array([0.25]), np.array([4.0])) == pytest.approx(
        -(np.log(0.25) + 3 * np.log(0.75)) / 4)


def data(n_problems=30, per=20, signal=1.0, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"p{i}" for i in range(n_problems)], per)
    H = rng.standard_normal((len(groups), 10))
    z = signal * 2 * H[:, 0]
    y = (rng.random(len(groups)) < 1 / (1 + np.exp(-z))).astype(float)
    return H, np.zeros((len(groups), 1)), np.zeros(len(groups)), y, np.ones(len(groups)), groups


@pytest.mark.parametrize("relative", [False, True])
def test_cv_regularises_noise_and_keeps_signal(relative):
    H, S, off, y, n, g = data(signal=0.0)
    noise = fit_cv(H, S, off, y, n, g, [1e-4, 1e-2, 1, 100], 5, 0, 0, relative)
    H2, S2, off2, y2, n2, g2 = data(signal=1.0)
    sig = fit_cv(H2, S2, off2, y2, n2, g2, [1e-4, 1e-2, 1, 100], 5, 0, 0, relative)
    assert noise.C < sig.C  # pure noise: the strongest penalty wins held-out; signal: a weak one
    p = sig.predict(H2, S2, off2)
    assert np.corrcoef(p, H2[:, 0])[0, 1] > 0.95
    assert sig.cv_loss[sig.C] < np.log(2) - 0.1 and noise.cv_loss[noise.C] > np.log(2) - 0.02


def test_cv_needs_two_problems():
    H, S, off, y, n, g = data(n_problems=1)
    with pytest.raises(UsageError, match="at least 2"):
        fit_cv(H, S, off, y, n, g, [1.0], 5, 0, 0, False)


def test_pca_reduces_the_hidden_block_only():
    H, S, off, y, n, g = data()
    S = np.c_[S, H[:, 0]]
    m = fit_cv(H, S, off, y, n, g, [1.0], 3, 4, 0, False)
    assert m.clf.coef_.shape == (1, 4 + 2)
