"""SHEAR's estimator: its rules against a direct reading, SVEB's earlier construction as the shear-sveb preset, and
the span helpers (the kernel and the paper's token weights: test_shear_weights.py)."""

import numpy as np
import pytest
import torch

from sveb.core.errors import UsageError
from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State, group_mean
from sveb.estimators.knn import weighted_knn
from sveb.estimators.shear import Shear, span_means, span_starts
from sveb.estimators.shear_weights import (
    covering,
    grid_spans,
    lower_bounds,
    min_over_spans,
    min_tables,
    range_min,
    shear_weights,
    span_lower_bounds,
    w1_batch,
    wasserstein1,
)

# SVEB's construction before issue 35, the `shear-sveb` preset (GOLDEN_* below: its values then, reproduced)
SVEB = dict(span="trailing", compare="all", minimum="rollout", tail="full", readout="knn")


def test_w1_batch_is_wasserstein1():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(6, 8, 3)), rng.normal(size=(6, 10, 3)) + 0.3
    C = torch.cdist(torch.tensor(A), torch.tensor(B))
    np.testing.assert_allclose(w1_batch(C, None), [wasserstein1(a, b) for a, b in zip(A, B)], atol=1e-10)
    for eps in (0.05, 0.5):  # one path: per pair or batched, the same Sinkhorn up to its stopping rule
        np.testing.assert_allclose(w1_batch(C, eps), [wasserstein1(a, b, eps) for a, b in zip(A, B)], atol=1e-5)
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
    want = np.array([exact[owner == g].min() if (owner == g).any() else np.inf for g in range(5)])
    known = np.array([0.1, np.inf, 50.0, 1.0, np.inf])                     # minima carried from other batches
    np.testing.assert_allclose(min_over_spans(lb, owner, 5, solve(None), best=known), np.minimum(known, want))
    floor = np.array([want[0] + 1, want[1] - 0.01, -np.inf, 0.0, np.inf])  # a covering maximum's running value
    solved.clear()
    got = min_over_spans(lb, owner, 5, solve(None), floor=floor)
    np.testing.assert_allclose(np.maximum(floor, got), np.maximum(floor, want))
    assert len(solved) < 30


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
    tables = min_tables(D, 100)                                              # one sparse table for every length
    for length in (1, 2, 3, 17, 64, 100):
        starts = torch.tensor(sorted(rng.choice(300 - length + 1, 12, replace=False)))
        cols = starts[:, None] + torch.arange(length)[None, :]
        C = D[:, cols].permute(1, 0, 2)
        np.testing.assert_allclose(range_min(D, starts, length).numpy(), C.amin(dim=2).T.numpy())
        np.testing.assert_allclose(range_min(D, starts, length, tables).numpy(), C.amin(dim=2).T.numpy())
        np.testing.assert_allclose(span_lower_bounds(D, starts, length).numpy(), lower_bounds(C).numpy(), rtol=1e-12)


# --- estimator -------------------------------------------------------------------------------------

def make_group(H, rewards):
    rolls = tuple(Rollout(j, (), tuple(range(len(H[j]))), "", float(r)) for j, r in enumerate(rewards))
    return ProblemGroup({}, rolls, hidden_fn=lambda i: H[i])


def brute_sveb(group, states, est):
    """SVEB's earlier construction read directly: every span of every rollout, one W1 at a time."""
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


