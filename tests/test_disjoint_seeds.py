"""Seeds of one config draw disjoint problems (issue 32), by a stratified partition of the source since issue 56
(tests/test_seed_partition_on_cpu.py has the per-domain composition): dataset files are dealt into seeds too, the
problems fingerprint names the draw rule, and two pipeline builds of two seeds hold disjoint problems."""

from __future__ import annotations

import json
from dataclasses import replace
from itertools import combinations
from pathlib import Path

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, fingerprint
from sveb.data_builders.load import load_problems, scan
from sveb.data_builders.seeds import DRAW, SLOTS, dataset_slots
from sveb.sample.rules import stage_fps

SEEDS = range(8)


def _ids(problems: list[dict]) -> list[str]:
    return [p["problem_id"] for p in problems]


def _pairwise_disjoint(draws: dict[int, list[str]]) -> None:
    for a, b in combinations(sorted(draws), 2):
        assert not set(draws[a]) & set(draws[b]), (a, b)


def _write_dataset(path: Path) -> Path:
    """A DAPO-schema file (the number domain's paper source, read as a plain path) of 3,249 distinct questions."""
    qs = [f"What is {a} * {b} + {c}?" for a in range(2, 21) for b in range(2, 21) for c in range(1, 10)]
    path.write_text("\n".join(json.dumps({"prompt": q, "solution": str(eval(q[8:-1]))}) for q in qs))
    return path


def test_a_dataset_file_is_partitioned_by_seed(tmp_path):
    src = str(_write_dataset(tmp_path / "dapo.jsonl"))
    n, warned = 30, []
    draws = {s: _ids(load_problems("number", src, n, s, "test", warn=warned.append)[0]) for s in SEEDS}
    assert not warned and all(len(set(d)) == n for d in draws.values())
    _pairwise_disjoint(draws)
    assert dataset_slots("test", len(scan("number", src).of_split("test"))) == SLOTS["test"] == 8
    # a seed's problems do not depend on n: the 30 are among the 150 of the same seed, and in no other seed's 150
    wide = {s: set(_ids(load_problems("number", src, 150, s, "test")[0])) for s in (0, 7)}
    assert set(draws[0]) <= wide[0] and set(draws[7]) <= wide[7] and not wide[0] & wide[7]
    # the train half is its own partition (4 seeds): disjoint too, and never meets the test half
    train = {s: _ids(load_problems("number", src, n, s, "train")[0]) for s in range(SLOTS["train"])}
    _pairwise_disjoint(train)
    assert not set().union(*train.values()) & set().union(*draws.values())


def test_the_problems_fingerprint_names_the_draw_rule():
    """Every seed's candidates changed with the partition (seed 0's too), so no build drawn by the old rules
    (sequential exclusion, or each seed on its own) is reused: the problems fingerprint carries DRAW."""
    def without_rule(cfg: BuildConfig) -> str:
        return fingerprint("problems", cfg.domain, cfg.source, cfg.split, cfg.problems * cfg.oversample, cfg.seed,
                           schema.SCHEMA_VERSION)
    for seed in (0, 1, 3):
        cfg = BuildConfig(seed=seed)
        assert stage_fps(cfg)["problems"] == fingerprint("problems", cfg.domain, cfg.source, cfg.split,
                                                         cfg.problems * cfg.oversample, cfg.seed,
                                                         schema.SCHEMA_VERSION, DRAW)
        assert stage_fps(cfg)["problems"] != without_rule(cfg)
    assert stage_fps(BuildConfig())["problems"] == "d347649cce7e"


def _sums(path: Path) -> Path:
    """1,600 'What is a + b?' questions (the scripted engine answers them): about 800 test problems, 5 seeds."""
    rows = [{"prompt": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 41) for b in range(1, 41)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_two_pipeline_builds_of_two_seeds_hold_disjoint_problems(tmp_path, small_cfg):
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    root = tmp_path / "root"
    src = str(_sums(tmp_path / "sums.jsonl"))
    tables = {}
    for seed in (0, 1):
        bdir = build(replace(small_cfg, source=src, seed=seed), root, engine=ScriptedEngine())
        cands = _ids(store.read_table(bdir / "candidates", schema.PROBLEMS).to_pylist())
        kept = _ids(store.read_table(bdir / "problems", schema.PROBLEMS).to_pylist())
        assert kept and set(kept) <= set(cands)
        tables[seed] = (cands, kept)
    assert not set(tables[0][0]) & set(tables[1][0])
    assert not set(tables[0][1]) & set(tables[1][1])
    assert tables[0][0] == _ids(load_problems("number", src, 12, 0, "test")[0])


def test_a_local_model_counts_by_its_weights_not_its_path(tmp_path):
    """The rollouts fingerprint holds a local model's weights hash: a copy elsewhere gives the same build (and
    request seeds), weights changed in place another; builtin names and hub ids count as themselves."""
    import shutil
    from dataclasses import replace

    from sveb.sample.rules import model_identity, stage_fps
    from tests.helpers.tiny_llama import tiny_llama
    a = tiny_llama(tmp_path / "a" / "llama")
    b = tmp_path / "elsewhere" / "model"
    shutil.copytree(a, b)
    cfg = BuildConfig(domain="number", model=a, seed=1)
    assert stage_fps(cfg) == stage_fps(replace(cfg, model=str(b)))
    assert model_identity(a).startswith("weights:")
    assert model_identity("smollm2-135m") == "smollm2-135m"
    assert model_identity("Qwen/Qwen2.5-3B-Instruct") == "Qwen/Qwen2.5-3B-Instruct"
    weights = next(p for p in b.iterdir() if p.suffix == ".safetensors")
    raw = bytearray(weights.read_bytes())
    raw[-1] ^= 1  # one bit of the last tensor: other weights, same path
    weights.write_bytes(bytes(raw))
    assert stage_fps(replace(cfg, model=str(b)))["rollouts"] != stage_fps(cfg)["rollouts"]
    assert stage_fps(replace(cfg, model=str(b)))["problems"] == stage_fps(cfg)["problems"]  # the draw is the model's
