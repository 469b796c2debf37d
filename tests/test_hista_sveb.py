"""Hista: EMA compression, MinDistance, the cummin/cumsum table, and the estimator against brute force."""

import numpy as np
import pytest
import torch

from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.hista_sveb import HistaSVEB as Hista
from sveb.estimators.hista_sveb import ema_compress, min_distance, min_distance_table, scheduled_k
from sveb.estimators.knn import pairwise_dist, weighted_knn


def ema_loop(x, alpha, interval):
    m, out = np.zeros(x.shape[1]), []
    for t in range(len(x)):
        m = alpha * m + (1 - alpha) * x[t]
        if (t + 1) % interval == 0:
            out.append(m / (1 - alpha ** (t + 1)))
    return np.array(out).reshape(-1, x.shape[1])


def test_ema_hand_case():
    x = np.array([[1.0], [0.0], [0.0], [4.0]])
    # alpha 0.5: m = .5, .25, .125, 2.0625; corrected by 1 - .5^t
    np.testing.assert_allclose(ema_compress(x, 0.5, 1)[:, 0], [1.0, 0.25 / 0.75, 0.125 / 0.875, 2.0625 / 0.9375])
    np.testing.assert_allclose(ema_compress(x, 0.5, 2)[:, 0], [0.25 / 0.75, 2.0625 / 0.9375])
    np.testing.assert_allclose(ema_compress(np.ones((10, 3)), 0.7, 5), np.ones((2, 3)))  # bias-corrected
    np.testing.assert_allclose(ema_compress(x, 0.0, 2), x[[1, 3]])                         # no smoothing
    assert ema_compress(x, 0.7, 5).shape == (0, 1)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.7, 0.97])
@pytest.mark.parametrize("interval", [1, 4, 5])
def test_ema_matches_loop(alpha, interval):
    x = np.random.default_rng(1).normal(size=(203, 6))   # > 64 blocks for interval 1: chunked path
    np.testing.assert_allclose(ema_compress(x, alpha, interval), ema_loop(x, alpha, interval), atol=1e-10)
    got = ema_compress(torch.tensor(x, dtype=torch.float32), alpha, interval)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), ema_loop(x, alpha, interval), atol=1e-4)


def test_min_distance_hand_case():
    x1 = np.array([[0.0], [1.0], [5.0]])
    x2 = np.array([[0.0], [4.0]])
    assert min_distance(x1, x2) == pytest.approx(0 + 1 + 1)          # rows of the longer one
    assert min_distance(x2, x1) == pytest.approx(2.0)                 # order does not matter
    assert min_distance(x1, x2, "mean") == pytest.approx(2 / 3)
    assert min_distance(torch.tensor(x1), torch.tensor(x2)) == pytest.approx(2.0)
    # equal lengths: the rows of the first
    assert min_distance(np.array([[0.0], [3.0]]), np.array([[1.0], [10.0]])) == pytest.approx(1 + 2)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_table_matches_brute_force(reduce):
    rng = np.random.default_rng(2)
    q, e = rng.normal(size=(9, 4)), rng.normal(size=(3, 11, 4))
    tab = min_distance_table(torch.tensor(q), torch.tensor(e), reduce).numpy()
    for g in range(3):
        for m in range(1, 10):
            for n in range(1, 12):
                assert tab[g, m - 1, n - 1] == pytest.approx(min_distance(q[:m], e[g, :n], reduce), rel=1e-9)


def test_pairwise_dist_near_duplicates():
    """Large offsets and near-identical rows: the matrix-product form alone would return 0 here."""
    rng = np.random.default_rng(0)
    y = torch.tensor(rng.normal(size=(40, 512)) * 30 + 200, dtype=torch.float32)
    q = torch.cat([y[:3] + 1e-3, y[3:6]])
    exact = np.sqrt(((q.double().numpy()[:, None] - y.double().numpy()[None]) ** 2).sum(-1))
    np.testing.assert_allclose(pairwise_dist(q, y).numpy(), exact, rtol=1e-3, atol=1e-6)
    assert np.all(pairwise_dist(q, y).numpy()[np.arange(3, 6), np.arange(3, 6)] == 0)


def test_weighted_knn():
    d, r = np.array([0.5, 0.0, 2.0, 1.0]), np.array([1.0, 0.0, 1.0, 1.0])
    assert weighted_knn(d, r, 0, 0.25) == pytest.approx((2 + 0 * 4 + 0.5 + 1) / (2 + 4 + 0.5 + 1))
    assert weighted_knn(d, r, 2, 0.25) == pytest.approx(2 / 6)      # nearest: d=0 (clamped), d=0.5
    assert weighted_knn(d, r, 1, 0.25) == 0.0


