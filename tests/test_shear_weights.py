"""SHEAR's token weights (Alg. 1) and the one W1 kernel, against known answers."""

import math

import numpy as np
import ot
import pytest
import torch
from scipy.stats import wasserstein_distance

from sveb.estimators.knn import pairwise_dist
from sveb.estimators.shear_weights import covering, grid_spans, shear_weights, w1_batch, wasserstein1


def w1_sorted(a, b) -> float:
    """W1 between two 1-D uniform empirical distributions: replicated to a common size (the lcm), the mean
    absolute difference of the sorted values."""
    a, b = np.ravel(a), np.ravel(b)
    L = math.lcm(len(a), len(b))
    return float(np.abs(np.sort(np.repeat(a, L // len(a))) - np.sort(np.repeat(b, L // len(b)))).mean())


def omega_1d(H, rewards, w, s):
    """Alg. 1 read directly, 1-D states: spans, opposing set, one minimum over it, global norm, covering max."""
    scale = np.mean(np.abs(np.concatenate(H)))
    out = []
    for i, h in enumerate(H):
        opp = [j for j in range(len(H)) if (rewards[j] >= 0.5) != (rewards[i] >= 0.5)]
        if not opp:
            out.append(np.ones(len(h)))
            continue
        om = np.zeros(len(h))
        for a, n in grid_spans(len(h), w, s):
            d = min(w1_sorted(h[a:a + n], H[j][b:b + m]) for j in opp for b, m in grid_spans(len(H[j]), w, s)) / scale
            om[a:a + n] = np.maximum(om[a:a + n], d)
        out.append(om)
    return out


# --- spans ------------------------------------------------------------------------------------------

def test_tail_spans_are_truncated():
    assert grid_spans(0, 100, 25) == []
    assert grid_spans(160, 100, 25) == [(0, 100), (25, 100), (50, 100), (75, 85), (100, 60), (125, 35), (150, 10)]
    assert grid_spans(60, 100, 25) == [(0, 60), (25, 35), (50, 10)]
    assert grid_spans(200, 100, 100) == [(0, 100), (100, 100)]
    # SVEB's earlier grid: full windows and one full window ending at T
    assert grid_spans(160, 100, 25, "full") == [(0, 100), (25, 100), (50, 100), (60, 100)]
    assert grid_spans(60, 100, 25, "full") == [(0, 60)]
    # every token covered by ceil(w / s) spans once the first w tokens are past
    spans = grid_spans(160, 100, 25)
    assert [len(covering(spans, t)) for t in (0, 30, 99, 100, 159)] == [1, 2, 4, 4, 4]
    with pytest.raises(ValueError):
        grid_spans(10, 4, 2, "other")


# --- the kernel -------------------------------------------------------------------------------------

def normalised_spans(rng, d, n, m, B=5):
    A, Bs = rng.normal(size=(B, n, d)), rng.normal(size=(B, m, d)) * rng.uniform(0.5, 1.5, (B, 1, 1)) + 0.3
    scale = np.linalg.norm(np.concatenate([A.reshape(-1, d), Bs.reshape(-1, d)]), axis=1).mean()
    return torch.stack([pairwise_dist(torch.tensor(a / scale), torch.tensor(b / scale)) for a, b in zip(A, Bs)])


@pytest.mark.parametrize("d,n,m", [(4, 100, 100), (64, 37, 100), (16, 10, 60)])
def test_kernel_agrees_with_emd2_in_the_exact_limit(d, n, m):
    """Sinkhorn's cost lies in [W1, W1 + eps log(min(n, m))] (the stated tolerance; 1e-6 for the stopping
    rule on the marginals) and shrinks with eps; past the underflow limit the kernel is ot.emd2 itself."""
    C = normalised_spans(np.random.default_rng(d + n), d, n, m)   # costs in units of the mean norm
    exact = np.array([ot.emd2(np.full(n, 1 / n), np.full(m, 1 / m), c.numpy()) for c in C])
    np.testing.assert_allclose(w1_batch(C, None), exact, rtol=0, atol=1e-12)
    gaps = []
    for eps in (0.05, 0.01, 0.003):
        gap = w1_batch(C, eps) - exact
        assert gap.min() >= -1e-6 and gap.max() <= eps * np.log(min(n, m)), (eps, gap)
        gaps.append(gap.max())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-3
    np.testing.assert_allclose(w1_batch(C, 1e-4), exact, rtol=0, atol=1e-12)   # exp(-C/eps) underflows: exact


def test_wasserstein1_is_the_kernel_and_one_dimensional_w1_is_closed_form():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(12, 3)), rng.normal(size=(18, 3)) + 0.5
    C = pairwise_dist(torch.tensor(a), torch.tensor(b))[None]
    for eps in (None, 0.05, 0.5):
        assert wasserstein1(a, b, eps) == w1_batch(C, eps)[0]
    for n, m in [(5, 5), (4, 12), (7, 13)]:
        x, y = rng.normal(size=n), rng.normal(size=m) * 2 + 1
        assert wasserstein1(x, y) == pytest.approx(wasserstein_distance(x, y), abs=1e-10)
        if m % n == 0 or n == m:
            assert wasserstein1(x, y) == pytest.approx(w1_sorted(x, y), abs=1e-10)
    assert wasserstein1(a, a[::-1]) == 0.0                                      # order-free, exact zeros
    assert wasserstein1(a, a + np.array([3.0, 4.0, 0.0])) == pytest.approx(5.0)  # a far shift moves all mass by it


# --- the token weights ------------------------------------------------------------------------------

def test_identical_spans_give_zero():
    rng = np.random.default_rng(1)
    h = rng.normal(size=(37, 6))
    om = shear_weights([h, h.copy(), h.copy()], [1, 0, 0], w=8, s=3, eps=None)
    for o in om:
        assert o.shape == (37,) and np.all(o == 0)
    om = shear_weights([h, h[:20]], [1, 0], w=8, s=3, eps=None)   # the prefix's spans recur in h ...
    assert np.all(om[1][:15] == 0) and np.all(om[1][15:] > 0)     # ... but for its truncated tail ones
    # Sinkhorn: identical spans cost at most its entropic bias, eps log(span length)
    om = shear_weights([h, h.copy()], [1, 0], w=8, s=3, eps=0.01)
    assert 0 <= om[0].max() <= 0.01 * np.log(8)


def test_empty_opposing_set_gives_ones():
    rng = np.random.default_rng(2)
    H = [rng.normal(size=(T, 4)) for T in (12, 30, 0)]
    for rewards in ([1, 1, 1], [0, 0, 0]):
        om = shear_weights(H, rewards, w=5, s=2)
        assert [o.tolist() for o in om] == [[1.0] * 12, [1.0] * 30, []]
    om = shear_weights(H, [1, 1, 0], w=5, s=2)                 # the empty rollout is nobody's opposing span
    assert [o.tolist() for o in om] == [[1.0] * 12, [1.0] * 30, []]
    assert shear_weights([], []) == []


def test_covering_maximum_and_truncated_tail_by_hand():
    # A (correct) = 0, 0, 5; B (incorrect) = 0, 0; w = 2, s = 1; mean |h| = 1.
    # A's spans: {0,0} -> 0, {0,5} -> W1 to {0,0} or {0} = 2.5, tail {5} -> 5.
    # Token 1 lies in the first two (max 2.5, the mean would be 1.25), token 2 in {0,5} and the tail {5}.
    A, B = np.array([[0.0], [0.0], [5.0]]), np.array([[0.0], [0.0]])
    om = shear_weights([A, B], [1, 0], w=2, s=1, eps=None)
    np.testing.assert_allclose(om[0], [0.0, 2.5, 5.0], atol=1e-12)
    np.testing.assert_allclose(om[1], [0.0, 0.0], atol=1e-12)
    om = shear_weights([A * 7, B * 7], [1, 0], w=2, s=1, eps=None)   # global-norm scaling: scale-free
    np.testing.assert_allclose(om[0], [0.0, 2.5, 5.0], atol=1e-12)


@pytest.mark.parametrize("w,s", [(4, 4), (4, 2), (5, 3)])
def test_one_dimensional_spans_against_the_closed_form(w, s):
    rng = np.random.default_rng(w * 10 + s)
    H = [rng.normal(size=(T, 1)) + (j % 2) * np.linspace(0, 3, T)[:, None] for j, T in enumerate([16, 12, 20, 9, 13])]
    rewards = [1, 0, 1, 0, 0]
    om = shear_weights(H, rewards, w=w, s=s, eps=None)
    want = omega_1d([h[:, 0] for h in H], rewards, w, s)
    for o, e in zip(om, want):
        np.testing.assert_allclose(o, e, rtol=1e-10, atol=1e-12)


def test_sinkhorn_weights_are_scale_free_and_near_the_exact_ones():
    rng = np.random.default_rng(3)
    H = [rng.normal(size=(T, 5)) + j % 2 for j, T in enumerate([20, 14, 25])]
    rewards = [1, 0, 1]
    a = shear_weights(H, rewards, w=8, s=4, eps=0.05)
    b = shear_weights([h * 50 for h in H], rewards, w=8, s=4, eps=0.05)    # eps relative to the mean norm
    exact = shear_weights(H, rewards, w=8, s=4, eps=None)
    for x, y, e in zip(a, b, exact):
        np.testing.assert_allclose(x, y, atol=1e-6)
        assert np.all(x >= e - 1e-6) and np.all(x <= e + 0.05 * np.log(8) + 1e-6)
