"""Several build seeds (`--seeds`) and states cut in pairs of one rollout (`--step-pairs`), on the scripted engine."""

from dataclasses import replace

import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.cli.common import parse_seeds
from sveb.core.errors import SvebError
from sveb.engines.scripted import ScriptedEngine
from sveb.evaluate import evaluate
from sveb.sample.pipeline import build
from sveb.store.builds import find_seed_builds


def test_parse_seeds():
    assert parse_seeds("0,1,2", 7) == [0, 1, 2] and parse_seeds(None, 7) == [7] and parse_seeds("3 5", 0) == [3, 5]
    for bad in ("0,x", "1,1", "-1", ","):
        with pytest.raises(SvebError, match="--seeds"):
            parse_seeds(bad, 0)


def test_step_pairs_cut_two_states_of_one_rollout(tmp_path, small_cfg):
    cfg = replace(small_cfg, model="smollm2-135m", step_pairs=True, states_per_problem=4)
    bdir = build(cfg, tmp_path, engine=ScriptedEngine())
    states = store.read_table(bdir / "states").to_pylist()
    by_roll: dict = {}
    for s in states:
        by_roll.setdefault((s["problem_id"], s["rollout_idx"]), []).append(s["t"])
    assert len(states) == 4 * cfg.problems
    assert all(len(ts) == 2 and ts[0] < ts[1] for ts in by_roll.values())  # two cuts per rollout, t1 < t2
    assert len(by_roll) == 2 * cfg.problems
    row = evaluate(bdir, "mcs-4", {}, "held-out")
    assert 0 < row["sign_pairs"] <= 2 * cfg.problems  # pairs whose references tie are left out
    assert 0 <= row["sign_agreement"] <= 1
    single = build(replace(cfg, step_pairs=False), tmp_path, engine=ScriptedEngine())
    assert single != bdir  # another state selection, another build


def test_seeds_give_independent_builds_that_eval_scores_and_the_leaderboard_pools(tmp_path, small_cfg):
    cfg = replace(small_cfg, model="smollm2-135m")
    root = tmp_path / "root"
    bdirs = [build(replace(cfg, seed=s), root, engine=ScriptedEngine()) for s in (3, 4, 5)]
    assert len(set(bdirs)) == 3
    problems = [set(store.read_table(b / "problems").column("problem_id").to_pylist()) for b in bdirs]
    assert problems[0] != problems[1] or problems[1] != problems[2]  # independent draws
    assert find_seed_builds(root, bdirs[0].parent.parent.name, "number", [5, 3]) == [bdirs[2], bdirs[0]]
    with pytest.raises(SvebError, match="seed 9"):
        find_seed_builds(root, None, "number", [3, 9])
    r = CliRunner().invoke(app, ["eval", "--root", str(root), "--seeds", "3,4,5", "-e", "grpo", "-e", "mcs-2",
                                 "--model", "smollm2-135m"])
    assert r.exit_code == 0, r.output
    for b in bdirs:
        assert len(list((b / "scores").glob("part-*.parquet"))) == 2
    from sveb.present.leaderboard import rows
    pooled = [x for x in rows(root) if x.get("kind") == "pooled" and x["estimator"] == "mcs-2"]
    assert pooled and pooled[0]["n_states"] == sum(store.read_manifest(b)["n_states"] for b in bdirs)
