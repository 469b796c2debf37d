"""Seeds of one config draw disjoint problems (issue 32): sequential exclusion for builtin generators and dataset
files, seed 0's draw and fingerprint unchanged, a one-line warning when the source runs out, and two pipeline builds."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import pytest

from sveb.core import schema
from sveb import store
from sveb.sample.rules import stage_fps
from sveb.core.config import BuildConfig, fingerprint
from sveb.data_builders import DOMAINS, domain_module, split_of
from sveb.data_builders import disjoint_draw
from sveb.data_builders.load import load_problems

SEEDS = range(6)


def _ids(problems: list[dict]) -> list[str]:
    return [p["problem_id"] for p in problems]


def _pairwise_disjoint(draws: dict[int, list[str]]) -> None:
    for a, b in combinations(sorted(draws), 2):
        assert not set(draws[a]) & set(draws[b]), (a, b)


def _old_builtin(domain: str, n: int, seed: int, split: str) -> list[str]:
    """The draw before seeds were made disjoint: seed s's own stream, with nothing skipped but repeats."""
    mod, got = domain_module(domain), {}

    def record(_domain, _n, _seed, _split, levels, make, **kw):
        got.update(levels=levels, make=make)
        return []
    orig = mod.sample_builtin
    mod.sample_builtin = record
    try:
        mod.builtin(n, seed, split)
    finally:
        mod.sample_builtin = orig
    rng = random.Random(f"{domain}-builtin-{seed}")
    kept = [lv for lv, w in got["levels"].items() if w > 0]
    weights = [got["levels"][lv] for lv in kept]
    out: list[str] = []
    while len(out) < n:
        pid = got["make"](rng.choices(kept, weights)[0], rng)["problem_id"]
        if split_of(pid) == split and pid not in out:
            out.append(pid)
    return out


def _old_dataset(problems: list[dict], n: int, seed: int) -> list[str]:
    pool = sorted(problems, key=lambda p: p["problem_id"])
    random.Random(seed).shuffle(pool)
    return _ids(pool[:n])


def _keeps_its_own_order(new: list[str], old: list[str], earlier: set[str]) -> None:
    """Seed s changed only where it overlapped: its plain draw less the earlier seeds' problems leads its list."""
    kept = [pid for pid in old if pid not in earlier]
    assert new[:len(kept)] == kept


@pytest.mark.parametrize("domain", DOMAINS)
def test_builtin_seeds_are_pairwise_disjoint_and_seed_0_is_the_old_draw(domain):
    n, warned = 30, []  # 6 x 30 fits every generator's test half
    draws = {s: _ids(domain_module(domain).builtin(n, s, "test", warn=warned.append)) for s in SEEDS}
    assert not warned and all(len(d) == len(set(d)) == n for d in draws.values())
    _pairwise_disjoint(draws)
    assert draws[0] == _old_builtin(domain, n, 0, "test")
    earlier: set[str] = set()
    for s in (1, 2, 3):
        earlier |= set(draws[s - 1])
        _keeps_its_own_order(draws[s], _old_builtin(domain, n, s, "test"), earlier)
    # load_problems draws exactly this, and the same again
    assert _ids(load_problems(domain, "builtin", n, 4, "test")[0]) == draws[4]


def test_the_committed_number_builds_keep_seed_0_and_drew_overlapping_seeds_before():
    # the powered preset's candidates (50 x 3, builtin number, test): seed 0 unchanged; the old rule overlapped
    old = {s: _old_builtin("number", 150, s, "test") for s in SEEDS}
    new = {s: _ids(domain_module("number").builtin(150, s, "test")) for s in SEEDS}
    assert new[0] == old[0]
    assert any(set(old[a]) & set(old[b]) for a, b in combinations(SEEDS, 2))
    _pairwise_disjoint(new)


def _write_dataset(path: Path, rows: int = 420) -> Path:
    """A DAPO-schema file (the number domain's paper source, read as a plain path) of distinct questions."""
    qs = [f"What is {a} * {b} + {c}?" for a in range(2, 9) for b in range(2, 9) for c in range(1, 10)][:rows]
    path.write_text("\n".join(json.dumps({"prompt": q, "solution": str(eval(q[8:-1]))}) for q in qs))
    return path


def test_a_dataset_file_is_partitioned_by_seed(tmp_path):
    src = str(_write_dataset(tmp_path / "dapo.jsonl"))
    n, warned = 30, []
    draws = {s: _ids(load_problems("number", src, n, s, "test", warn=warned.append)[0]) for s in SEEDS}
    assert not warned and all(len(d) == n for d in draws.values())
    _pairwise_disjoint(draws)
    pool = load_problems("number", src, 10_000, 0, "test")[0]
    assert len(pool) >= 6 * n
    assert draws[0] == _old_dataset(pool, n, 0)
    earlier: set[str] = set()
    for s in SEEDS[1:]:
        earlier |= set(draws[s - 1])
        _keeps_its_own_order(draws[s], _old_dataset(pool, n, s), earlier)
    # the train half is its own pool: its seeds are disjoint too, and never meet the test half
    train = {s: _ids(load_problems("number", src, n, s, "train")[0]) for s in (0, 1, 2)}
    _pairwise_disjoint(train)
    assert not set().union(*train.values()) & set().union(*draws.values())