def test_k_schedule():
    assert scheduled_k(66, 6, 1, 1000, 50) == 66
    assert scheduled_k(66, 6, 51, 1000, 50) == 66 - 60 // 21
    assert scheduled_k(66, 6, 999, 1000, 50) == 66 - (60 // 21) * 19
    assert scheduled_k(66, 6, 299, 300, 50) == 66 - (60 // 7) * 5 and scheduled_k(66, 6, 10**6, 300, 50) >= 6


# --- estimator -------------------------------------------------------------------------------------

def make_group(lengths, rewards, d=5, seed=0, hidden=None):
    rng = np.random.default_rng(seed)
    H = hidden or {j: rng.normal(size=(T, d)).astype(np.float32) for j, T in enumerate(lengths)}
    rolls = tuple(Rollout(j, (), tuple(range(len(H[j]))), "", float(r)) for j, r in enumerate(rewards))
    return ProblemGroup({}, rolls, hidden_fn=lambda i: H[i]), H


def brute_hista(group, states, est):
    """Direct reading of the method: loop over every node, numpy kernels."""
    members = group.rollouts
    rows = np.concatenate([group.hidden(r.rollout_idx) for r in members]).astype(np.float64)
    scale = np.linalg.norm(rows, axis=1).mean()

    def rep(x, t):
        x = np.asarray(x[:t], np.float64)
        return ema_compress(x, est.alpha, est.phi) if t >= est.phi else ema_compress(x, est.alpha, t)

    nodes = []
    for r in members:
        x = group.hidden(r.rollout_idx)
        T = len(x)
        for t in [*range(est.delta, T, est.delta), T]:
            nodes.append((rep(x, t), r.reward, r.rollout_idx, t))
    out = []
    for s in states:
        q = rep(group.hidden(s.rollout_idx), s.t)
        d = [(min_distance(q, e, est.reduce) / scale, r) for e, r, j, t in nodes
             if not (j == s.rollout_idx and t > s.t)]
        d, r = np.array(d).T
        out.append(weighted_knn(d, r, est.k, est.d_min))
    return np.array(out)


@pytest.mark.parametrize("params", [dict(), dict(reduce="sum", k=7), dict(alpha=0.0, phi=1, delta=4, k=0),
                                    dict(phi=3, delta=6, k=5, d_min=0.3)])
def test_estimator_matches_brute_force(params):
    lengths = [37, 3, 12, 50, 26, 8]
    est = Hista(**{**dict(phi=2, delta=5), **params})
    group, _ = make_group(lengths, [1, 0, 1, 0, 0, 1])
    states = [State(f"s{j}-{t}", "p", j, t, "") for j, T in enumerate(lengths)
              for t in {1, 2, T // 2, T - 1} if 0 < t < T]
    fast = est.estimate(group, states)
    np.testing.assert_allclose(fast, brute_hista(group, states, est), atol=1e-6)
    held = [s for s in states if s.rollout_idx == 0]
    np.testing.assert_allclose(est.estimate(group.without(0), held), brute_hista(group.without(0), held, est),
                               atol=1e-6)


def test_shared_history_gets_its_rollouts_reward():
    """A held-out state whose history copies the correct rollouts is valued near 1, and vice versa."""
    rng = np.random.default_rng(3)
    good, bad = rng.normal(size=(120, 8)) + 3, rng.normal(size=(120, 8)) - 3
    H = {j: ((good if j % 2 == 0 else bad) + 0.05 * rng.normal(size=(120, 8))).astype(np.float32) for j in range(8)}
    group, _ = make_group([], [1 - j % 2 for j in range(8)], hidden=H)
    states = [State("a", "p", 0, 60, ""), State("b", "p", 1, 60, "")]
    v = Hista(k=3).estimate(group.without(0), states[:1])[0], Hista(k=3).estimate(group.without(1), states[1:])[0]
    assert v[0] > 0.95 and v[1] < 0.05


def test_own_future_nodes_are_not_used():
    """In-group, the state's own rollout counts only up to t: with k=1 the nearest is its own node at t."""
    group, _ = make_group([100, 100, 100], [1, 0, 0], seed=4)
    s = State("a", "p", 0, 50, "")
    assert Hista(k=1, phi=5, delta=50).estimate(group, [s])[0] == 1.0   # own node at t=50, distance 0
    assert Hista(k=1, phi=5, delta=50).estimate(group.without(0), [s])[0] == 0.0


def test_edge_cases():
    group, _ = make_group([3, 40], [1, 0])
    short = [State("a", "p", 0, 1, ""), State("b", "p", 1, 2, ""), State("c", "p", 1, 0, "")]
    v = Hista(phi=5, delta=10).estimate(group, short)
    assert np.all((v >= 0) & (v <= 1)) and v[2] == 0.5
    alone = group.without(0).without(1)
    assert list(Hista().estimate(alone, short[:1])) == [0.5]           # no rollouts: no information
    assert Hista().estimate(group, []).shape == (0,)
    est = make("hista-sveb", {"k": "3", "reduce": "sum", "k_schedule": "true"})
    assert (est.k, est.reduce, est.k_schedule, est.needs_hidden) == (3, "sum", True, True)
    with pytest.raises(ValueError):
        Hista(alpha=1.0).estimate(group, short[:1])


def test_memo_serves_one_problem_and_never_a_changed_array():
    """Held-out calls reuse each rollout's compression; a new problem drops the old one, and an array
    the source replaces is compressed afresh (values equal a fresh estimator's every time)."""
    est, fresh = Hista(delta=10, k=4), lambda: Hista(delta=10, k=4)
    g1, H1 = make_group([30, 25, 40, 35], [1, 0, 1, 0], seed=1)
    g2, _ = make_group([20, 45, 30], [0, 1, 1], seed=2)
    s1, s2 = [State("a", "p", 0, 17, "")], [State("b", "q", 1, 33, "")]
    np.testing.assert_allclose(est.estimate(g1.without(0), s1), fresh().estimate(g1.without(0), s1))
    np.testing.assert_allclose(est.estimate(g2.without(1), s2), fresh().estimate(g2.without(1), s2))
    assert set(est._memo) == {0, 1, 2}                      # only the second problem's rollouts
    H1[2] = H1[2] * 3.0                                       # the source now returns a new array
    est.estimate(g1, s1)
    np.testing.assert_allclose(est.estimate(g1.without(0), s1), fresh().estimate(g1.without(0), s1))
