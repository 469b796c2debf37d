"""SHEAR's base-rate read-out (readout=base, SVEB's): the group's base rate moved by the paper's distances,
b w+ / (b w+ + (1 - b) w-), w = 1 / max(d, d_min). Known answers, and the held-out contract."""

import numpy as np
import pytest

from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State, group_mean
from sveb.estimators.shear import Shear, base_rate, contrast
from sveb.evaluate.protocols import flip_own


def make_group(H, rewards):
    rolls = tuple(Rollout(j, (), tuple(range(len(H[j]))), "", float(r)) for j, r in enumerate(rewards))
    return ProblemGroup({}, rolls, hidden_fn=lambda i: H[i])


def test_base_rate_known_answers():
    good = np.array([False, True])
    assert base_rate(np.array([0.7, 0.7]), good, 0.3, 0.1) == 0.3            # equal distances: the base rate
    assert base_rate(np.array([0.05, 0.02]), good, 0.3, 0.1) == 0.3          # both clamped: equal weights
    # d- 0.6, d+ 0.2: odds 0.25 / 0.75 * 0.6 / 0.2 = 1 -> 1/2
    assert base_rate(np.array([0.6, 0.2]), good, 0.25, 0.1) == pytest.approx(0.5, abs=1e-15)
    assert base_rate(np.array([0.2, 0.6]), good, 0.75, 0.1) == pytest.approx(0.5, abs=1e-15)
    # logit(p) = logit(b) + log(d- / d+), d clamped at d_min
    b, dn, dp = 0.2, 0.9, 0.3
    p = base_rate(np.array([dn, dp]), good, b, 0.1)
    assert np.log(p / (1 - p)) == pytest.approx(np.log(b / (1 - b)) + np.log(dn / dp), abs=1e-12)
    assert base_rate(np.array([dn, 0.0]), good, b, 0.1) == pytest.approx(b * 10 / (b * 10 + (1 - b) / dn))
    # b 1/2: the contrast read-out (unclamped there)
    assert base_rate(np.array([dn, dp]), good, 0.5, 0.1) == pytest.approx(contrast(np.array([dn, dp]), good))
    # one outcome only (no finite distance to the other), or a base rate 0 / 1: the base rate
    assert base_rate(np.array([np.inf, 0.3]), good, 0.4, 0.1) == 0.4
    assert base_rate(np.array([0.3, 0.9]), good, 1.0, 0.1) == 1.0
    assert base_rate(np.array([0.3, 0.9]), good, 0.0, 0.1) == 0.0
    # per-rollout units: the nearest of each outcome
    units = np.array([0.5, 0.9, 0.2, 0.4])
    got = base_rate(units, np.array([True, False, False, True]), 0.5, 0.1)
    assert got == pytest.approx((1 / 0.4) / (1 / 0.4 + 1 / 0.2))


def small_group(seed=5, rewards=(1, 0, 1, 0, 0)):
    rng = np.random.default_rng(seed)
    H = {j: (rng.normal(size=(T, 4)) + 3).astype(np.float32) for j, T in enumerate([30, 7, 22, 41, 18])}
    return H, make_group(H, list(rewards))


def states_of(H):
    return [State(f"{j}-{t}", "p", j, t, "") for j in H for t in sorted({1, 5, len(H[j]) // 2, len(H[j]) - 1})]


@pytest.mark.parametrize("params", [dict(), dict(minimum="rollout"), dict(compare="all"), dict(span="trailing")])
def test_base_readout_is_base_rate_of_the_contrast_distances(params):
    """readout=base reads the same distances as the contrast read-out, the base rate the protocol's group mean."""
    H, group = small_group()
    est = Shear(**{**dict(w=8, s=3, exact=True, readout="base"), **params})
    for s in states_of(H):
        for g in (group, group.held_out(s)):
            (d, ur), = est.distances(g, [s])
            want = base_rate(d, ur >= 0.5, group_mean(g), est.d_min) if np.isfinite(d).any() else group_mean(g)
            assert est.estimate(g, [s])[0] == pytest.approx(want, abs=1e-12)


def test_equal_distances_give_exactly_the_base_rate():
    """Two identical rollouts of opposite outcomes: every state is as near to the correct as to the incorrect
    set, so the value is exactly the base rate (held-out: of the others, 2/4 here; in-group 3/5 or 2/5)."""
    rng = np.random.default_rng(11)
    x = (rng.normal(size=(40, 4)) + 2).astype(np.float32)
    H = {0: x, 1: x.copy(), 2: x.copy(), 3: x.copy(), 4: (rng.normal(size=(40, 4)) - 2).astype(np.float32)}
    group = make_group(H, [1, 1, 0, 0, 1])
    est = Shear(w=10, s=5, exact=True, readout="base")
    for t in (3, 12, 25, 40):
        s = State(f"4-{t}", "p", 4, t, "")                  # its own states lie far from every other rollout
        held = group.held_out(s)
        (d, _), = est.distances(held, [s])
        assert d[0] == d[1]                                  # the same spans in both sets
        assert est.estimate(held, [s])[0] == 0.5            # rollouts 0-3: two correct, two incorrect
    s = State("4-20", "p", 4, 20, "")
    assert est.estimate(group, [s])[0] == 0.6               # in-group the own (correct) outcome counts in b


def test_one_outcome_group_returns_the_group_mean():
    H, _ = small_group()
    for rewards, want in (((1, 1, 1, 1, 1), 1.0), ((0, 0, 0, 0, 0), 0.0), ((0.5, 0.5, 0.5, 0.5, 0.5), 0.5)):
        group = make_group(H, rewards)
        est = Shear(w=8, s=3, readout="base")
        for s in states_of(H)[::3]:
            assert est.estimate(group, [s])[0] == want
            assert est.estimate(group.held_out(s), [s])[0] == want
    # held-out, the other outcome only in the own rollout: the others' mean
    group = make_group(H, [1, 0, 0, 0, 0])
    s = State("0-10", "p", 0, 10, "")
    assert Shear(w=8, s=3, readout="base").estimate(group.held_out(s), [s])[0] == 0.0


def test_held_out_never_sees_the_own_outcome():
    """Held-out, flipping the state's own reward changes nothing: neither b nor the distances read it."""
    H, group = small_group(7)
    est = Shear(w=8, s=3, exact=True, readout="base")
    moved = 0
    for s in states_of(H):
        a = est.estimate(group.held_out(s), [s])[0]
        b = est.estimate(flip_own(group, s.rollout_idx).held_out(s), [s])[0]
        assert a == b
        moved += est.estimate(group, [s])[0] != est.estimate(flip_own(group, s.rollout_idx), [s])[0]
    assert moved > 0                                        # in-group it does: b is the whole group's mean


def test_base_readout_is_registered_and_moves_towards_the_nearer_outcome():
    est = make("shear", {"readout": "base", "w": "20", "s": "5"})
    assert est.readout == "base"
    rng = np.random.default_rng(6)
    good, bad = rng.normal(size=(60, 8)) + 2, rng.normal(size=(60, 8)) - 2
    H = {j: ((good if j % 2 == 0 else bad) + 0.05 * rng.normal(size=(60, 8))).astype(np.float32) for j in range(6)}
    group = make_group(H, [1 - j % 2 for j in range(6)])
    for j in (0, 1):
        s = State(f"{j}", "p", j, 40, "")
        held = group.held_out(s)
        v = est.estimate(held, [s])[0]
        b = group_mean(held)
        assert (v > b) if j == 0 else (v < b)
