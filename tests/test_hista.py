"""Hista as its authors compute it: the pieces on cases with known answers, the estimator on synthetic groups."""

import numpy as np
import pytest
import torch

from sveb.core.errors import UsageError
from sveb.core.records import GroupHidden
from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.hista import (
    Hista,
    ema_histories,
    ema_history,
    ema_prompt,
    k_schedule,
    knn_value,
    node_distances,
    node_tokens,
)


def test_ema_starts_at_x0_with_the_authors_bias_correction():
    x = torch.tensor(np.random.default_rng(0).normal(size=(7, 3)), dtype=torch.float32)
    a = 0.7
    ema, want = x[0].double(), []
    for k in range(7):
        ema = x[0].double() if k == 0 else a * ema + (1 - a) * x[k].double()
        want.append(ema / (1 - a ** (k + 1)))
    np.testing.assert_allclose(ema_history(x, a).numpy(), torch.stack(want).numpy(), rtol=1e-5)


def test_batched_histories_equal_the_per_sequence_loop_bit_for_bit():
    rng = np.random.default_rng(1)
    prompt = rng.normal(size=(13, 8)).astype(np.float32)
    resp = [rng.normal(size=(n, 8)).astype(np.float32) for n in (1, 9, 27)]
    got = ema_histories(ema_prompt(prompt, 0.7, 5, 8), resp, 0.7, 5)
    for r, h in zip(resp, got):
        full = ema_history(torch.tensor(np.concatenate([prompt, r])), 0.7)[::5]
        assert torch.equal(h, full)


def test_nodes_start_token_grid_and_end():
    assert node_tokens(300, 88, 50) == [88, 100, 150, 200, 250, 299]
    assert node_tokens(300, 100, 50) == [100, 150, 200, 250, 299]
    assert node_tokens(40, 29, 50) == [29, 39]
    assert node_tokens(151, 20, 50) == [20, 50, 100, 150]


def test_k_schedule():
    assert k_schedule(66, 6, 6) == [66, 56, 46, 36, 26, 16]
    assert k_schedule(66, 6, 100) == [66] * 100    # (66 - 6) // 100 = 0


def test_min_distance_is_the_mean_over_the_longer_history():
    rng = np.random.default_rng(2)
    q, e = torch.tensor(rng.normal(size=(6, 4)), dtype=torch.float32), torch.tensor(rng.normal(size=(9, 4)),
                                                                                    dtype=torch.float32)
    d = node_distances(q, [2, 6], e, [3, 9], mask_longer=False)
    full = torch.cdist(q.double(), e.double())
    for a, m in enumerate([2, 6]):
        for b, n in enumerate([3, 9]):
            sub = full[:m, :n]
            want = sub.min(1).values.mean() if m >= n else sub.min(0).values.mean()
            assert d[a, b].item() == pytest.approx(want.item(), rel=1e-5)
    masked = node_distances(q, [2, 6], e, [3, 9], mask_longer=True)
    assert torch.isinf(masked[0, 0]) and torch.isinf(masked[0, 1]) and torch.isfinite(masked[1, 0])


def test_clamp_weights_and_ties_in_pool_order():
    d = torch.tensor([1.0, 7.0, 2.0, 10.0, 3.0])
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    # three at the clamp (5.0): a tie for k = 2, broken by pool order -> nodes 0 and 2 -> mean 0.5
    assert knn_value(d, r, 2, 5.0, 1.0) == pytest.approx(0.5)
    # k = 4: the three at the clamp (w 1/5) and node 1 (w 1/7)
    assert knn_value(d, r, 4, 5.0, 1.0) == pytest.approx((2 / 5) / (3 / 5 + 1 / 7))
    assert knn_value(torch.tensor([float("inf")]), torch.tensor([1.0]), 1, 5.0, 1.0) == 0.0


def group_with(prompt_len=12, lengths=(60, 120, 30), rewards=(1.0, 0.0, 1.0), h=6, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    prompt = rng.normal(size=(prompt_len, h)).astype(np.float32) * scale
    resp = {j: rng.normal(size=(n, h)).astype(np.float32) * scale for j, n in enumerate(lengths)}
    rolls = tuple(Rollout(j, (), tuple(range(n)), "", r) for j, (n, r) in enumerate(zip(lengths, rewards)))
    return ProblemGroup({}, rolls, hidden_fn=GroupHidden(resp, lambda: prompt, lambda: prompt_len - 2))


def test_identical_rollouts_give_their_shared_reward_and_held_out_never_reads_the_own_outcome():
    g = group_with(lengths=(80, 80, 80), rewards=(1.0, 1.0, 1.0))
    s = [State("a", "p", 0, 40, ""), State("b", "p", 1, 79, "")]
    assert list(Hista().estimate(g, s)) == [1.0, 1.0]
    g = group_with(rewards=(1.0, 0.0, 1.0))
    st = State("a", "p", 1, 70, "")
    flipped = ProblemGroup({}, tuple(Rollout(r.rollout_idx, (), r.response_token_ids, "", 1.0 - r.reward)
                                     if r.rollout_idx == 1 else r for r in g.rollouts), hidden_fn=g.hidden_fn)
    assert Hista().estimate(g.held_out(st), [st])[0] == Hista().estimate(flipped.held_out(st), [st])[0]


def test_a_cut_before_the_first_grid_node_reads_the_start_node():
    g = group_with(prompt_len=12, lengths=(80, 80, 80), scale=100.0)
    # start token 10; nodes 10, 50, 91: a cut of 3 tokens ends at token 14 < 50 -> the start node, whose history
    # is the prompt's, the same in every rollout: the three start nodes sit at distance 0 (clamped to 5), every
    # other node far away, so with k = 3 the value is the mean reward of the three rollouts
    v = Hista(max_k=3, min_k=3).raw_estimate(g, [State("a", "p", 0, 3, "")])[0]
    assert v == pytest.approx(2 / 3, abs=1e-6)
    # the cut's last token is P + t - 1: t = 38 ends at token 49 (the next node, 50, is at or after it: the start
    # node is read); t = 39 ends at 50 (node 50 is "at or after": still the start node); t = 40 and 79 read node 50
    est = Hista(max_k=3, min_k=3)
    v = est.raw_estimate(g, [State(str(t), "p", 0, t, "") for t in (3, 38, 39, 40, 79)])
    assert v[0] == v[1] == v[2] and v[3] == v[4] and v[3] != v[0]


def test_parameters_are_checked_and_history_needs_the_prompt():
    with pytest.raises(UsageError, match="min_k"):
        make("hista", {"min_k": "100"})
    with pytest.raises(UsageError, match="alpha"):
        make("hista", {"alpha": "1"})
    g = group_with()
    bare = ProblemGroup({}, g.rollouts, hidden_fn=lambda j: g.hidden(j))
    with pytest.raises(UsageError, match="history=response"):
        Hista().estimate(bare, [State("a", "p", 0, 10, "")])
    v = Hista(history="response").estimate(bare, [State("a", "p", 0, 10, "")])
    assert 0.0 <= v[0] <= 1.0
    assert type(make("hista-sveb")).__name__ == "HistaSVEB"
