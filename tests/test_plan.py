"""`sveb plan`: hand-computed counts, tokens, bytes and times; lengths measured from a real (scripted) build."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.sample.plan import (
    Lengths,
    Settings,
    assumed_lengths,
    assumed_tok_per_s,
    domain_work,
    duration,
    human,
    make_plan,
    measured_lengths,
)

S = Settings(problems=10, oversample=3, rollouts=8, screen=2, states_per_problem=2, mc=5, mc_extra=1, max_tokens=100,
             gpus=2)
L = Lengths(prompt=20, response=60, remaining=25, source="test")


def test_domain_work_by_hand():
    w = domain_work(S, L, hidden_size=4)
    assert (w["candidates"], w["discarded"], w["rollouts"], w["screening_rollouts"]) == (30, 20, 80, 60)
    assert (w["states"], w["continuations"]) == (20, 120)            # 20 states x (5 + 1)
    assert w["rollout_tokens"] == (80 + 60) * 60 == 8400  # every candidate's screen, then the kept groups
    assert w["continuation_tokens"] == 120 * 25 == 3000
    assert w["generated_tokens"] == 11400
    assert w["hidden_tokens"] == 80 * (20 + 60) == 6400              # kept rollouts only, prompt + response
    assert w["rollouts_bytes"] == pytest.approx(140 * (41 + 2.85 * 60))
    assert w["states_references_bytes"] == pytest.approx(20 * (4.8 * 35 + 290))  # prefix t = 60 - 25
    assert w["hidden_bytes"] == pytest.approx(80 * (2 * 60 + 20) * 4 * 2)  # last layer + critic input, uncompressed
    assert domain_work(S, L, None)["hidden_bytes"] is None


def test_plan_totals_and_time():
    p = make_plan(S, {"number": L, "math": L}, {"hidden_size": 4, "params_b": 3.0}, tok_per_s=100)
    assert p["total"]["generated_tokens"] == 22800 and p["total"]["candidates"] == 60
    assert p["time"]["generation_s"] == pytest.approx(22800 / (100 * 2))   # 114 s on 2 GPUs
    assert p["time"]["hidden_s"] == pytest.approx(12800 / (100 * 5 * 2))  # a forward pass 5x faster
    assert p["throughput"].startswith("given: 100")
    p = make_plan(S, {"number": L}, {"hidden_size": 4, "params_b": 3.09}, tok_per_s=None)
    assert p["tok_per_s"] == 9000 and p["throughput"].startswith("assumed for 3.09B")
    p = make_plan(S, {"number": L}, None, tok_per_s=None)
    assert p["time"] is None and "--tok-per-s" in p["throughput"] and p["total"]["hidden_bytes"] is None


def test_assumptions_and_checks():
    a = assumed_lengths("math", 4096)
    assert a.source == "assumed" and a.remaining == a.response / 2
    assert assumed_lengths("math", 100).response == 100               # capped by --max-tokens
    assert [assumed_tok_per_s(b) for b in (0.5, 1.5, 3.09, 8.03, 14.7, 70)] == [20000, 14000, 9000, 5000, 2500, 1000]
    with pytest.raises(ValueError, match="--screen 9"):
        make_plan(replace(S, screen=9), {"number": L}, None, None)
    with pytest.raises(ValueError, match="--problems 0"):
        make_plan(replace(S, problems=0), {"number": L}, None, None)


def test_human_units():
    assert human(1234567) == "1.23 M" and human(7.128e8) == "712.80 M" and human(2.5e9) == "2.50 B"
    assert human(2.5e9, "B") == "2.50 GB" and human(1.23e12, "B") == "1.23 TB" and human(999) == "999"
    assert human(None) == "?"
    assert (duration(90), duration(3 * 3600), duration(3 * 86400)) == ("2 min", "3.0 h", "3.0 days")
    assert duration(21.4) == "21 s"  # under a minute: seconds, not "0 min"


def test_lengths_measured_from_a_build(scripted_build):
    from sveb import store
    root, bdir = scripted_build
    slug = bdir.parent.parent.name
    m = measured_lengths(root, slug, "number")
    rolls = store.read_table(bdir / "rollouts").to_pylist()
    states = store.read_table(bdir / "states").to_pylist()
    assert m.response == pytest.approx(sum(len(r["response_token_ids"]) for r in rolls) / len(rolls))
    assert m.prompt == pytest.approx(sum(len(r["prompt_token_ids"]) for r in rolls) / len(rolls))
    assert m.remaining == pytest.approx(sum(s["T"] - s["t"] for s in states) / len(states))
    assert m.source.startswith(f"measured: build {bdir.name}") and "max_tokens 200" in m.source
    assert measured_lengths(root, slug, "math") is None
    assert measured_lengths(root, "other-model", "number") is None

    r = CliRunner().invoke(app, ["plan", "--model", "smollm2-135m", "--root", str(root), "--domains", "number,math",
                                 "--problems", "10", "--json"])
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)
    assert p["domains"]["number"]["lengths"] == m.source and p["domains"]["math"]["lengths"] == "assumed"
    # groups + every candidate screened
    assert p["domains"]["number"]["rollout_tokens"] == pytest.approx((10 * 40 + 40 * 8) * m.response)
    assert p["model"]["hidden_size"] == 576 and p["tok_per_s"] == 20000


def test_cli_plan_table_and_errors(tmp_path):
    r = CliRunner().invoke(app, ["plan", "--model", "Qwen2.5-3B-Instruct", "--problems", "3000", "--gpus", "8",
                                 "--root", str(tmp_path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "Qwen/Qwen2.5-3B-Instruct" in r.output and "60,000" in r.output       # 5 domains x 3000 x 4 candidates
    assert "hidden size 2048, 36 layers" in r.output and "assumed" in r.output
    r = CliRunner().invoke(app, ["plan", "--domains", "nope", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "--domains nope" in r.output
    r = CliRunner().invoke(app, ["plan", "--model", "not a model", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "not a builtin alias" in r.output


def test_scoring_a_build_with_a_scorer_by_hand():
    """One forward pass per state over question + prefix (t = response - remaining), 2 x parameters FLOPs a token,
    at FORWARD_SPEEDUP x the assumed (or given) decoding speed, spread over the GPUs."""
    from sveb.sample.plan import scoring_work
    w = scoring_work(S, {"number": L, "math": L}, {"params_b": 0.49}, tok_per_s=None)
    assert w["tokens"] == {"number": 20 * (20 + 35), "math": 1100} and w["total_tokens"] == 2200
    assert w["flops"] == pytest.approx(2 * 0.49e9 * 2200)
    assert w["time_s"] == pytest.approx(2200 / (20000 * 5 * 2)) and w["rate"] == "assumed"
    w = scoring_work(S, {"number": L}, {"params_b": 7.62}, tok_per_s=50)
    assert w["time_s"] == pytest.approx(1100 / (50 * 5 * 2)) and w["rate"] == "given"
    # the given rate is the policy's: a scorer twice its size reads half as many tokens a second
    w = scoring_work(S, {"number": L}, {"params_b": 7.0}, tok_per_s=50, policy_params_b=3.5)
    assert w["tok_per_s"] == pytest.approx(25) and w["time_s"] == pytest.approx(1100 / (25 * 5 * 2))
    assert w["rate"].startswith("scaled")
    w = scoring_work(S, {"number": L}, None, tok_per_s=None)
    assert (w["flops"], w["time_s"], w["rate"]) == (None, None, "unknown") and w["total_tokens"] == 1100


def test_cli_plan_prices_a_process_reward_model(tmp_path):
    """`--scorer` with a PRM of docs/estimators.md's table: its shape from SVEB's table (no hub here), the tokens
    and time of scoring every planned state; an unknown scorer says what is missing rather than guessing."""
    args = ["plan", "--domains", "number", "--problems", "3000", "--root", str(tmp_path)]
    r = CliRunner().invoke(app, [*args, "--scorer", "trl-lib/Qwen2-0.5B-Reward-Math-Sheperd", "--scorer", "a/b"],
                           env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.startswith("scorer trl-lib/"))
    assert "0.49B parameters (SVEB's table of process reward models)" in line
    assert "2.07M tokens" in line and "21 s on 1 GPU(s) at 100,000 tokens/s (assumed)" in line  # 6,000 x 345
    assert "scorer a/b: parameters unknown" in r.output and "time unknown" in r.output
    j = json.loads(CliRunner().invoke(app, [*args, "--json", "--scorer", "Qwen/Qwen2.5-Math-PRM-7B"]).output)
    w = j["scorers"]["Qwen/Qwen2.5-Math-PRM-7B"]
    assert w["total_tokens"] == 6000 * (120 + 225) and w["flops"] == pytest.approx(2 * 7.62e9 * w["total_tokens"])
    r = CliRunner().invoke(app, ["ls", "models"], env={"COLUMNS": "300"})
    assert "Math-PRM" not in r.output  # scorers are not policies


def test_a_measured_gpu_sweep_replaces_the_assumed_forward_speed(tmp_path):
    """A GPU sweep's JSON (tests/gpu_smoke.py --sizes) under results/gpu/ gives the hidden pass's time and a critic
    epoch's and pacs's, for a model of its shape only; CPU sweeps and other JSON there are ignored."""
    from sveb.sample.plan import measured_gpu_rates
    steps = {"hidden": {"tokens_per_s": 50_000.0}, "critic_fit": {"us_per_token": 20.0}, "pacs": {"us_per_token": 40.0}}
    sweep = {"meta": {"gpu": "NVIDIA H200", "hidden_size": 4, "layers": 2}, "sizes": [{"rollouts": 40, "steps": {}},
                                                                                     {"rollouts": 640, "steps": steps}]}
    (tmp_path / "gpu-scale.json").write_text(json.dumps(sweep))
    (tmp_path / "cpu.json").write_text(json.dumps({**sweep, "meta": {**sweep["meta"], "gpu": None}}))
    (tmp_path / "smoke.json").write_text(json.dumps([{"step": "x"}]))
    assert measured_gpu_rates([tmp_path / "none"]) is None
    m = measured_gpu_rates([tmp_path])
    assert (m["rollouts"], m["hidden_tok_per_s"], m["critic_epoch_s_per_token"]) == (640, 50_000.0, 2e-5)
    arch = {"hidden_size": 4, "layers": 2, "params_b": 1.0}
    plan = make_plan(S, {"number": L}, arch, 1000.0, m)
    assert plan["time"]["hidden_s"] == pytest.approx(6400 / 2 / 50_000)            # hidden tokens / GPUs / rate
    assert plan["time"]["pacs_s"] == pytest.approx(6400 / 2 * 40e-6)
    assert plan["time"]["total_s"] == pytest.approx(plan["time"]["generation_s"] + plan["time"]["hidden_s"])
    other = make_plan(S, {"number": L}, {**arch, "layers": 3}, 1000.0, m)            # another shape: assumed
    assert other["time"]["hidden_s"] == pytest.approx(6400 / (1000 * 5 * 2)) and "measured" not in other["time"]
