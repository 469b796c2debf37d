"""The RL loop (issue 59): per-token advantages against hand computations, the held-out protocol, which parameters a
step moves, a bit-identical resume, and the gradient spread a noisy baseline adds. Sampling: the scripted engine;
the trained policy: a tiny random Llama in fp32 (exact numerics, on AVX2 and avx512_bf16 machines alike)."""

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from sveb.engines.scripted import ScriptedEngine
from sveb.estimators.base import Estimator
from sveb.experiment.rl import RLConfig, run
from sveb.experiment.rl.advantages import held_out_mean, token_advantages, token_baseline
from sveb.experiment.rl.baselines import Baseline
from sveb.experiment.rl.loop import advantages, cut_states, rl_seed, rollouts
from sveb.lm.policy_update import PolicyUpdate, Sample, grad_spread, response_logprobs, trainable_names
from sveb.rewards import reward
from tests.helpers.rl import problems, tiny_llama

torch.set_num_threads(1)


CFG = RLConfig(baseline="grpo", steps=3, seed=5, problems=3, rollouts=4, cuts=2, max_tokens=60, lr=1e-2,
               train_layers=1, eval_every=2, eval_problems=4)


def test_token_advantages_by_hand():
    # T = 6, cuts at t=2 (0.4) and t=4 (0.9); before: 0.5; R = 1
    np.testing.assert_allclose(token_baseline(6, [(4, 0.9), (2, 0.4)], 0.5), [0.5, 0.5, 0.4, 0.4, 0.9, 0.9])
    np.testing.assert_allclose(token_advantages(1.0, 6, [(2, 0.4), (4, 0.9)], 0.5), [0.5, 0.5, 0.6, 0.6, 0.1, 0.1])
    np.testing.assert_allclose(token_advantages(0.0, 3, [], 0.25), [-0.25] * 3)
    assert held_out_mean([1, 0, 1, 1], 1) == 1.0 and held_out_mean([1, 0, 1, 1], 0) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        token_baseline(3, [(5, 0.1)], 0.0)


def test_every_token_gets_R_minus_last_cut_mcs():
    """mcs-2 at the cuts: each token's advantage is R minus the mean of its last cut's own 2 continuations,
    recomputed here by hand from fresh draws; tokens before the first cut get R minus the others' mean."""
    eng = ScriptedEngine()
    cfg = dataclasses.replace(CFG, baseline="mcs-2")
    groups = rollouts(eng, cfg, 1, problems(2))
    got = advantages(eng, cfg, 1, groups, Baseline("mcs-2"))
    assert len(got) == 2 * cfg.rollouts
    seen_cut = 0
    for gi, r, adv in got:
        g = groups[gi]
        mine = sorted((s.t, s) for s in cut_states(eng, cfg, 1, g) if s.rollout_idx == r.rollout_idx)
        others = [x.reward for x in g.rollouts if x.rollout_idx != r.rollout_idx]
        assert len(adv) == len(r.response_token_ids)
        for j in range(len(adv)):
            last = [s for t, s in mine if t <= j]
            if not last:
                want = r.reward - np.mean(others)
            else:
                s = last[-1]
                seen_cut += 1
                prefix = r.response_token_ids[:s.t]
                conts = [eng._complete(eng.tokenizer.decode(r.prompt_token_ids + prefix),
                                       rl_seed(cfg, "extra", 1, s.state_id, k), cfg.max_tokens - s.t) for k in range(2)]
                want = r.reward - np.mean([reward(eng.tokenizer.decode(prefix) + c[:cfg.max_tokens - s.t], g.problem)
                                           for c in conts])
            assert adv[j] == pytest.approx(want, abs=1e-12)
    assert seen_cut > 0


@dataclass
class Peek(Estimator):
    """A plugin baseline that tries to read the state's own outcome: what it gets is recorded."""
    seen: list = dataclasses.field(default_factory=list)

    def estimate(self, group, states):
        s = states[0]
        own = group.rollout(s.rollout_idx)
        self.seen.append((own.reward, len(own.response_token_ids), s.t,
                          s.rollout_idx in [r.rollout_idx for r in group.rollouts]))
        return np.full(len(states), 0.5 if np.isnan(own.reward) else own.reward)


def test_baseline_never_sees_the_rollouts_own_reward():
    eng = ScriptedEngine()
    groups = rollouts(eng, CFG, 1, problems(2))
    base = Baseline("grpo")
    base.est = Peek()
    got = advantages(eng, CFG, 1, groups, base)
    assert base.est.seen and all(np.isnan(rw) and n == t and not member for rw, n, t, member in base.est.seen)
    # so the value it gives is 0.5 at every cut, whatever the outcome: the advantage after a cut is R - 0.5
    for _, r, adv in got:
        mine = [s.t for s in cut_states(eng, CFG, 1, groups[0 if r in groups[0].rollouts else 1])
                if s.rollout_idx == r.rollout_idx]
        if mine:
            assert adv[min(mine):] == pytest.approx(r.reward - 0.5)