def brute(group, states, est):
    """Every rule read from its definition (module docstring of sveb.estimators.shear), one W1 at a time."""
    members = group.rollouts
    rows = np.concatenate([group.hidden(r.rollout_idx) for r in members]).astype(np.float64)
    scale = np.linalg.norm(rows, axis=1).mean()
    eps = None if est.exact else est.eps
    out = []
    for st in states:
        x = group.hidden(st.rollout_idx).astype(np.float64) / scale
        t = min(st.t, len(x))
        if est.span == "trailing":
            queries = [(max(0, t - est.w), t - max(0, t - est.w))]
        else:
            queries = covering(grid_spans(len(x), est.w, est.s, est.tail), t - 1)
        dist, reward = {}, {}
        for roll in members:
            own = roll.rollout_idx == st.rollout_idx
            if own and est.compare == "opposing":
                continue
            y = group.hidden(roll.rollout_idx).astype(np.float64) / scale
            cand = [(a, n) for a, n in grid_spans(len(y), est.w, est.s, est.tail) if not (own and a + n > t)]
            if not cand:
                continue
            unit = (roll.reward >= 0.5) if est.minimum == "set" else roll.rollout_idx
            per_query = [min(wasserstein1(x[a:a + n], y[b:b + m], eps) for b, m in cand) for a, n in queries]
            dist[unit] = np.minimum(dist.get(unit, np.inf), np.array(per_query))   # the unit's minimum per query
            reward.setdefault(unit, []).append(roll.reward)
        units = list(dist)
        if not units:
            out.append(group_mean(group))
            continue
        d = np.array([dist[u].max() for u in units])                                # covering: the maximum
        r = np.array([np.mean(reward[u]) for u in units])
        if est.readout == "knn":
            out.append(weighted_knn(d, r, est.k, est.d_min))
            continue
        d_pos, d_neg = d[r >= 0.5].min(initial=np.inf), d[r < 0.5].min(initial=np.inf)
        if est.readout == "base":                                                    # b w+ / (b w+ + (1 - b) w-)
            b = group_mean(group)
            w_pos, w_neg = 1 / max(d_pos, est.d_min), 1 / max(d_neg, est.d_min)
            ok = np.isfinite(d_pos) and np.isfinite(d_neg) and 0 < b < 1
            out.append(b * w_pos / (b * w_pos + (1 - b) * w_neg) if ok else b)
            continue
        ok = np.isfinite(d_pos) and np.isfinite(d_neg) and d_pos + d_neg > 0
        out.append(d_neg / (d_pos + d_neg) if ok else group_mean(group))
    return np.array(out)


def small_group(seed=5):
    rng = np.random.default_rng(seed)
    H = {j: (rng.normal(size=(T, 4)) + 3).astype(np.float32) for j, T in enumerate([30, 7, 22, 41, 18])}
    return H, make_group(H, [1, 0, 1, 0, 0])


