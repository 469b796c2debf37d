"""Numca: milestone extraction, Algorithm 1's table, fallbacks, in-group vs held-out."""

import random

import numpy as np
import pytest

from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.numca_sveb import NumcaSVEB as Numca
from sveb.estimators.numca_sveb import abstract_path, build_table, milestones, milestones_upto


@pytest.mark.parametrize("text, expected", [
    ("the total is 12", set()),                      # may be cut: 12 -> 125
    ("the total is 12.", {"12"}),
    ("the total is 12 ", {"12"}),
    ("we have 1,000 apples", {"1000"}),
    ("costs $1{,}234.50$ now", {"1234.5"}),
    ("3.50 and 3.5 and 03.500", {"3.5"}),
    ("x = -0 and +0.0 ", {"0"}),
    ("so -7 and (-3, 4)", {"-7", "-3", "4"}),
    ("5-3=2 ", {"5", "3", "2"}),                    # binary minus is not a sign
    ("x-1 ", {"1"}),
    (r"$\frac{3}{4}$ and 6/8 ", {"3/4"}),            # one value, one milestone
    (r"gives -\frac{1}{2} so", {"-1/2"}),
    (r"\dfrac{10}{4} ", {"5/2"}),
    ("4/2 ", {"2"}),
    ("1.5/2 ", {"1.5/2"}),
    ("a .5 b", {"0.5"}),
    ("no numbers here", set()),
])
def test_milestones(text, expected):
    assert milestones(text) == frozenset(expected)


@pytest.mark.parametrize("text, expected", [
    ("so 3/", set()),            # "3/4" may follow
    ("so 7 and 1,0", {"7"}),     # "1,000" may follow
    ("so 7 and 1,", {"7"}),
    (r"so 7 and \frac{1}{", {"7"}),
    (r"so \frac{12", set()),
    (r"\frac{1}{2}", {"1/2"}),   # closed: it cannot grow
])
def test_open_tails_are_cut(text, expected):
    assert milestones(text) == frozenset(expected)


def test_abstract_path_hand_case():
    path = abstract_path("First 3 then 4, so 3 again and 7.")
    assert path == (frozenset(), frozenset({"3"}), frozenset({"3", "4"}), frozenset({"3", "4", "7"}))


def test_abstract_path_equals_every_prefix():
    """The incremental walk equals milestones() on every character prefix."""
    rnd = random.Random(0)
    pieces = ["We", " have", " x", " =", " ", "12", "3", ".", "5", ",", "000", "/", "4", r"\frac{", "}{", "}",
              "-", " so", "\n", "(", ")", "0", "7", "{,}", " and the answer is"]
    for _ in range(150):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 250)))
        brute = [frozenset()]
        for p in range(len(text) + 1):
            s = milestones_upto(text, p)
            assert s == milestones(text[:p])
            if s != brute[-1]:
                brute.append(s)
        assert abstract_path(text) == tuple(brute), text


def test_build_table_counts_each_rollout_once():
    texts = ["a 1 b 2 c 1 d", "a 1 b 3 c", "a 5 b"]
    table = build_table(texts, [1.0, 0.0, 1.0])
    assert table[frozenset()] == pytest.approx(2 / 3)       # everyone starts there
    assert table[frozenset({"1"})] == pytest.approx(0.5)    # rollouts 0 and 1
    assert table[frozenset({"1", "2"})] == 1.0
    assert table[frozenset({"1", "3"})] == 0.0
    assert table[frozenset({"5"})] == 1.0


def group_of(texts, rewards):
    rolls = tuple(Rollout(i, (), (), t, r) for i, (t, r) in enumerate(zip(texts, rewards)))
    return ProblemGroup({}, rolls)


def state(i, prefix):
    return State(f"s{i}-{len(prefix)}", "p", i, len(prefix), prefix)


def test_estimate_values_and_fallbacks():
    texts = ["so 2 and 3 then 10 done", "so 2 and 4 then 9 done", "so 2 and 3 then 11 done", "so 8 done"]
    g = group_of(texts, [1.0, 0.0, 1.0, 0.0])
    est = Numca()
    v = est.estimate(g, [state(0, "so"), state(0, "so 2 and 3 th"), state(1, "so 2 and 4 then 9 "),
                         state(0, "so 2 and 3 then 1")])
    assert v[0] == pytest.approx(0.5)          # empty set: group mean
    assert v[1] == pytest.approx(1.0)          # {2, 3}: rollouts 0 and 2
    assert v[2] == pytest.approx(0.0)          # {2, 4, 9}: rollout 1 only
    assert v[3] == pytest.approx(1.0)          # "1" is cut: still {2, 3}
    # an abstract state nobody reached falls back to the latest one the prefix passed through
    assert est.estimate(g, [state(0, "so 2 and 3 then 99 ")])[0] == pytest.approx(1.0)
    assert est.estimate(g, [state(0, "so 77 and 3 then 99 ")])[0] == pytest.approx(0.5)


def test_held_out_differs_from_in_group():
    texts = ["so 2 and 3 then 10 done", "so 2 and 5 then 9 done", "so 2 and 6 then 11 done"]
    g = group_of(texts, [1.0, 0.0, 0.0])
    s = state(0, "so 2 and 3 then ")
    assert Numca().estimate(g, [s])[0] == pytest.approx(1.0)
    # without its own rollout {2, 3} is unseen: back to {2}, reached by rollouts 1 and 2
    assert Numca().estimate(g.without(0), [s])[0] == pytest.approx(0.0)


def test_empty_group_and_registry():
    g = group_of(["so 1 done"], [1.0]).without(0)
    assert Numca().estimate(g, [state(0, "so 1 ")])[0] == 0.5
    est = make("numca-sveb")
    assert est.name == "numca-sveb" and not est.needs_hidden
    assert isinstance(est.estimate(group_of(["1 "], [1.0]), []), np.ndarray)
