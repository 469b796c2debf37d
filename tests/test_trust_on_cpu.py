"""Issue 9 on the scripted engine: equal budgets, truncation, own-outcome share, layer rows, flag checks."""

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.core import schema
from sveb.core.config import SamplingConfig
from sveb.core.errors import BuildError
from sveb.engines.scripted import CharTokenizer, ScriptedEngine
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.hista_sveb import HistaSVEB as Hista
from sveb.evaluate import evaluate
from sveb.evaluate.protocols import flip_own
from sveb.sample.pipeline import build, context_needed


def test_references_get_the_budget_the_rollout_had_left(small_cfg, tmp_path):
    # max_tokens=40 is shorter than every scripted response (~48 chars): every rollout is cut off and
    # scores 0, so the true value of every state is 0. A continuation of a state at t may write only
    # 40 - t more tokens; with max_tokens on top of the prefix (the old budget) references were 0.55-1.0.
    cfg = replace(small_cfg, model="smollm2-135m", min_acc=0.0, max_acc=1.0, sampling=SamplingConfig(max_tokens=40))
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine())
    rolls = store.read_table(bdir / "rollouts", schema.ROLLOUTS).to_pylist()
    assert rolls and all(r["finish_reason"] == "length" and r["reward"] == 0 for r in rolls)
    refs = store.read_table(bdir / "references", schema.REFERENCES).to_pylist()
    states = {s["state_id"]: s for s in store.read_table(bdir / "states", schema.STATES).to_pylist()}
    assert len(refs) == len(states) > 0
    for r in refs:
        assert r["value"] == 0.0 and set(r["mc_rewards"]) == {0.0}
        assert r["finish_reasons"] == ["length"] * (cfg.mc + cfg.mc_extra)
    m = store.read_manifest(bdir)
    assert m["truncated"] == {"rollouts": 1.0, "references": 1.0}


def test_references_keep_full_budget_when_it_suffices(small_cfg, tmp_path):
    cfg = replace(small_cfg, model="smollm2-135m")  # max_tokens=200: nothing is cut
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine())
    m = store.read_manifest(bdir)
    assert m["truncated"] == {"rollouts": 0.0, "references": 0.0}
    refs = store.read_table(bdir / "references", schema.REFERENCES).to_pylist()
    assert any(r["value"] > 0 for r in refs)


def test_request_longer_than_the_model_context_is_a_clear_error(small_cfg, tmp_path):
    from sveb.data_builders import domain_module
    problems = [{"problem_id": "p1", "question": "What is 1 + 2?", "answer": "3"}]
    n_prompt = len(CharTokenizer().encode_chat(domain_module("number").prompt(problems[0])))
    model = tmp_path / "tiny-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": n_prompt + 20}))
    cfg = replace(small_cfg, model=str(model), sampling=SamplingConfig(max_tokens=40))
    with pytest.raises(BuildError, match=rf"problem p1: its prompt of {n_prompt} tokens \+ --max-tokens 40 exceeds "
                                         rf"the model's context of {n_prompt + 20} tokens"):
        context_needed(cfg, problems, CharTokenizer())
    ok = replace(cfg, sampling=SamplingConfig(max_tokens=20))
    assert context_needed(ok, problems, CharTokenizer()) == n_prompt + 20


def test_own_share_of_group_mean_is_one_over_g(scripted_build):
    root, bdir = scripted_build
    g = store.read_manifest(bdir)["config"]["rollouts"]
    assert evaluate(bdir, "grpo", {}, "in-group")["own_share"] == pytest.approx(1 / g)
    assert evaluate(bdir, "grpo", {}, "held-out")["own_share"] == 0.0
    assert evaluate(bdir, "mcs-2", {}, "in-group")["own_share"] == 0.0
    est = store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
    shifts = [e["own_shift"] for e in est if e["estimator"] == "grpo" and e["protocol"] == "in-group"]
    assert shifts and shifts == pytest.approx([1 / g] * len(shifts))