def test_grpo_baseline_ignores_a_flipped_own_reward():
    """Flip one rollout's reward: its own baseline (every token) stays, so its advantage moves by the flip."""
    eng = ScriptedEngine()
    groups = rollouts(eng, CFG, 1, problems(1))
    before = advantages(eng, CFG, 1, groups, Baseline("grpo"))
    g = groups[0]
    flipped = dataclasses.replace(g.rollouts[0], reward=1.0 - g.rollouts[0].reward)
    g2 = dataclasses.replace(g, rollouts=(flipped, *g.rollouts[1:]), all_rollouts=(flipped, *g.rollouts[1:]))
    after = advantages(eng, CFG, 1, [g2], Baseline("grpo"))
    np.testing.assert_allclose(after[0][2] - before[0][2], flipped.reward - g.rollouts[0].reward)


@pytest.mark.parametrize("train_layers", [0, 1])
def test_step_changes_the_trained_parameters_and_only_those(train_layers):
    model = tiny_llama()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    upd = PolicyUpdate(model, train_layers, lr=1e-2, scale=10.0)
    rng = np.random.default_rng(0)
    samples = [Sample(tuple(rng.integers(0, 256, 8)), tuple(rng.integers(0, 256, 6)), rng.normal(size=6))
               for _ in range(3)]
    upd.step(samples)
    trained = set(trainable_names(model, train_layers))
    if train_layers:
        assert trained == {n for n in before if n.startswith("model.layers.1.") or n == "model.norm.weight"}
    for n, p in model.named_parameters():
        assert (not torch.equal(p, before[n])) == (n in trained), n


def test_grad_var_is_the_per_rollout_gradient_spread():
    """Known answer: grad_var = mean ||g_i||^2 - ||mean g||^2 from per-rollout gradients computed apart."""
    model = tiny_llama()
    rng = np.random.default_rng(1)
    samples = [Sample(tuple(rng.integers(0, 256, 8)), tuple(rng.integers(0, 256, 5)), rng.normal(size=5))
               for _ in range(4)]
    params = [p for n, p in model.named_parameters() if n.startswith("model.layers.1.") or n == "model.norm.weight"]
    grads = []
    for s in samples:
        logp = response_logprobs(model, s.prompt, s.response)
        loss = -(torch.as_tensor(s.advantages, dtype=torch.float32) * logp).sum() / 7.0
        grads.append(torch.cat([g.flatten() for g in torch.autograd.grad(loss, params)]).double().numpy())
    G = np.stack(grads)
    want = (G ** 2).sum(1).mean() - (G.mean(0) ** 2).sum()
    stats = PolicyUpdate(model, 1, lr=0.0, scale=7.0).step(samples)
    assert stats["grad_var"] == pytest.approx(want, rel=1e-4)
    assert grad_spread(10.0, 1.0, 4) == 1.5 and grad_spread(0.0, 0.0, 0) == 0.0


def test_a_noisy_baseline_raises_the_gradient_variance():
    eng = ScriptedEngine()
    cfg = dataclasses.replace(CFG, problems=3, rollouts=6)
    groups = rollouts(eng, cfg, 1, problems(3))
    out = {}
    for noise in (0.0, 1.0):
        model = tiny_llama()
        adv = advantages(eng, cfg, 1, groups, Baseline("grpo", noise=noise))
        out[noise] = PolicyUpdate(model, 1, lr=0.0, scale=60.0).step(
            [Sample(r.prompt_token_ids, r.response_token_ids, a) for _, r, a in adv])["grad_var"]
    assert out[1.0] > 2 * out[0.0] > 0


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_resume_continues_bit_identically(tmp_path):
    train, held = problems(6), problems(4, offset=20)
    full = tiny_llama()
    rows = run(CFG, tmp_path / "full", ScriptedEngine(), full, train, held)
    part = tiny_llama()
    run(CFG, tmp_path / "part", ScriptedEngine(), part, train, held, stop_after=2)
    assert (tmp_path / "part" / "ckpt" / "step-2" / "meta.json").exists()
    resumed = tiny_llama()  # a fresh process: the model as loaded, the checkpoint restores the rest
    rows2 = run(CFG, tmp_path / "part", ScriptedEngine(), resumed, train, held)
    a, b = _params(full), _params(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)
    w = "model.layers.1.mlp.up_proj.weight"
    assert not torch.equal(a[w], _params(tiny_llama())[w])
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in rows2]
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and "held_out_acc" in rows[2] and "held_out_acc" in rows[3]