def test_disjoint_draw_is_a_partition_while_the_pool_lasts():
    pool = list(range(100))
    draws = {s: disjoint_draw(pool, 25, s) for s in range(5)}
    assert [r for _, r in draws.values()] == [0, 0, 0, 0, 25]
    assert sorted(x for s in range(4) for x in draws[s][0]) == pool
    assert draws[0][0] == _shuffled(pool, 0)[:25]
    assert draws[4][0] == _shuffled(pool, 4)[:25]  # nothing fresh is left: the seed's plain draw, all repeats
    assert disjoint_draw(pool, 150, 0) == (_shuffled(pool, 0), 0)  # a pool smaller than n: all of it, as before
    assert disjoint_draw(pool, 150, 1) == (_shuffled(pool, 1), 100)


def _shuffled(pool, seed):
    out = list(pool)
    random.Random(seed).shuffle(out)
    return out


def test_a_source_too_small_for_the_seed_says_so_in_one_line(chain_source):
    # 38 test problems, 12 candidates a seed: seeds 0-2 are disjoint, seed 3 has 2 fresh ones and repeats 10
    src, warned = str(chain_source), []
    draws = {s: _ids(load_problems("number", src, 12, s, "test")[0]) for s in (0, 1, 2)}
    _pairwise_disjoint(draws)
    seed3 = _ids(load_problems("number", src, 12, 3, "test", warn=warned.append,
                               ask="--problems 4 x --oversample 3")[0])
    assert len(warned) == 1 and "\n" not in warned[0]
    assert warned[0].startswith("--seed 3: --source ")
    assert ("holds 38 usable test problems, enough for seeds 0-2 at --problems 4 x --oversample 3; "
            "10 of this seed's 12 candidates repeat problems of seeds 0-2") in warned[0]
    earlier = set().union(*draws.values())
    assert len(seed3) == 12 and [pid in earlier for pid in seed3] == [False] * 2 + [True] * 10
    # a seed beyond any fresh problem: everything repeats (as every seed did before), and it says so
    more: list[str] = []
    assert len(load_problems("number", src, 12, 7, "test", warn=more.append)[0]) == 12
    assert "--seed 7:" in more[0] and "12 of this seed's 12 candidates repeat problems of seeds 0-6" in more[0]


def test_a_builtin_generator_that_runs_out_says_so():
    warned: list[str] = []
    seed2 = domain_module("math").builtin(200, 2, "test", warn=warned.append, ask="--problems 50 x --oversample 4")
    assert len(seed2) == len(set(_ids(seed2))) == 200
    assert len(warned) == 1 and warned[0].startswith("--seed 2: builtin math holds about ")
    assert "enough for seeds 0-1 at --problems 50 x --oversample 4" in warned[0]


def test_seed_0_fingerprints_are_unchanged_and_later_seeds_are_marked():
    def old_problems_fp(cfg: BuildConfig) -> str:
        return fingerprint("problems", cfg.domain, cfg.source, cfg.split, cfg.problems * cfg.oversample, cfg.seed,
                           schema.SCHEMA_VERSION)
    for seed in (0, 1, 3):
        cfg = BuildConfig(seed=seed)
        assert (stage_fps(cfg)["problems"] == old_problems_fp(cfg)) == (seed == 0)
    assert stage_fps(BuildConfig())["problems"] == "e5c89dd0ae89"


def test_two_pipeline_builds_of_two_seeds_hold_disjoint_problems(tmp_path, small_cfg):
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    root = tmp_path / "root"
    tables = {}
    for seed in (0, 1):
        bdir = build(replace(small_cfg, seed=seed), root, engine=ScriptedEngine())
        cands = _ids(store.read_table(bdir / "candidates", schema.PROBLEMS).to_pylist())
        kept = _ids(store.read_table(bdir / "problems", schema.PROBLEMS).to_pylist())
        assert kept and set(kept) <= set(cands)
        tables[seed] = (cands, kept)
    assert not set(tables[0][0]) & set(tables[1][0])
    assert not set(tables[0][1]) & set(tables[1][1])
    assert tables[0][0] == _ids(load_problems("number", small_cfg.source, 12, 0, "test")[0])


def test_a_local_model_counts_by_its_weights_not_its_path(tmp_path):
    """The rollouts fingerprint holds a local model's weights hash: a copy elsewhere gives the same build (and
    request seeds), weights changed in place another; builtin names and hub ids count as themselves."""
    import shutil
    from dataclasses import replace

    from sveb.sample.rules import model_identity, stage_fps
    from tests.test_critic import tiny_llama
    a = tiny_llama(tmp_path / "a" / "llama")
    b = tmp_path / "elsewhere" / "model"
    shutil.copytree(a, b)
    cfg = BuildConfig(domain="number", model=a, seed=1)
    assert stage_fps(cfg) == stage_fps(replace(cfg, model=str(b)))
    assert model_identity(a).startswith("weights:")
    assert model_identity("smollm2-135m") == "smollm2-135m" and model_identity("Qwen/Qwen2.5-3B-Instruct") == "Qwen/Qwen2.5-3B-Instruct"
    weights = next(p for p in b.iterdir() if p.suffix == ".safetensors")
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1  # one bit of the last tensor: other weights, same path
    weights.write_bytes(bytes(raw))
    assert stage_fps(replace(cfg, model=str(b)))["rollouts"] != stage_fps(cfg)["rollouts"]
    assert stage_fps(replace(cfg, model=str(b)))["problems"] == stage_fps(cfg)["problems"]  # the draw is the model's