def _hidden_group(G=8, T=60, d=16, seed=0):
    rng = np.random.default_rng(seed)
    H = {j: rng.normal(size=(T, d)).astype(np.float32) for j in range(G)}
    rolls = tuple(Rollout(j, (1,), tuple(range(T)), "", float(j % 2)) for j in range(G))
    return ProblemGroup({}, rolls, rolls, lambda j: H[j])


def _shift(est, group, state):
    own = group.rollout(state.rollout_idx).rollout_idx
    return abs(est.estimate(flip_own(group, own), [state])[0] - est.estimate(group, [state])[0])


def test_hista_old_clamp_leaks_the_own_outcome_new_one_much_less():
    group = _hidden_group()
    state = State("s", "p", 0, 52, "")  # 2 tokens after its own rollout's node at 50
    old = _shift(Hista(d_min=1e-3), group, state)
    new = _shift(Hista(), group, state)
    assert old > 0.9             # the own node at distance ~0 took over the estimate
    assert new < 0.5 * old       # clamped like the public code: a bounded share
    held = abs(Hista().estimate(flip_own(group, 0).without(0), [state])[0]
               - Hista().estimate(group.without(0), [state])[0])
    assert held == 0.0


def test_layer_is_a_parameter_and_two_layers_are_two_rows(scripted_build, monkeypatch):
    from sveb.lm.hidden import HiddenStates

    # a stand-in forward pass whose output depends on the layer
    def fake_forward(self, rollouts, resp, full, sink=None):
        import torch
        out = {(kind, k): {r["rollout_idx"]: np.random.default_rng(abs(k)).normal(
                   size=(len(r["response_token_ids"]) + (0 if kind == "resp" else len(r["prompt_token_ids"])), 8)
               ).astype(np.float16) for r in rollouts}
               for kind, ks in (("resp", resp), ("full", full)) for k in ks}
        for tap, arrays in out.items() if sink else ():  # the streamed pass hands each rollout on (sveb.lm.hidden)
            for i, a in arrays.items():
                sink(tap, i, torch.from_numpy(a))
        return {} if sink else out
    monkeypatch.setattr(HiddenStates, "_forward", fake_forward)
    root, bdir = scripted_build
    a = evaluate(bdir, "hista", {"layer": "-1"}, "held-out")
    b = evaluate(bdir, "hista", {"layer": "-2"}, "held-out")
    assert a["params_fp"] != b["params_fp"]
    rows = store.read_table(bdir / "scores", schema.SCORES).to_pylist()
    assert {json.loads(r["params"])["layer"] for r in rows if r["estimator"] == "hista"} == {-1, -2}
    assert len(list((bdir / "hidden").iterdir())) == 4  # per layer: the response states and the prompt's


@pytest.mark.parametrize("flag,value,msg", [
    ("--rollouts", "1", "--rollouts 1: must be at least 2"),
    ("--temperature", "-1", "--temperature -1.0: must be greater than 0"),
    ("--top-p", "0", "--top-p 0.0: must be in (0, 1]"),
    ("--states-per-problem", "0", "--states-per-problem 0: must be at least 1"),
    ("--max-tokens", "0", "--max-tokens 0: must be at least 2"),
    ("--mc", "0", "--mc 0: must be at least 1"),
    ("--oversample", "0", "--oversample 0: must be at least 1"),
    ("--max-acc", "1.5", "--max-acc 1.5: must be in [0, 1]"),
    ("--engine", "vllmm", "--engine vllmm: unknown engine; did you mean vllm?"),
])
def test_bad_build_flags_fail_before_any_work(tmp_path, flag, value, msg):
    r = CliRunner().invoke(app, ["build", "--root", str(tmp_path / "root"), flag, value])
    assert r.exit_code == 1
    assert msg in " ".join(r.output.split())
    assert not (tmp_path / "root").exists()  # nothing was written


def test_unknown_estimator_is_reported_before_builds_are_looked_for(tmp_path):
    r = CliRunner().invoke(app, ["eval", "--root", str(tmp_path / "empty"), "-e", "hsta"])
    assert r.exit_code == 1
    out = " ".join(r.output.split())
    assert "unknown estimator 'hsta'" in out and "did you mean hista" in out and "no complete build" not in out


