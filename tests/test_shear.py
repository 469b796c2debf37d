"""SHEAR: W1 kernels, spans, the branch-and-bound min, and the estimator against brute force."""

import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance

from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.knn import weighted_knn
from sveb.estimators.shear import (Shear, lower_bounds, min_over_spans, range_min, span_lower_bounds, span_means, span_starts,
                                   w1_batch, wasserstein1)


def test_w1_one_dimensional_matches_scipy():
    rng = np.random.default_rng(0)
    for n, m in [(5, 5), (7, 13), (30, 20)]:
        a, b = rng.normal(size=n), rng.normal(size=m) * 2 + 1
        assert wasserstein1(a, b) == pytest.approx(wasserstein_distance(a, b), abs=1e-10)
        assert wasserstein1(a[:, None], b[:, None]) == pytest.approx(wasserstein_distance(a, b), abs=1e-10)


def test_w1_known_cases():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(12, 6))
    assert wasserstein1(a, a) == pytest.approx(0.0, abs=1e-12)
    assert wasserstein1(a, a[::-1]) == pytest.approx(0.0, abs=1e-12)            # order-free
    shift = np.array([3.0, 0, 4.0, 0, 0, 0])
    assert wasserstein1(a, a + shift) == pytest.approx(5.0)                     # far shift: all mass moves by it
    assert wasserstein1([[0.0], [2.0]], [[1.0]]) == pytest.approx(1.0)          # unequal sizes
    assert wasserstein1([[0.0, 0.0]], [[3.0, 4.0], [0.0, 0.0]]) == pytest.approx(2.5)


def test_sinkhorn_close_to_exact():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(20, 4)), rng.normal(size=(25, 4)) + 0.5
    exact = wasserstein1(a, b)
    for eps, tol in [(0.1, 0.05), (0.01, 5e-3)]:
        approx = wasserstein1(a, b, eps)
        assert approx >= exact - 1e-5 and approx - exact < tol * exact


def test_w1_batch_matches_pairs():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(6, 8, 3)), rng.normal(size=(6, 10, 3)) + 0.3
    C = torch.cdist(torch.tensor(A), torch.tensor(B))
    np.testing.assert_allclose(w1_batch(C, None), [wasserstein1(a, b) for a, b in zip(A, B)], atol=1e-10)
    np.testing.assert_allclose(w1_batch(C, 0.05), [wasserstein1(a, b, 0.05) for a, b in zip(A, B)], atol=1e-4)
    # eps tiny against the costs: solved exactly, the limit Sinkhorn would approach
    np.testing.assert_allclose(w1_batch(C * 1e3, 0.05), w1_batch(C, None) * 1e3, rtol=1e-10)


def test_span_starts():
    assert span_starts(0, 100, 25) == []
    assert span_starts(60, 100, 25) == [(0, 60)]
    assert span_starts(100, 100, 25) == [(0, 100)]
    assert span_starts(150, 100, 25) == [(0, 100), (25, 100), (50, 100)]
    assert span_starts(160, 100, 25) == [(0, 100), (25, 100), (50, 100), (60, 100)]  # the end is covered


def test_lower_bound_and_branch_and_bound():
    rng = np.random.default_rng(4)
    q, spans = rng.normal(size=(9, 5)), rng.normal(size=(30, 11, 5)) * rng.uniform(0.5, 2, (30, 1, 1))
    C = torch.cdist(torch.tensor(q)[None].expand(30, -1, -1), torch.tensor(spans))
    exact = w1_batch(C, None)
    assert np.all(lower_bounds(C).numpy() <= exact + 1e-12)
    owner = rng.integers(0, 5, 30)
    owner[owner == 3] = 2                                                    # owner 3 has no spans
    lb = lower_bounds(C).numpy()
    solved = []

    def solve(eps):
        def f(pick):
            solved.extend(pick)
            return w1_batch(C[pick], eps)
        return f
    got = min_over_spans(lb, owner, 5, solve(None))
    want = [exact[owner == g].min() if (owner == g).any() else np.inf for g in range(5)]
    np.testing.assert_allclose(got, want)
    assert len(set(solved)) == len(solved) < 30  # nothing solved twice, and the bound pruned some
    sink = w1_batch(C, 0.05)
    want = [sink[owner == g].min() if (owner == g).any() else np.inf for g in range(5)]
    np.testing.assert_allclose(min_over_spans(lb, owner, 5, solve(0.05)), want, atol=1e-5)


