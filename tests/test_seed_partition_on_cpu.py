"""Seeds are replicates by construction (issue 56, deliverable 2): a domain's seeds are a stratified partition of its
source. Every builtin domain: 8 test seeds of 150 and 4 train seeds of 200 fill, pairwise disjoint and apart from
the other split; each seed's level mix is the generator's (exactly) and its answer-type mix the source's (within a
binomial bound); a seed beyond the slots, or a request a slot cannot hold, is a one-line error; a problem's seed
does not depend on how many candidates are asked. Dataset files: the same, stratified on their level/subject
field, and a split too small to deal into seeds says so."""

from __future__ import annotations

import json
import math
from collections import Counter
from itertools import combinations

import pytest

from sveb.core.errors import UsageError
from sveb.data_builders import DOMAINS, domain_module, split_of
from sveb.data_builders.load import load_problems, scan
from sveb.data_builders.seeds import SLOTS, allocate, dataset_slots

N_TEST, N_TRAIN = 150, 200


def _ids(ps: list[dict]) -> list[str]:
    return [p["problem_id"] for p in ps]


def _level(p: dict):
    return json.loads(p["meta"])["level"]


def _draws(domain: str, n: int, split: str) -> dict[int, list[dict]]:
    return {s: load_problems(domain, "builtin", n, s, split)[0] for s in range(SLOTS[split])}


@pytest.fixture(scope="module")
def test_draws():
    return {d: _draws(d, N_TEST, "test") for d in DOMAINS}


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_test_seed_of_150_fills_disjoint_with_the_generators_level_mix(domain, test_draws):
    draws, levels = test_draws[domain], domain_module(domain).LEVELS
    want = {lv: k for lv, k in allocate(N_TEST, levels).items() if k}
    assert len(draws) == 8 >= 6
    for s, ps in draws.items():
        assert len(set(_ids(ps))) == N_TEST and all(split_of(pid) == "test" for pid in _ids(ps))
        assert Counter(map(_level, ps)) == want, (domain, s)  # level x seed: the same counts on every seed
        assert all(isinstance(_level(p), int) and p["answer_type"] for p in ps)  # what pooling's test reads
    for a, b in combinations(draws, 2):
        assert not set(_ids(draws[a])) & set(_ids(draws[b])), (domain, a, b)
    # Webster's shares are the weights' within one problem per level
    total = sum(w for w in levels.values() if w > 0)
    assert all(abs(k - N_TEST * levels[lv] / total) <= 1 for lv, k in want.items())


def _type_share(domain: str, split: str) -> dict[int, Counter]:
    """Each level's answer-type shares in its whole pool of the split (what a seed samples from)."""
    from sveb.data_builders.seeds import LEVEL_POOLS
    mod = domain_module(domain)
    mod.builtin(1, 0, split)  # builds the pools
    pools = next(v for (d, *_), v in LEVEL_POOLS.items() if d == domain)
    return {lv: Counter(p["answer_type"] for p in ps if split_of(p["problem_id"]) == split)
            for lv, ps in pools.items()}


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_seeds_answer_types_match_the_source_within_a_binomial_bound(domain, test_draws):
    """A seed's count of an answer type is a sum over levels of draws from that level's share p_l: its sd is at
    most sqrt(sum k_l p_l (1 - p_l)) (sampling without replacement only narrows it). |count - expected| <= 4 sd + 1
    fails a correct partition with probability < 1e-4 per cell (< 1% over the 5 x 8 x 3 cells); a seed that drew
    one type only, as general's seeds 1-2 did before, is many sd away."""
    shares = _type_share(domain, "test")
    want = allocate(N_TEST, domain_module(domain).LEVELS)
    types = {t for c in shares.values() for t in c}
    for s, ps in test_draws[domain].items():
        got = Counter(p["answer_type"] for p in ps)
        for t in types:
            p = {lv: shares[lv][t] / sum(shares[lv].values()) for lv in shares}
            expected = sum(want[lv] * p[lv] for lv in shares)
            sd = math.sqrt(sum(want[lv] * p[lv] * (1 - p[lv]) for lv in shares))
            assert abs(got[t] - expected) <= 4 * sd + 1, (domain, s, t, got[t], expected)