def some_states(H):
    return [State(f"{j}-{t}", "p", j, t, "") for j in H for t in sorted({1, 5, len(H[j]) // 2, len(H[j]) - 1})]


@pytest.mark.parametrize("params", [dict(exact=True), dict(exact=True, k=2, d_min=0.5), dict(eps=0.05)])
def test_sveb_preset_matches_its_direct_reading(params):
    H, group = small_group()
    est = Shear(**{**SVEB, **dict(w=8, s=3), **params})
    states = some_states(H)
    atol = 1e-6 if est.exact else 1e-4
    np.testing.assert_allclose(est.estimate(group, states), brute_sveb(group, states, est), atol=atol)
    held = [s for s in states if s.rollout_idx == 3]
    np.testing.assert_allclose(est.estimate(group.without(3), held), brute_sveb(group.without(3), held, est),
                               atol=atol)


RULE_SETS = [dict(),                                                     # the defaults
             dict(readout="contrast"), dict(readout="base"), dict(readout="base", minimum="rollout", d_min=0.5),
             dict(minimum="rollout"), dict(compare="all"), dict(readout="knn"), dict(readout="knn", k=2),
             dict(span="trailing", tail="full"), dict(compare="all", minimum="rollout", readout="knn"),
             dict(tail="full", minimum="rollout", compare="all")]


@pytest.mark.parametrize("params", RULE_SETS)
def test_rules_match_their_direct_reading(params):
    H, group = small_group()
    est = Shear(**{**dict(w=8, s=3, exact=True), **params})
    states = some_states(H)
    np.testing.assert_allclose(est.estimate(group, states), brute(group, states, est), atol=1e-6)
    for s in states[::3]:                                     # held-out: the own rollout stops at the cut
        held = group.held_out(s)
        np.testing.assert_allclose(est.estimate(held, [s]), brute(held, [s], est), atol=1e-6)
        # ... even where the group could show it past the cut
        np.testing.assert_allclose(est.estimate(group.without(s.rollout_idx), [s]), est.estimate(held, [s]))


def test_sinkhorn_defaults_match_their_direct_reading():
    H, group = small_group(8)
    est = Shear(w=8, s=3)
    states = some_states(H)[::2]
    np.testing.assert_allclose(est.estimate(group, states), brute(group, states, est), atol=1e-4)


def test_in_group_distance_to_the_opposing_set_is_the_papers_weight():
    """In-group, covering spans, one minimum over each outcome: the distance to the set opposite the state's
    outcome is w_t of the paper's Alg. 1 at the cut's token (shear_weights, computed on the whole group)."""
    H, group = small_group(9)
    est = Shear(w=8, s=3, exact=True)
    states = some_states(H)
    omega = shear_weights([H[j] for j in range(len(H))], group.rewards, w=8, s=3, eps=None)
    for st, (d, unit_reward) in zip(states, est.distances(group, states)):
        assert list(unit_reward) == [0.0, 1.0]                  # the incorrect set, the correct set
        opposite = 0 if group.rewards[st.rollout_idx] >= 0.5 else 1
        assert d[opposite] == pytest.approx(omega[st.rollout_idx][st.t - 1], rel=1e-5, abs=1e-6)


def golden_group():
    """A synthetic group whose values SVEB's shear gave before issue 35 (HEAD 765a5ae, `Shear()`, w 100)."""
    rng = np.random.default_rng(35)
    H = {}
    for j, T in enumerate([60, 130, 170, 210, 95, 150]):
        H[j] = (rng.normal(size=(1, 8)) * 0.5 + rng.normal(size=(T, 8)) + (j % 2) + 1.0).astype(np.float32)
    return H, make_group(H, [1, 0, 1, 0, 1, 0])


GOLDEN_IN = [0.4074561433, 0.7495176614, 0.7495176614, 0.5201092304, 0.2116145679, 0.2121331669, 0.4487431007,
             0.7673833909, 0.7752366754, 0.5092498536, 0.2143066344, 0.2124165035, 0.4636345233, 0.7887368561,
             0.7887368561, 0.5661936769, 0.2485331234, 0.2562010365]
GOLDEN_HELD = [0.4074498552, 0.4135717127, 0.4135717127, 0.5195779171, 0.5161552404, 0.5186106752, 0.4484505118,
               0.4520046018, 0.4658982208, 0.5084635359, 0.50537778, 0.5078561161, 0.4634356808, 0.4611582832,
               0.4611582832, 0.566191933, 0.5690970086, 0.5827916049]


def test_sveb_preset_reproduces_the_earlier_values():
    H, group = golden_group()
    states = [State(f"{j}-{t}", "p", j, t, "") for j in H for t in (40, 101, len(H[j]))]
    est = Shear(**SVEB)                                        # w 100, s 25, eps 0.05, k 0, d_min 0.1: defaults
    np.testing.assert_allclose(est.estimate(group, states), GOLDEN_IN, rtol=0, atol=1e-6)
    held = [est.estimate(group.held_out(s), [s])[0] for s in states]
    np.testing.assert_allclose(held, GOLDEN_HELD, rtol=0, atol=1e-6)


def test_the_registered_preset_is_sveb_earlier_construction():
    from sveb import estimators as reg
    if "shear-sveb" not in reg.entries():
        pytest.skip("shear-sveb not registered")
    assert reg.entry("shear-sveb").preset == SVEB
    est = make("shear-sveb")
    assert {k: getattr(est, k) for k in SVEB} == SVEB
    assert (est.w, est.s, est.eps, est.exact, est.k, est.d_min, est.layer) == (100, 25, 0.05, False, 0, 0.1, -1)


def test_shared_history_gets_its_rollouts_reward():
    rng = np.random.default_rng(6)
    good, bad = rng.normal(size=(60, 8)) + 2, rng.normal(size=(60, 8)) - 2
    H = {j: ((good if j % 2 == 0 else bad) + 0.05 * rng.normal(size=(60, 8))).astype(np.float32) for j in range(6)}
    group = make_group(H, [1 - j % 2 for j in range(6)])
    est = Shear(**SVEB, w=20, s=5, d_min=1e-3)  # the old clamp: near-identical spans dominate
    assert est.estimate(group.without(0), [State("a", "p", 0, 40, "")])[0] > 0.95
    assert Shear(**SVEB, w=20, s=5).estimate(group.without(0), [State("a", "p", 0, 40, "")])[0] > 0.9
    assert est.estimate(group.without(1), [State("b", "p", 1, 40, "")])[0] < 0.05
    C = dict(readout="contrast")
    for state in (State("a", "p", 0, 40, ""), State("b", "p", 1, 40, "")):   # the paper's rules
        want = 1 - state.rollout_idx
        assert abs(Shear(w=20, s=5, **C).estimate(group, [state])[0] - want) < 0.05
        assert abs(Shear(w=20, s=5, span="trailing", **C).estimate(group.held_out(state), [state])[0] - want) < 0.05
        # held-out, the prefix's covering spans are cut at t (lengths 20, 15, 10, 5): the short ones match no
        # span of another rollout as closely, and the maximum takes their distance: less sure, same side
        assert abs(Shear(w=20, s=5, **C).estimate(group.held_out(state), [state])[0] - want) < 0.2


def test_k_nearest_and_edge_cases():
    rng = np.random.default_rng(7)
    base = rng.normal(size=(30, 3)).astype(np.float32)
    H = {0: base, 1: base + 0.01, 2: base + 5, 3: base + 6}
    group = make_group(H, [1, 1, 0, 0])
    s = State("a", "p", 0, 20, "")
    held = group.without(0)
    assert Shear(**SVEB, w=10, s=5, k=1).estimate(held, [s])[0] == 1.0                 # nearest: rollout 1
    assert 0.5 < Shear(**SVEB, w=10, s=5, k=0).estimate(held, [s])[0] < 1.0
    assert Shear(**SVEB, w=10, s=5, k=1, exact=True).estimate(group, [s])[0] == 1.0    # own past span, distance 0
    assert Shear(**SVEB, w=40, s=5, k=1).estimate(group, [s])[0] == 1.0                 # t < w: own rollout unusable
    for params in (SVEB, {}):
        assert list(Shear(**params).estimate(held.without(1).without(2).without(3), [s])) == [0.5]
        assert Shear(**params).estimate(group, [State("z", "p", 0, 0, "")])[0] == 0.5   # empty prefix: group mean
    # contrast: no incorrect rollout compared (SHEAR's empty opposing set): the group mean
    for readout in ("contrast", "base"):                      # the base rate itself is 1 there
        assert Shear(w=10, s=5, readout=readout).estimate(held.without(2).without(3), [s])[0] == 1.0
        assert Shear(w=10, s=5, readout=readout).estimate(group.without(2).without(3), [s])[0] == 1.0
    assert 0.9 < Shear(w=10, s=5, readout="contrast").estimate(held, [s])[0] < 1.0
    assert 1 / 3 < Shear(w=10, s=5, readout="base").estimate(held, [s])[0] < 1.0          # b 1/3, nearer correct
    est = make("shear", {"w": "50", "exact": "true", "k": "3", "readout": "knn", "compare": "all"})
    assert (est.w, est.exact, est.k, est.readout, est.compare, est.needs_hidden) == (50, True, 3, "knn", "all", True)
    with pytest.raises(UsageError, match="minimum"):
        make("shear", {"minimum": "mean"})