def test_a_resume_with_other_settings_is_refused(tmp_path):
    from sveb.core.errors import UsageError
    run(dataclasses.replace(CFG, steps=1), tmp_path, ScriptedEngine(), tiny_llama(), problems(4), problems(2, 20))
    with pytest.raises(UsageError, match="lr"):
        run(dataclasses.replace(CFG, steps=2, lr=0.5), tmp_path, ScriptedEngine(), tiny_llama(), problems(4),
            problems(2, 20))


def test_baselines_that_need_hidden_states_are_refused_in_one_line():
    from sveb.core.errors import UsageError
    with pytest.raises(UsageError, match="hidden states"):
        Baseline("hista")


def test_cli_refuses_a_baseline_it_cannot_serve_before_loading_a_model(tmp_path):
    from typer.testing import CliRunner

    from sveb.cli import app
    res = CliRunner().invoke(app, ["rl", "--baseline", "hista", "--out", str(tmp_path / "run")])
    assert res.exit_code == 1 and "needs hidden states" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(app, ["rl", "--baseline", "grpoo", "--out", str(tmp_path / "run")])
    assert res.exit_code == 1 and "did you mean grpo" in res.output
    assert not (tmp_path / "run").exists()


class Refreshing(ScriptedEngine):
    """An engine that samples from a copy of the policy: the loop hands it the model after every update."""

    def __init__(self):
        super().__init__()
        self.refreshed = []

    def refresh(self, model):
        self.refreshed.append(model.model.layers[1].mlp.up_proj.weight.detach().clone())


def test_an_engine_with_a_copy_of_the_policy_is_refreshed_after_each_update_and_on_resume(tmp_path):
    model, eng = tiny_llama(), Refreshing()
    run(dataclasses.replace(CFG, steps=2), tmp_path, eng, model, problems(6), problems(2, 20))
    assert len(eng.refreshed) == 2 and torch.equal(eng.refreshed[-1], model.model.layers[1].mlp.up_proj.weight)
    assert not torch.equal(eng.refreshed[0], eng.refreshed[1])
    again, eng2 = tiny_llama(), Refreshing()
    run(dataclasses.replace(CFG, steps=3), tmp_path, eng2, again, problems(6), problems(2, 20))
    assert len(eng2.refreshed) == 2 and torch.equal(eng2.refreshed[0], eng.refreshed[1])  # the checkpoint, then step 3


def test_each_evaluation_logs_every_problems_outcome_with_common_seeds_across_runs(tmp_path):
    """held_out: {problem_id: reward} at step 0 and at every evaluation, its mean the logged accuracy; the samples'
    seeds do not depend on the run's seed (common random numbers between runs)."""
    import json
    train, held = problems(6), problems(4, offset=20)
    rows = run(dataclasses.replace(CFG, steps=2), tmp_path / "a", ScriptedEngine(), tiny_llama(), train, held)
    evals = [r for r in rows if "held_out_acc" in r]
    assert [r["step"] for r in evals] == [0, 2]
    for r in evals:
        assert list(r["held_out"]) == [p["problem_id"] for p in held]
        assert set(r["held_out"].values()) <= {0.0, 1.0}
        assert r["held_out_acc"] == pytest.approx(np.mean(list(r["held_out"].values())))
    assert 0 < evals[0]["held_out_acc"] < 1  # the scripted engine answers some right, some wrong
    on_disk = [json.loads(line) for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    assert [r.get("held_out") for r in on_disk] == [r.get("held_out") for r in rows]
    other = run(dataclasses.replace(CFG, steps=1, seed=6), tmp_path / "b", ScriptedEngine(), tiny_llama(), train, held)
    assert other[0]["held_out"] == rows[0]["held_out"]


def test_resume_after_a_step_without_an_evaluation_is_bit_identical_and_old_logs_load(tmp_path):
    import json
    cfg = dataclasses.replace(CFG, eval_every=3)
    train, held = problems(6), problems(4, offset=20)
    full = run(cfg, tmp_path / "full", ScriptedEngine(), tiny_llama(), train, held)
    run(cfg, tmp_path / "part", ScriptedEngine(), tiny_llama(), train, held, stop_after=1)  # step 1: no evaluation
    resumed = run(cfg, tmp_path / "part", ScriptedEngine(), tiny_llama(), train, held)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]  # noqa: E731
    assert strip(full) == strip(resumed) and "held_out" in resumed[-1] and "held_out" in resumed[0]
    # a log written before per-problem outcomes were logged (no held_out) still loads and resumes
    log = tmp_path / "old" / "log.jsonl"
    run(cfg, tmp_path / "old", ScriptedEngine(), tiny_llama(), train, held, stop_after=1)
    log.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "held_out"}) + "\n"
                           for line in log.read_text().splitlines()))
    rows = run(cfg, tmp_path / "old", ScriptedEngine(), tiny_llama(), train, held)
    assert "held_out" not in rows[0] and rows[-1]["held_out"] == full[-1]["held_out"]
    assert strip(rows)[1:] == strip(full)[1:]