@pytest.mark.parametrize("domain", DOMAINS)
def test_pooling_composition_test_finds_the_seeds_replicates(domain, test_draws):
    """The composition test pooling refuses seeds by (sveb.score.composition, p < 0.01) passes every domain's
    first 6 seeds on the candidates' meta level and answer type."""
    from sveb.score.composition import P_REFUSE, composition
    seeds = list(range(6))
    problems = [[{"level": _level(p), "answer_type": p["answer_type"]} for p in test_draws[domain][s]] for s in seeds]
    rows = composition(seeds, problems)
    assert [r["factor"] for r in rows] == ["level", "answer_type"]
    assert all(r["p"] >= P_REFUSE for r in rows), rows
    assert rows[0]["p"] == pytest.approx(1.0)  # identical level counts on every seed


@pytest.mark.parametrize("domain", ["math", "general"])
def test_question_templates_are_replicated_across_the_8_seeds(domain, test_draws):
    """Within a level a seed takes a seeded sample of its slot, so its question templates are the level's too:
    template x seed passes the same test (p >= 0.01) over all 8 test seeds."""
    from sveb.score.composition import P_REFUSE, composition
    draws = test_draws[domain]
    rows = composition(list(draws), [[{"template": json.loads(p["meta"])["template"]} for p in ps]
                                     for ps in draws.values()], factors=("template",))
    assert rows[0]["p"] >= P_REFUSE, rows


def test_general_seeds_mix_their_question_templates():
    """Level 2 of general is four yes/no templates, and every seed holds each of them (the old seeds 1-2 were
    all one level, two templates)."""
    for s in range(6):
        ps = load_problems("general", "builtin", N_TEST, s, "test")[0]
        templates = Counter(json.loads(p["meta"])["template"] for p in ps if _level(p) == 2)
        assert set(templates) == {"parity", "compare", "divisible", "sum_check"}, (s, templates)
        assert Counter(p["answer_type"] for p in ps) == {"string": 90, "math": 60}


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_train_seed_of_200_fills_disjoint_and_apart_from_the_test_seeds(domain, test_draws):
    train = _draws(domain, N_TRAIN, "train")
    assert len(train) == 4
    for a, b in combinations(train, 2):
        assert not set(_ids(train[a])) & set(_ids(train[b]))
    every_test = set().union(*map(set, map(_ids, test_draws[domain].values())))
    for ps in train.values():
        assert len(set(_ids(ps))) == N_TRAIN and not set(_ids(ps)) & every_test
        assert all(split_of(pid) == "train" for pid in _ids(ps))


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_problems_seed_does_not_depend_on_n_and_draws_repeat(domain, test_draws):
    for s in (0, 5):
        small = _ids(load_problems(domain, "builtin", 30, s, "test")[0])
        assert small == _ids(load_problems(domain, "builtin", 30, s, "test")[0])  # same inputs, same draw
        assert set(small) <= set(_ids(test_draws[domain][s]))  # a larger n keeps the smaller n's problems
        others = set().union(*(set(_ids(v)) for k, v in test_draws[domain].items() if k != s))
        assert not set(small) & others


def test_a_seed_beyond_the_slots_is_a_one_line_error():
    with pytest.raises(UsageError) as e:
        load_problems("math", "builtin", 10, 8, "test")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith("--seed 8: builtin math deals its test problems into 8 disjoint seed slots, "
                                   "so it has seeds 0-7")
    with pytest.raises(UsageError, match=r"^--seed 4: builtin number deals its train problems into 4 .*seeds 0-3"):
        load_problems("number", "builtin", 10, 4, "train")


def test_a_request_a_slot_cannot_hold_names_domain_seed_level_and_what_to_do():
    with pytest.raises(UsageError) as e:
        load_problems("general", "builtin", 400, 2, "test", ask="--problems 100 x --oversample 4")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--seed 2: builtin general (domain general) holds ")
    assert " test problems of level 1 in this seed's slot, 80 needed for --problems 100 x --oversample 4" in msg
    assert msg.endswith("ask for fewer candidates (--problems x --oversample) or use a larger source")


