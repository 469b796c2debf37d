"""Eval, protocols, leaderboard and ablation on a scripted build (no model needed)."""

import csv

import numpy as np
import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.core.errors import EvalError, UsageError
from sveb.evaluate import evaluate
from sveb.evaluate.ablate import parse_grid, settings
from sveb.store.builds import load_build


def test_grpo_in_group_and_held_out_values(scripted_build):
    root, bdir = scripted_build
    data = load_build(bdir)
    evaluate(bdir, "grpo", {}, "in-group")
    evaluate(bdir, "grpo", {}, "held-out")
    est = store.read_table(bdir / "estimates").to_pylist()
    by = {(e["protocol"], e["state_id"]): e["value"] for e in est}
    for s in data.states:
        rewards = [r["reward"] for r in data.rollouts[s["problem_id"]]]
        own = rewards[s["rollout_idx"]]
        assert by[("in-group", s["state_id"])] == pytest.approx(np.mean(rewards))
        assert by[("held-out", s["state_id"])] == pytest.approx((sum(rewards) - own) / (len(rewards) - 1))


def test_mcs_uses_extra_draws_only(scripted_build):
    root, bdir = scripted_build
    data = load_build(bdir)
    row = evaluate(bdir, "mcs-2", {}, "in-group")
    est = {e["state_id"]: e["value"] for e in store.read_table(bdir / "estimates").to_pylist()}
    for s in data.states:
        ref = data.references[s["state_id"]]
        assert est[s["state_id"]] == pytest.approx(np.mean(ref["extra_rewards"][:2]))
    assert row["n_states"] == len(data.states)
    with pytest.raises(EvalError, match="needs 5 extra"):  # the class by its import path takes any k
        evaluate(bdir, "sveb.estimators.mcs:MonteCarlo", {"k": "5"}, "in-group")


def test_scores_cached_and_forced(scripted_build):
    root, bdir = scripted_build
    a = evaluate(bdir, "grpo", {}, "in-group")
    path = next((bdir / "scores").glob("part-grpo-*"))
    mtime = path.stat().st_mtime_ns
    assert evaluate(bdir, "grpo", {}, "in-group")["mae"] == a["mae"]
    assert path.stat().st_mtime_ns == mtime
    evaluate(bdir, "grpo", {}, "in-group", force=True)
    assert path.stat().st_mtime_ns != mtime


def test_unknown_protocol(scripted_build):
    root, bdir = scripted_build
    with pytest.raises(EvalError, match="--protocol sideways"):
        evaluate(bdir, "grpo", {}, "sideways")


def test_cli_eval_leaderboard_ablate(scripted_build, tmp_path):
    root, bdir = scripted_build
    run = CliRunner()
    r = run.invoke(app, ["eval", "--root", str(root), "-e", "grpo", "-e", "mcs-1", "--protocol", "in-group",
                         "--protocol", "held-out"])
    assert r.exit_code == 0, r.output
    assert "grpo" in r.output and "oracle floor" in r.output and "ref noise" in r.output
    r = run.invoke(app, ["eval", "--root", str(root), "-e", "grop"])
    assert r.exit_code == 1 and "did you mean grpo" in r.output
    r = run.invoke(app, ["eval", "--root", str(root), "-e", "mcs-1", "-P", "k"])
    assert r.exit_code == 1 and "-P k: expected key=value" in r.output
    out = tmp_path / "lb.csv"
    r = run.invoke(app, ["leaderboard", "--root", str(root), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(out)))
    assert {(x["estimator"], x["protocol"]) for x in rows} == {("grpo", "in-group"), ("grpo", "held-out"),
                                                              ("mcs-1", "in-group"), ("mcs-1", "held-out")}
    assert all(float(x["mae_ci_low"]) <= float(x["mae"]) <= float(x["mae_ci_high"]) for x in rows)
    r = run.invoke(app, ["ablate", "--root", str(root), "-e", "sveb.estimators.mcs:MonteCarlo", "--grid", "k=1,4"])
    assert r.exit_code == 0, r.output
    assert "k=1" in r.output and "k=4" in r.output and "defaults" in r.output
    r = run.invoke(app, ["ablate", "--root", str(root), "-e", "mcs-4", "--grid", "k=1,4"])
    assert r.exit_code == 1 and "fixed to 4" in r.output and "(defaults)" not in r.output  # checked before any run


def test_grid_parsing():
    assert parse_grid(["a=1,2", "b=x"]) == {"a": ["1", "2"], "b": ["x"]}
    assert settings({"a": ["1", "2"], "b": ["x"]}, full=False) == [{}, {"a": "1"}, {"a": "2"}, {"b": "x"}]
    assert len(settings({"a": ["1", "2"], "b": ["x", "y"]}, full=True)) == 4
    with pytest.raises(UsageError, match="--grid nokey"):
        parse_grid(["nokey"])


def test_cli_collapse_and_report(scripted_build, tmp_path):
    root, bdir = scripted_build
    run = CliRunner()
    r = run.invoke(app, ["collapse", "--root", str(root), "--out", str(tmp_path / "c")])
    assert r.exit_code == 1 and "no estimates" in r.output
    assert run.invoke(app, ["eval", "--root", str(root), "-e", "grpo", "-e", "mcs-1"]).exit_code == 0
    r = run.invoke(app, ["collapse", "--root", str(root), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert "mcs-1" in r.output and (tmp_path / "c").glob("collapse-mcs-1-*.png")
    pngs = list((tmp_path / "c").glob("collapse-mcs-1-*.png"))
    assert len(pngs) == 1 and pngs[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    r = run.invoke(app, ["report", "--root", str(root), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "rep" / "index.html").exists()


def test_report_hides_ablation_settings_unless_asked(scripted_build, tmp_path):
    from sveb.present.report import write_report
    root, bdir = scripted_build
    mc = "sveb.estimators.mcs:MonteCarlo"  # k is a parameter here (default 1), not fixed by a name
    for params in ({}, {"k": "2"}):
        evaluate(bdir, "grpo", {}, "in-group")
        evaluate(bdir, mc, params, "in-group")
    write_report(root, tmp_path / "a")
    write_report(root, tmp_path / "b", all_settings=True)
    a = (tmp_path / "a" / "table.md").read_text()
    b = (tmp_path / "b" / "table.md").read_text()
    assert f"{mc} (k=2)" not in a and f"| {mc} |" in a
    assert f"{mc} (k=2)" in b
    rows = list(csv.DictReader(open(tmp_path / "a" / "leaderboard.csv")))
    assert {r["params"] for r in rows if r["estimator"] == mc} == {'{"k": 1}', '{"k": 2}'}  # CSV keeps all


def test_eval_prints_the_paired_verdict_against_the_baseline(scripted_build, monkeypatch):
    """`sveb eval -e mcs-4` scores grpo too (instantly) and prints the paired Δ and a verdict for mcs-4."""
    from typer.testing import CliRunner

    from sveb.cli import app
    monkeypatch.setenv("COLUMNS", "80")
    root, bdir = scripted_build
    r = CliRunner().invoke(app, ["eval", "--root", str(root), "--build", bdir.name, "-e", "mcs-4"])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.output.splitlines() if x.strip().startswith("mcs-4"))
    assert any(w in line for w in ("better", "worse", "no diff")), line
    assert (bdir / "scores").exists() and any("grpo" in p.name for p in (bdir / "scores").glob("part-*"))
