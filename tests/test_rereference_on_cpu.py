"""`sveb rereference`: an existing build's states, references under another policy (issue 59). The scripted engine
is the policy; `flip_shift` moves every flip probability, so it is another policy with a known direction."""


import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.core import schema
from sveb.engines.scripted import ScriptedEngine
from sveb.sample.rereference import check_tokenizer, rereference
from sveb.store.builds import load_build, pool_key
from tests.helpers.engines import StopsAfter


def rows(bdir, table):
    return store.read_table(bdir / table).to_pylist()


def cli(*args):
    return CliRunner().invoke(app, ["rereference", *map(str, args)])


def test_the_same_policy_and_seeds_give_the_sources_references(scripted_build, tmp_path):
    _, src = scripted_build
    res = cli("--states-from", src, "--model", "smollm2-135m", "--out", tmp_path / "same")
    assert res.exit_code == 0, res.output
    out = tmp_path / "same"
    for t in ("problems", "rollouts", "states", "references"):
        assert rows(out, t) == rows(src, t), t
    m = store.load_manifest(out)
    assert m.complete and m.states_from["build_fp"] == store.load_manifest(src).build_fp
    assert m.states_from["content_hash"] == store.content_hash(src) and m.build_fp != m.states_from["build_fp"]
    assert m.config.engine == "scripted" and m.dtype == store.load_manifest(src).dtype
    assert pool_key(out) != pool_key(src)  # the same model and config, yet never pooled with the source
    assert "states_from" in res.stdout  # `describe` says so wherever the build is listed
    load_build(out)  # a build every reader takes: its structure and values checked


def test_another_policy_gives_other_references_of_the_same_states(scripted_build, tmp_path):
    _, src = scripted_build
    out = rereference(src, "scripted-up", tmp_path / "up", engine=ScriptedEngine(flip_shift=0.3))
    new, old = rows(out, "states"), rows(src, "states")
    assert [(s["state_id"], s["prefix_text"], s["t"]) for s in new] == [(s["state_id"], s["prefix_text"], s["t"])
                                                                       for s in old]
    assert rows(out, "rollouts") == rows(src, "rollouts")
    r_new = {r["state_id"]: r for r in rows(out, "references")}
    r_old = {r["state_id"]: r for r in rows(src, "references")}
    assert set(r_new) == set(r_old) and r_new != r_old
    # common random numbers: a flip's uniform draw is shared, so a higher flip probability never lowers a draw
    # whose answer is still open
    assert sum(r_new[k]["value"] for k in r_new) > sum(r_old[k]["value"] for k in r_old)
    assert all(n >= o for k in r_new for n, o in zip(r_new[k]["mc_rewards"], r_old[k]["mc_rewards"]))
    m = store.load_manifest(out)
    assert m.model == "scripted-up" and m.states_from["model"] == store.load_manifest(src).model
    assert pool_key(out) != pool_key(src)


def test_an_interrupted_run_resumes_with_the_missing_shards(scripted_build, tmp_path, monkeypatch):
    monkeypatch.setattr("sveb.sample.pipeline.SHARD_STATES", 2)  # 8 states: 4 shards
    _, src = scripted_build
    full = rereference(src, "scripted-up", tmp_path / "full", engine=ScriptedEngine(flip_shift=0.3))
    stops = StopsAfter(2)  # the same policy, cut off after two shards
    stops.flip_shift = 0.3
    with pytest.raises(KeyboardInterrupt):
        rereference(src, "scripted-up", tmp_path / "cut", engine=stops)
    assert store.load_manifest(tmp_path / "cut").status == "running"
    assert len(list((tmp_path / "cut" / "references").glob("part-*.parquet"))) == 2
    again = ScriptedEngine(flip_shift=0.3)
    out = rereference(src, "scripted-up", tmp_path / "cut", engine=again)
    assert len(again.calls) == 2 and store.load_manifest(out).complete
    assert rows(out, "references") == rows(full, "references")
    done = ScriptedEngine(flip_shift=0.3)
    rereference(src, "scripted-up", out, engine=done)
    assert done.calls == []


def test_bad_input_is_one_line_naming_the_flag_or_path(scripted_build, tmp_path):
    import shutil
    _, src = scripted_build

    def fails(*args):
        res = cli(*args)
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
        return " ".join(res.output.split())
    assert "--states-from" in fails("--states-from", tmp_path / "nope", "--model", "m", "--out", tmp_path / "o")
    assert "no manifest.json" in fails("--states-from", tmp_path, "--model", "m", "--out", tmp_path / "o")
    empty = tmp_path / "empty"
    shutil.copytree(src, empty)
    path = store.shard_path(empty / "states", 0)
    store.write_shard(path, pa.Table.from_pylist([], schema=schema.STATES), store.shard_fp(path))
    assert "holds no states" in fails("--states-from", empty, "--model", "m", "--out", tmp_path / "o")
    got = fails("--states-from", src, "--model", tmp_path / "no-model", "--engine", "hf", "--out", tmp_path / "o")
    assert f"--model {tmp_path / 'no-model'}: no such directory" in got
    assert "--mc 0" in fails("--states-from", src, "--model", "m", "--mc", "0", "--out", tmp_path / "o")
    assert not (tmp_path / "o").exists()
    assert cli("--states-from", src, "--model", "smollm2-135m", "--out", tmp_path / "a").exit_code == 0
    assert "itself a re-reference" in fails("--states-from", tmp_path / "a", "--model", "m", "--out", tmp_path / "o")
    assert "holds another build" in fails("--states-from", src, "--model", "m", "--mc", "3", "--out", tmp_path / "a")