def test_allocate_is_proportional_and_house_monotone():
    w = {1: 2.0, 2: 1.0, 3: 1.5, 4: 2.0, 5: 0.0}
    assert allocate(150, w) == {1: 46, 2: 23, 3: 35, 4: 46}
    assert allocate(0, w) == {1: 0, 2: 0, 3: 0, 4: 0}
    prev = allocate(1, w)
    for n in range(2, 400):
        cur = allocate(n, w)
        assert sum(cur.values()) == n and all(cur[k] >= prev[k] for k in cur)
        prev = cur
    assert allocate(10, {"a": 7, "b": 3}) == {"a": 7, "b": 3}  # exact quotas are kept


# ---------------------------------------------------------------- dataset files

def _math500(path, levels=5, per_level=280, subjects=("Algebra", "Geometry")):
    """A MATH-500-schema file: `level` 1..levels, distinct questions."""
    rows = [{"problem": f"Level {lv} problem {i}: what is {i} + {lv}?", "answer": str(i + lv), "level": lv,
             "subject": subjects[i % len(subjects)]} for lv in range(1, levels + 1) for i in range(per_level)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_a_dataset_is_dealt_into_seeds_within_each_level(tmp_path):
    src = f"math500={_math500(tmp_path / 'test.jsonl')}"
    split = scan("math", src).of_split("test")  # 1,400 rows, about 700 test: 4 slots of 150 or more
    slots = dataset_slots("test", len(split))
    draws = {s: load_problems("math", src, 100, s, "test")[0] for s in range(slots)}
    assert slots == 4
    for a, b in combinations(draws, 2):
        assert not set(_ids(draws[a])) & set(_ids(draws[b]))
    for ps in draws.values():
        mix = Counter(_level(p) for p in ps)
        assert sum(mix.values()) == 100 and set(mix) == {1, 2, 3, 4, 5}
        assert all(15 <= k <= 25 for k in mix.values())  # the split's level mix (about 1/5 each), to rounding
        assert all(json.loads(p["meta"]).get("stratum") is None for p in ps)  # the field is `level` itself
    with pytest.raises(UsageError, match=r"^--seed 4: --source math500=.* into 4 disjoint seed slots"):
        load_problems("math", src, 10, 4, "test")
    with pytest.raises(UsageError, match="problems of level .* in this seed's slot"):
        load_problems("math", src, 300, 0, "test")


def test_a_subject_field_is_the_stratum_and_level_carries_it(tmp_path):
    rows = [{"question": f"Q{i}: which?", "choices": ["a", "b", "c", "d"], "answer": i % 4,
             "subject": ["physics", "chemistry", "biology"][i % 3]} for i in range(900)]
    path = tmp_path / "mmlu.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ps = load_problems("science", f"mmlu-stem={path}", 90, 1, "test")[0]
    metas = [json.loads(p["meta"]) for p in ps]
    assert all(m["level"] == m["subject"] and m["stratum"] == "subject" for m in metas)
    assert all(25 <= k <= 35 for k in Counter(m["level"] for m in metas).values())


def test_a_split_too_small_to_deal_is_one_slot_and_a_later_seed_says_it_overlaps(chain_source):
    src, warned = str(chain_source), []
    test = load_problems("number", src, 10_000, 0, "test")[0]  # 38 test problems: one slot, all of it at most
    assert len(test) == 38 and dataset_slots("test", 38) == 1
    assert all(_level(p) == "none" for p in test)  # no level field: one stratum, named so in meta
    seed3 = load_problems("number", src, 12, 3, "test", warn=warned.append)[0]
    assert len(seed3) == 12 and set(_ids(seed3)) <= set(_ids(test))
    assert len(warned) == 1 and "\n" not in warned[0]
    assert warned[0].startswith("--seed 3: --source ") and "too few to deal into disjoint seeds" in warned[0]
