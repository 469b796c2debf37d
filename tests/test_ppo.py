"""ppo-1 / ppo-n end to end on scripted builds with a tiny random Llama as the critic body; the collapse report."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from sveb import store
from sveb.core import schema
from sveb.core.errors import EvalError
from sveb.engines.scripted import ScriptedEngine
from sveb.evaluate import evaluate
from sveb.evaluate.collapse import collapse_report, collapse_stats, plot_collapse
from sveb.sample.pipeline import build
from tests.helpers.tiny_llama import tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny") / "llama")


def estimates(bdir, name):
    rows = store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
    return {(r["protocol"], r["state_id"]): r["value"] for r in rows if r["estimator"] == name}


def critic_configs(bdir):
    return sorted(json.loads(p.read_text())["n_rollouts"] for p in (bdir / "critics").glob("*/config.json"))


def test_ppo_n_end_to_end(tmp_path, small_cfg, tiny):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    params = {"critic_model": tiny, "epochs": "1", "lr": "1e-3"}
    rows = [evaluate(bdir, "ppo-n", params, protocol=p) for p in ("in-group", "held-out")]
    for row in rows:
        assert np.isfinite(row["mae"]) and row["n_states"] == 8
    est = estimates(bdir, "ppo-n")
    assert len(est) == 16
    assert all(-0.5 < v < 1.5 for v in est.values())
    # one critic on all 32 rollouts, two held-out critics on 16 each (rollout_idx % 2)
    assert critic_configs(bdir) == [16, 16, 32]
    assert len(list((bdir / "scores").glob("part-*.parquet"))) == 2


def test_ppo_1_refuses_overlapping_problems(tmp_path, small_cfg, tiny):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    with pytest.raises(EvalError, match="shares 4 problems"):
        evaluate(bdir, "ppo-1", {"critic_model": tiny, "train_build": str(bdir)})


def test_ppo_1_without_train_build_says_how_to_make_one(tmp_path, small_cfg, tiny):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    with pytest.raises(EvalError, match=r"sveb build --split train --domain number --model scripted") as e:
        evaluate(bdir, "ppo-1", {"critic_model": tiny})
    assert "\n" not in str(e.value)


def test_ppo_1_finds_train_split_build_and_collapse_report(tmp_path, small_cfg, tiny):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    tdir = build(replace(small_cfg, split="train"), tmp_path, engine=ScriptedEngine())
    test_ids = {p["problem_id"] for p in store.read_table(bdir / "problems").to_pylist()}
    train_ids = {p["problem_id"] for p in store.read_table(tdir / "problems").to_pylist()}
    assert test_ids and train_ids and not test_ids & train_ids
    params = {"critic_model": tiny, "epochs": "1", "lr": "1e-3"}
    for p in ("in-group", "held-out"):
        row = evaluate(bdir, "ppo-1", params, protocol=p)
        assert np.isfinite(row["mae"])
        evaluate(bdir, "grpo", {}, protocol=p)
    assert critic_configs(tdir) == [32] and not (bdir / "critics").exists()
    est = estimates(bdir, "ppo-1")
    ids = {sid for _, sid in est}
    assert all(est[("in-group", s)] == est[("held-out", s)] for s in ids)  # protocol-independent
    paths = collapse_report(bdir, tmp_path / "report")
    assert sorted(p.suffix for p in paths) == [".json", ".json", ".png", ".png"]
    stats = json.loads(next(p for p in paths if p.suffix == ".json").read_text())
    assert stats["estimator"] == "ppo-1" and stats["n"] == 8 and np.isfinite(stats["std"])


def test_collapse_stats_and_plot(tmp_path):
    s = collapse_stats(np.array([0.5, 0.52, 0.9, 0.1]), np.full(4, 0.5))
    assert s["n"] == 4 and s["frac_within"] == 0.5
    assert s["mean"] == pytest.approx(0.005) and s["std"] == pytest.approx(np.std([0, 0.02, 0.4, -0.4]))
    png = plot_collapse({"ppo-1": np.array([0.1, -0.2]), "ppo-n": np.array([0.0, 0.01])}, tmp_path / "h.png", "t")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_collapse_report_needs_grpo(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    evaluate(bdir, "mcs-1", {})
    with pytest.raises(ValueError, match="no grpo estimates"):
        collapse_report(bdir, tmp_path / "r")