def test_a_policy_with_another_tokenizer_is_refused():
    class Upper:
        def decode(self, ids):
            return "".join(chr(i) for i in ids).upper()
    rollouts = {"p": [{"rollout_idx": 0, "response_token_ids": [97, 98], "response_text": "ab"}]}
    states = [{"problem_id": "p", "rollout_idx": 0}]
    check_tokenizer(ScriptedEngine().tokenizer, rollouts, states, "m")
    with pytest.raises(ValueError, match="--model m: its tokenizer decodes rollout 0 of problem p"):
        check_tokenizer(Upper(), rollouts, states, "m")


def test_estimators_follow_the_moved_policy_as_moved_policy_py_reports(scripted_build, tmp_path, capsys):
    """On the re-reference, grpo reads the source's group (its ΔV estimate is 0: slope 0) and mcs-4 the new policy's
    draws (slope > 0); benchmarks/moved_policy.py reads both builds' stored estimates and prints the table."""
    import importlib.util
    from pathlib import Path

    from sveb.evaluate import evaluate
    _, src = scripted_build
    out = rereference(src, "scripted-up", tmp_path / "up", engine=ScriptedEngine(flip_shift=0.3))
    for b in (src, out):
        for name in ("grpo", "mcs-4"):
            evaluate(b, name)
    spec = importlib.util.spec_from_file_location("moved_policy", Path(__file__).parents[1] / "benchmarks" /
                                                  "moved_policy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.main([str(src), str(out), "--json", str(tmp_path / "r.json")])
    rows = {e["estimator"]: e for e in r["estimators"]}
    assert r["states"]["n"] == 8 and r["states"]["dv_mean"] > 0
    assert rows["grpo"]["slope"] == 0 and rows["mcs-4"]["slope"] > 0.2
    assert rows["grpo"]["mae"] == pytest.approx(np.mean(np.abs(
        [np.mean(n) - np.mean(o) for n, o in zip(*(list(mod.references(b).values()) for b in (out, src)))])))
    shown = capsys.readouterr().out
    assert "8 states (0 unmatched)" in shown and "mcs-4" in shown and (tmp_path / "r.json").exists()
    with pytest.raises(SystemExit, match="not a re-reference"):
        mod.main([str(out), str(src)])
    # pairs pooled (Table 4's seeds): the same pair twice doubles the states, keeps the slope, and its clusters stay
    # problems (a problem in both pairs is one cluster, so the slope's SE is the single pair's, not smaller)
    two = mod.main([str(src), str(out), str(src), str(out)])
    rows2 = {e["estimator"]: e for e in two["estimators"]}
    assert two["states"]["n"] == 16 and two["states"]["unmatched"] == 0 and len(two["pairs"]) == 2
    assert rows2["mcs-4"]["slope"] == pytest.approx(rows["mcs-4"]["slope"])
    assert rows2["mcs-4"]["slope_se"] == pytest.approx(rows["mcs-4"]["slope_se"])  # per-pair clusters: 1/√2 of it
    with pytest.raises(SystemExit, match="pass them in pairs"):
        mod.main([str(src), str(out), str(src)])
    # --estimates: one Parquet file (Table 4's results/table4/estimates.parquet), its rows matched by build_fp
    import pyarrow as pa
    import pyarrow.parquet as pq
    copied = []
    for b in (src, out):
        fp = store.load_manifest(b).build_fp
        got = mod.estimates(b, fp, "held-out", [])
        copied += [{"build_fp": fp, "state_id": s, "estimator": "copy", "params_fp": "x", "protocol": "held-out",
                    "value": v} for (name, _), d in got.items() if name == "mcs-4" for s, v in d.items()]
    pq.write_table(pa.Table.from_pylist(copied), tmp_path / "extra.parquet")
    three = {e["estimator"]: e for e in mod.main([str(src), str(out), "--estimates",
                                                  str(tmp_path / "extra.parquet")])["estimators"]}
    assert three["copy"]["slope"] == pytest.approx(rows["mcs-4"]["slope"]) and three["copy"]["n"] == 8
    # --save-estimates: the builds' stored estimates in one file; on exports (no estimates stored) it redoes the result
    from sveb.store.export import export_build
    mod.main([str(src), str(out), "--save-estimates", str(tmp_path / "saved.parquet")])
    assert pq.read_table(tmp_path / "saved.parquet").num_rows == 2 * 2 * 8  # 2 builds x grpo, mcs-4 x 8 states
    weights = tmp_path / "weights"  # the card's weights hash only: these builds' models are scripted
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    ex = [export_build(b, tmp_path / f"ex-{i}", model_dir=weights) for i, b in enumerate((src, out))]
    assert mod.main([str(ex[0]), str(ex[1])])["estimators"] == []
    again = mod.main([str(ex[0]), str(ex[1]), "--estimates", str(tmp_path / "saved.parquet")])
    assert again["estimators"] == r["estimators"] and again["states"] == r["states"]


def test_hidden_state_estimators_run_on_a_rereference(tiny_llama_builds, tmp_path):
    """hista reads the re-reference's own model (a tiny random Llama) on the source's token ids."""
    from sveb.evaluate import evaluate
    _, _, test, model = tiny_llama_builds
    out = rereference(test, model, tmp_path / "moved", engine=ScriptedEngine(flip_shift=0.2))
    assert store.load_manifest(out).model == model
    row = evaluate(out, "hista")
    assert row["n_states"] == len(rows(test, "states")) and np.isfinite(row["mae"])
