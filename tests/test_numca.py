"""Numca as its authors compute it: each rule on a hand case whose value is worked out by hand."""

import pytest

from sveb.core.errors import UsageError
from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.numca import Numca, build_table, merge_positions, parse, set_path


def group_of(texts, rewards):
    return ProblemGroup({}, tuple(Rollout(i, (), (), t, r) for i, (t, r) in enumerate(zip(texts, rewards))))


def at(i, text, cut):
    return State(f"s{i}-{cut}", "p", i, cut, text[:cut])


def test_numbers_are_raw_digit_runs_and_the_last_is_dropped():
    assert parse("x 3.5 y 05 z 5 w 12") == (["3", "5", "05", "5"], [2, 4, 8, 13])
    assert parse("\u0663\u0664 and \uff17 then 9")[0] == ["\u0663\u0664", "\uff17"]  # Arabic-Indic, fullwidth
    assert parse("no numbers") == ([], [])
    assert parse("only 7") == ([], [])
    assert parse("only 7", drop_last=False) == (["7"], [5])


def test_merge_cascades_backwards():
    assert merge_positions([0, 10, 30, 100, 160, 200]) == [30, 30, 30, 100, 200, 200]
    assert merge_positions([0, 60], 50) == [0, 60]
    assert merge_positions([]) == []


def test_table_counts_each_response_once_per_set():
    t = build_table([["1", "2", "1"], ["1", "3"], ["5"]], [1.0, 0.0, 1.0])
    assert t[frozenset()] == (3.0, 2.0)
    assert t[frozenset({"1"})] == (2.0, 1.0)
    assert set_path(["1", "2", "1"]) == [frozenset(), frozenset({"1"}), frozenset({"1", "2"})]


# Two responses, numbers 60 characters apart (no merging); the last number of each is dropped.
A = "a" * 10 + "1" + "a" * 59 + "2" + "a" * 59 + "9"     # numbers 1 @10, 2 @70, (9 dropped)
B = "b" * 10 + "1" + "b" * 59 + "3" + "b" * 59 + "8"     # 1 @10, 3 @70
C = "c" * 10 + "4" + "c" * 59 + "7"                      # 4 @10


def test_value_is_the_root_plus_the_advantages_before_the_cut():
    g = group_of([A, B, C], [1.0, 0.0, 1.0])
    v = Numca(clip=False).estimate(g, [at(0, A, 5), at(0, A, 10), at(0, A, 11), at(0, A, 70), at(0, A, 71),
                                      at(0, A, len(A))])
    # V({}) = 2/3; V({1}) = 1/2; V({1,2}) = 1. A number counts once its start is at or before the cut: the
    # cut at 10 already holds "1" (the character after the prefix); the end gives the own final reward.
    assert v == pytest.approx([2 / 3, 1 / 2, 1 / 2, 1.0, 1.0, 1.0])


def test_an_advantage_equal_to_the_next_is_skipped():
    own = "x1" + " " * 60 + "2" + " " * 60 + "0"          # numbers 1 @1, 2 @62 (0 dropped)
    g = group_of([own, "x1" + " " * 60 + "2 0", "x1 0", "x1 0", "5 0", "5 0", "5 0", "5 0"],
                 [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0])
    # V({}) = 4/8, V({1}) = 3/4, V({1,2}) = 2/2: advantages +1/4 and +1/4, equal, so the first is not added
    assert Numca(clip=False).estimate(g, [at(0, own, 70)])[0] == pytest.approx(0.75)
    assert Numca(clip=False, read="table").estimate(g, [at(0, own, 70)])[0] == pytest.approx(1.0)
    g2 = group_of([own, "x1" + " " * 60 + "2 0", "x5 0", "x5 0"], [1.0, 0.0, 1.0, 0.0])
    # V({}) = V({1}) = V({1,2}) = 1/2: both advantages 0 (skipped, adding nothing); the segment after the
    # last number (own reward 1 - 1/2) is added once the cut reaches the end
    assert Numca(clip=False).estimate(g2, [at(0, own, 70)])[0] == pytest.approx(0.5)
    assert Numca(clip=False).estimate(g2, [at(0, own, len(own))])[0] == pytest.approx(1.0)


def test_a_number_at_character_0_adds_no_segment():
    own = "7" + " " * 60 + "2" + " " * 60 + "0"
    g = group_of([own, "7 0", "5 0", "5 0"], [1.0, 1.0, 0.0, 0.0])
    # V({}) = 1/2, V({7}) = 1, V({7,2}) = 1: "7" at 0 moves the set without a segment; "2" adds 0
    assert Numca(clip=False).estimate(g, [at(0, own, 70)])[0] == pytest.approx(0.5)


def test_held_out_sees_the_prefix_only():
    own = A
    g = group_of([A, B, C], [1.0, 0.0, 1.0])
    s = at(0, own, 75)
    held = Numca(clip=False).estimate(g.held_out(s), [s])[0]
    # without the own response: V({}) = 1/2, V({1}) = 0 (B only), {1,2} unseen -> 0.0 (the authors' rule)
    assert held == pytest.approx(0.0)
    assert Numca(clip=False, unseen="latest").estimate(g.held_out(s), [s])[0] == pytest.approx(0.0)
    # a digit run touching the cut may be cut: left out, so the set is {1}
    s2 = at(0, own, 71)
    assert Numca(clip=False, read="table").estimate(g.held_out(s2), [s2])[0] == pytest.approx(0.0)
    # the own outcome is never read held-out
    flipped = group_of([A, B, C], [0.0, 0.0, 1.0])
    assert Numca().estimate(flipped.held_out(s), [s])[0] == Numca().estimate(g.held_out(s), [s])[0]


def test_parameters_are_checked_and_the_preset_is_sveb_s_variant():
    with pytest.raises(UsageError, match="read"):
        make("numca", {"read": "sideways"})
    with pytest.raises(UsageError, match="merge"):
        make("numca", {"merge": "-1"})
    est = make("numca")
    assert (est.numbers, est.drop_last, est.merge, est.unseen, est.read) == ("digits", True, 50, "zero", "advantages")
    assert type(make("numca-sveb")).__name__ == "NumcaSVEB"


def test_clip_keeps_the_contract():
    # a silent step (number at 0) then a large negative advantage: the authors' read-out leaves [0, 1]
    own = "7" + " " * 60 + "2" + " " * 60 + "0"
    texts = [own, "7" + " " * 60 + "2 0"] + ["7 0"] * 10 + ["5 0"] * 20
    g = group_of(texts, [1.0, 0.0] + [1.0] * 10 + [0.0] * 20)
    # V({}) = 11/32, V({7}) = 11/12, V({7,2}) = 1/2: 11/32 + (1/2 - 11/12) < 0
    raw = Numca(clip=False).estimate(g, [at(0, own, 70)])[0]
    assert raw == pytest.approx(11 / 32 + 0.5 - 11 / 12) and Numca().estimate(g, [at(0, own, 70)])[0] == 0.0