def test_span_means_and_the_mean_bound():
    rng = np.random.default_rng(6)
    ys = torch.tensor(rng.normal(size=(50, 4)), dtype=torch.float32)
    offsets = np.array([0, 20, 31, 50])
    first, length = np.array([0, 5, 20, 31, 40]), np.array([10, 15, 11, 9, 10])
    got = span_means(ys, first, length, offsets)
    want = torch.stack([ys[a:a + n].double().mean(0) for a, n in zip(first, length)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-12)
    q = ys[3:9].double()
    for a, n in zip(first, length):
        w1 = w1_batch(torch.cdist(q, ys[a:a + n].double())[None], None)[0]
        assert float((q.mean(0) - ys[a:a + n].double().mean(0)).norm()) <= w1 + 1e-12


def test_span_bounds_equal_the_gathered_ones():
    rng = np.random.default_rng(5)
    D = torch.tensor(rng.uniform(0, 3, size=(7, 300)))
    for length in (1, 2, 3, 17, 64, 100):
        starts = torch.tensor(sorted(rng.choice(300 - length + 1, 12, replace=False)))
        cols = starts[:, None] + torch.arange(length)[None, :]
        C = D[:, cols].permute(1, 0, 2)
        np.testing.assert_allclose(range_min(D, starts, length).numpy(), C.amin(dim=2).T.numpy())
        np.testing.assert_allclose(span_lower_bounds(D, starts, length).numpy(), lower_bounds(C).numpy(), rtol=1e-12)


# --- estimator -------------------------------------------------------------------------------------

def make_group(H, rewards):
    rolls = tuple(Rollout(j, (), tuple(range(len(H[j]))), "", float(r)) for j, r in enumerate(rewards))
    return ProblemGroup({}, rolls, hidden_fn=lambda i: H[i])


def brute_shear(group, states, est):
    """Direct reading: every span of every rollout, one W1 at a time."""
    rows = np.concatenate([group.hidden(r.rollout_idx) for r in group.rollouts]).astype(np.float64)
    scale = np.linalg.norm(rows, axis=1).mean()
    out = []
    for s in states:
        x = group.hidden(s.rollout_idx).astype(np.float64)
        q = x[max(0, s.t - est.w) : s.t] / scale
        d, r = [], []
        for roll in group.rollouts:
            y = group.hidden(roll.rollout_idx).astype(np.float64) / scale
            ws = [wasserstein1(q, y[a : a + n], None if est.exact else est.eps)
                  for a, n in span_starts(len(y), est.w, est.s)
                  if not (roll.rollout_idx == s.rollout_idx and a + n > s.t)]
            if ws:
                d.append(min(ws)), r.append(roll.reward)
        out.append(weighted_knn(np.array(d), np.array(r), est.k, est.d_min))
    return np.array(out)


@pytest.mark.parametrize("params", [dict(exact=True), dict(exact=True, k=2, d_min=0.5), dict(eps=0.05)])
def test_estimator_matches_brute_force(params):
    rng = np.random.default_rng(5)
    H = {j: (rng.normal(size=(T, 4)) + 3).astype(np.float32) for j, T in enumerate([30, 7, 22, 41, 18])}
    group = make_group(H, [1, 0, 1, 0, 0])
    est = Shear(**{**dict(w=8, s=3), **params})
    states = [State(f"{j}-{t}", "p", j, t, "") for j in H for t in {1, 5, len(H[j]) // 2, len(H[j]) - 1}]
    atol = 1e-6 if est.exact else 1e-4
    np.testing.assert_allclose(est.estimate(group, states), brute_shear(group, states, est), atol=atol)
    held = [s for s in states if s.rollout_idx == 3]
    np.testing.assert_allclose(est.estimate(group.without(3), held), brute_shear(group.without(3), held, est),
                               atol=atol)


def test_shared_history_gets_its_rollouts_reward():
    rng = np.random.default_rng(6)
    good, bad = rng.normal(size=(60, 8)) + 2, rng.normal(size=(60, 8)) - 2
    H = {j: ((good if j % 2 == 0 else bad) + 0.05 * rng.normal(size=(60, 8))).astype(np.float32) for j in range(6)}
    group = make_group(H, [1 - j % 2 for j in range(6)])
    est = Shear(w=20, s=5, d_min=1e-3)  # the old clamp: near-identical spans dominate
    assert est.estimate(group.without(0), [State("a", "p", 0, 40, "")])[0] > 0.95
    assert Shear(w=20, s=5).estimate(group.without(0), [State("a", "p", 0, 40, "")])[0] > 0.9
    assert est.estimate(group.without(1), [State("b", "p", 1, 40, "")])[0] < 0.05


def test_k_nearest_and_edge_cases():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(30, 3)).astype(np.float32)
    H = {0: base, 1: base + 0.01, 2: base + 5, 3: base + 6}
    group = make_group(H, [1, 1, 0, 0])
    s = State("a", "p", 0, 20, "")
    held = group.without(0)
    assert Shear(w=10, s=5, k=1).estimate(held, [s])[0] == 1.0                 # nearest: rollout 1
    assert 0.5 < Shear(w=10, s=5, k=0).estimate(held, [s])[0] < 1.0
    assert Shear(w=10, s=5, k=1, exact=True).estimate(group, [s])[0] == 1.0    # own past span, distance 0
    assert Shear(w=40, s=5, k=1).estimate(group, [s])[0] == 1.0                 # t < w: own rollout unusable
    assert list(Shear().estimate(held.without(1).without(2).without(3), [s])) == [0.5]
    assert Shear().estimate(group, [State("z", "p", 0, 0, "")])[0] == 0.5       # empty prefix: group mean
    est = make("shear", {"w": "50", "exact": "true", "k": "3"})
    assert (est.w, est.exact, est.k, est.needs_hidden) == (50, True, 3, True)
