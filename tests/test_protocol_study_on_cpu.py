"""The protocol study's driver (benchmarks/protocols.py, `make protocols`) end to end on the scripted engine: every
setting built, exported and scored, the flips column, pairing on SVEB's states, resume and --from-exports."""

import csv
import importlib.util
from pathlib import Path

from sveb import store
from sveb.core import schema
from sveb.engines.scripted import ScriptedEngine
from tests.helpers.engines import StopsAfter


def _rows(bdir, table, sch):
    return store.read_table(bdir / table, sch).to_pylist()


def _driver():
    spec = importlib.util.spec_from_file_location("protocols_bench",
                                                  Path(__file__).parents[1] / "benchmarks" / "protocols.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_study_driver_end_to_end_on_the_scripted_engine(tmp_path):
    from tests.helpers.sources import write_chain_source
    src = write_chain_source(tmp_path / "dapo.jsonl")
    driver = _driver()
    args = ["--engine", "scripted", "--domains", "number", "--source", f"number={src}", "--candidates", "number=36",
            "--problems", "2", "--states", "2", "--choice-problems", "4", "--paper-problems", "6", "--rollouts", "8",
            "--paper-rollouts", "12", "--mc", "10", "--mc-extra", "4", "--max-tokens", "60",
            "--min-novel-numbers", "0", "--max-acc", "0.9", "--estimators", "grpo,mcs-1,mcs-2,numca",
            "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out")]
    out = driver.main(args)
    rows = list(csv.DictReader(open(out / "scores.csv")))
    keys = ["number-sveb", "number-paper", "number-cut", "number-continuation", "number-G", "number-mcs",
            "number-tiers"]
    assert list(dict.fromkeys(r["setting"] for r in rows)) == keys
    assert {r["protocol"] for r in rows} == {"held-out", "in-group"}
    assert {r["flips_vs_sveb"] for r in rows if r["setting"] == "number-sveb"} == {"-"}
    assert {r["flips_vs_sveb"] for r in rows if r["setting"] != "number-sveb" and r["estimator"] != "grpo"} <= \
        {"yes", "no", "n/a"}
    for r in rows:
        tested = {r["sveb_verdict"], r["verdict"]} <= {"better", "worse", "no difference"}  # n/a: one problem
        flips = tested and r["verdict"] != r["sveb_verdict"]
        assert (r["flips_vs_sveb"] == "yes") == (flips and r["setting"] != "number-sveb" and r["estimator"] != "grpo")
    assert {r["estimator"] for r in rows if r["setting"] == "number-mcs"} == {f"mcs-{k}-ref" for k in (1, 2, 3, 4)}
    assert {"mcs-2", "mcs-2-ref", "numca"} <= {r["estimator"] for r in rows if r["setting"] == "number-paper"}
    exports = tmp_path / "exports"
    assert sorted(p.name for p in exports.iterdir()) == sorted([k for k in keys if k != "number-mcs"])
    states = {k: _rows(exports / k, "states", schema.STATES) for k in ("number-sveb", "number-continuation")}
    assert states["number-sveb"] == states["number-continuation"]  # paired state by state
    cont = next(r for r in rows if r["setting"] == "number-continuation" and r["estimator"] == "mcs-2")
    assert int(cont["shared_problems"]) == 2 and cont["d_mae_vs_sveb"] != ""
    md = (out / "protocols.md").read_text()
    assert "## number, held-out" in md and "Verdicts that flip" in md and "number-tiers" in md
    # resumable: nothing is sampled again, and the tables come back the same; then from the exports alone
    before = (out / "scores.csv").read_text()
    eng = ScriptedEngine()
    driver.main(args, engine=eng)
    assert eng.calls == [] and (out / "scores.csv").read_text() == before
    driver.main(args + ["--from-exports"])
    assert (out / "scores.csv").read_text() == before
    # one setting run (or its tables redone) alone: the study's tables keep every other setting's rows
    md = (out / "protocols.md").read_text()
    for extra in (["--settings", "number-G"], ["--settings", "number-cut", "--from-exports"]):
        eng = ScriptedEngine()
        driver.main(args + extra, engine=eng)
        assert eng.calls == [] and (out / "scores.csv").read_text() == before, extra
        assert (out / "protocols.md").read_text() == md, extra


def test_each_setting_is_scored_before_the_next_is_sampled(tmp_path, monkeypatch):
    """A study cut off mid-way keeps the tables of every setting it finished: when a setting's build starts,
    scores.csv already holds each setting built before it. The paper's preset, the dearest build, comes last."""
    import sveb.experiment.protocols as study
    from tests.helpers.sources import write_chain_source
    src = write_chain_source(tmp_path / "dapo.jsonl")
    out = tmp_path / "out"
    seen = {}
    real = study.build_setting

    def spy(s, *args):
        path = out / "scores.csv"
        seen[s.key] = {r["setting"] for r in csv.DictReader(open(path))} if path.exists() else set()
        return real(s, *args)

    monkeypatch.setattr(study, "build_setting", spy)
    _driver().main(["--engine", "scripted", "--domains", "number", "--source", f"number={src}", "--candidates",
                    "number=36", "--problems", "2", "--states", "2", "--paper-problems", "6", "--rollouts", "8",
                    "--paper-rollouts", "12", "--mc", "10", "--mc-extra", "4", "--max-tokens", "60",
                    "--min-novel-numbers", "0", "--max-acc", "0.9", "--estimators", "grpo,mcs-1", "--choices", "G",
                    "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(out)])
    assert list(seen) == ["number-sveb", "number-G", "number-paper"]  # the paper's preset, the dearest, last
    assert seen == {"number-sveb": set(), "number-G": {"number-sveb"}, "number-paper": {"number-sveb", "number-G"}}


def test_the_sampler_closes_its_own_engine_and_starts_another_for_the_next_build(tmp_path, monkeypatch):
    """Between settings the study closes the engine (the estimators need its memory); the next build that samples
    starts a new one. An engine passed in belongs to its caller and is never closed."""
    import sveb.engines
    import sveb.experiment.runner as runner
    from sveb.core.config import BuildConfig
    from sveb.experiment.runner import Sampler
    made = []
    monkeypatch.setattr(runner, "resolve", lambda model: model)  # no weights are read: the engine is a stand-in

    class Engine:
        closed = False

        def close(self):
            self.closed = True

    monkeypatch.setattr(sveb.engines, "make_engine", lambda *a, **k: made.append(Engine()) or made[-1])
    cfg = BuildConfig(domain="number", model=str(tmp_path), engine="vllm")
    s = Sampler("vllm")
    s.ready(cfg, tmp_path / "root")
    s.close()
    assert len(made) == 1 and made[0].closed and s.engine is None
    s.ready(cfg, tmp_path / "root")
    assert len(made) == 2 and not made[1].closed
    mine = Engine()
    t = Sampler("vllm", mine)
    t.close()
    assert t.engine is mine and not mine.closed


def test_the_benchmark_export_comes_before_the_train_build_and_a_missing_train_export_is_resumed(
        tmp_path, monkeypatch):
    import argparse

    from sveb.experiment import protocols as P
    calls = []
    monkeypatch.setattr(P, "timed_build", lambda sampler, cfg, root, con: (calls.append("build") or tmp_path, {"x": 1}))

    def export_build(bdir, exp, model_dir):
        calls.append(f"export {exp.name}")
        exp.mkdir(parents=True)
        (exp / "manifest.json").write_text("{}")
    monkeypatch.setattr(P, "export_build", export_build)
    monkeypatch.setattr(P, "export_train", lambda sampler, cfg, root, exp, con, md: export_build(None, exp, md))
    monkeypatch.setattr(P, "exported", lambda exp, key, con: (exp / "manifest.json").exists())
    a = argparse.Namespace(domains=["number"], choice_domains=[], choices=[], settings=[], paper_rollouts=32,
                           paper_problems=6, model="m", source={}, problems=2, rollouts=4, states=2, step_pairs=True,
                           mc=4, mc_extra=0, min_acc=0.1, max_acc=0.9, min_novel_numbers=0, seed=0, engine="scripted",
                           max_tokens=60, candidates={"number": 12}, train_problems=2, train_mc=2, train_states=1,
                           train_oversample=2, train=True, root=str(tmp_path / "root"), exports=str(tmp_path / "ex"))
    s = P.settings(a)[1]  # number-paper: a preset, with a train build of its own
    assert P.build_setting(s, a, None, None, None) == {"x": 1}
    assert calls == ["build", "export number-paper", "export number-paper-train"]
    calls.clear()
    assert P.build_setting(s, a, None, None, None) is None and calls == []  # both exported: nothing to do
    import shutil
    shutil.rmtree(tmp_path / "ex" / "number-paper-train")
    assert P.build_setting(s, a, None, None, None) is None and calls == ["export number-paper-train"]


def _sveb_preset_args(src, where, problems, estimators, *extra):
    """The study on SVEB's number preset alone, scripted and small, with its root, exports and out under WHERE."""
    return ["--engine", "scripted", "--domains", "number", "--source", f"number={src}", "--candidates", "number=36",
            "--problems", problems, "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
            "--max-tokens", "60", "--min-novel-numbers", "0", "--max-acc", "0.9", "--estimators", estimators,
            "--settings", "number-sveb", *extra, "--root", str(where / "root"), "--exports", str(where / "exports"),
            "--out", str(where / "out")]


def test_a_setting_cut_off_resumes_in_a_fresh_clone_from_its_saved_shards(tmp_path):
    """--save-partial copies what an unexported setting has sampled into OUT/partial (committed); a fresh clone
    (an empty root) takes those shards back and samples only the rest; the export is the uninterrupted run's,
    and the partial folder goes once the setting is exported."""
    import pytest

    from tests.helpers.sources import write_chain_source
    src = write_chain_source(tmp_path / "dapo.jsonl")
    driver = _driver()

    def args(name):
        return _sveb_preset_args(src, tmp_path / name, "3", "grpo,mcs-1", "--no-step-pairs")

    whole = ScriptedEngine()
    driver.main(args("whole"), engine=whole)
    assert len(whole.calls) >= 3  # screens, groups, references: enough calls to cut in between
    with pytest.raises(KeyboardInterrupt):
        driver.main(args("cut"), engine=StopsAfter(len(whole.calls) - 1))  # all but the last call
    assert not (tmp_path / "cut" / "exports" / "number-sveb").exists()
    driver.main(args("cut") + ["--save-partial"])
    carried = tmp_path / "cut" / "out" / "partial" / "number-sveb"
    saved = sorted(carried.rglob("part-*.parquet"))
    assert saved and not list(carried.rglob("hidden")) and not list(carried.rglob(".tmp-*"))
    assert {p.name for p in carried.rglob("*") if p.is_file()} == {p.name for p in saved} | {"saved.json"}
    import shutil
    shutil.rmtree(tmp_path / "cut" / "root")  # a fresh clone: no sveb_data
    rest = ScriptedEngine()
    driver.main(args("cut"), engine=rest)
    assert len(rest.calls) == 1 and rest.calls[0] == whole.calls[-1]  # only what was not saved
    import json
    spent = json.loads((tmp_path / "cut" / "out" / "timing.json").read_text())["number-sveb"]
    assert spent["shards found"] == len(saved)  # its seconds are the rest's alone, and it says so
    for t in ("problems", "rollouts", "states", "references"):
        assert _rows(tmp_path / "cut" / "exports" / "number-sveb", t, getattr(schema, t.upper())) == \
            _rows(tmp_path / "whole" / "exports" / "number-sveb", t, getattr(schema, t.upper())), t
    assert not carried.exists()  # exported: the partial shards are no longer needed


def test_partial_load_takes_only_sampled_shards_and_keeps_what_is_there(tmp_path):
    from sveb.experiment import partial
    src = tmp_path / "partial"
    (src / "m" / "number" / "fp" / "rollouts").mkdir(parents=True)
    (src / "m" / "number" / "fp" / "hidden").mkdir(parents=True)
    (src / "m" / "number" / "fp" / "rollouts" / "part-00000.parquet").write_bytes(b"carried")
    (src / "m" / "number" / "fp" / "rollouts" / "part-00001.parquet").write_bytes(b"carried")
    (src / "m" / "number" / "fp" / "rollouts" / ".tmp-x.parquet").write_bytes(b"half")
    (src / "m" / "number" / "fp" / "hidden" / "part-00000.parquet").write_bytes(b"cache")
    (src / "m" / "number" / "fp" / "notes.sh").write_bytes(b"rm -rf /")
    (src / "m" / "number" / "fp" / "manifest.json").write_text('{"status": "complete"}')  # the build writes its own
    root = tmp_path / "root"
    (root / "m" / "number" / "fp" / "rollouts").mkdir(parents=True)
    (root / "m" / "number" / "fp" / "rollouts" / "part-00001.parquet").write_bytes(b"mine")
    assert partial.load(src, root) == 1
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert got == {"m/number/fp/rollouts/part-00000.parquet": b"carried",
                   "m/number/fp/rollouts/part-00001.parquet": b"mine"}
    assert partial.load(tmp_path / "absent", root) == 0


def test_a_fresh_clone_does_not_score_a_finished_setting_again(tmp_path, monkeypatch):
    """The estimators' caches live in the root, which a clone does not have; the stored estimates say a setting
    is scored. A setting missing one estimator's rows is scored again."""
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import sveb.experiment.protocols as study
    from tests.helpers.sources import write_chain_source
    src = write_chain_source(tmp_path / "dapo.jsonl")
    driver = _driver()
    args = _sveb_preset_args(src, tmp_path, "2", "grpo,mcs-1,numca")
    out = driver.main(args)
    before = (out / "scores.csv").read_text()
    shutil.rmtree(tmp_path / "root")
    scored = []
    real = study.eval_setting
    monkeypatch.setattr(study, "eval_setting", lambda s, *a: scored.append(s.key) or real(s, *a))
    driver.main(args, engine=ScriptedEngine())
    assert scored == [] and (out / "scores.csv").read_text() == before
    t = pq.read_table(out / "estimates.parquet")
    pq.write_table(t.filter(pc.not_equal(t["estimator"], "numca")), out / "estimates.parquet")
    shutil.rmtree(tmp_path / "root")
    driver.main(args, engine=ScriptedEngine())
    assert scored == ["number-sveb"] and (out / "scores.csv").read_text() == before


def test_dtype_pins_a_partial_sampled_on_another_cpu(tmp_path, monkeypatch):
    """Shards carry the concrete dtype in their fingerprints: a setting cut off on an AVX2 machine (auto: float32)
    resumes on an AVX-512 bf16 machine only with --dtype float32. Under auto the run stops with a one-line error
    (saved.json names the dtype) before sampling; without that record it would sample everything anew."""
    import shutil

    import pytest

    import sveb.core.device as device
    from tests.helpers.sources import write_chain_source
    monkeypatch.delenv("SVEB_CPU_DTYPE", raising=False)  # .ci/run's forced rerun: the simulated CPUs decide here
    src = write_chain_source(tmp_path / "dapo.jsonl")
    driver = _driver()

    def on(flags):
        monkeypatch.setattr(device, "cpu_flags", lambda: frozenset(flags))

    def args(name, *extra):
        return _sveb_preset_args(src, tmp_path / name, "3", "grpo,mcs-1", "--no-step-pairs", *extra)

    on({"avx2", "fma"})
    whole = ScriptedEngine()
    driver.main(args("whole"), engine=whole)
    with pytest.raises(KeyboardInterrupt):
        driver.main(args("cut"), engine=StopsAfter(len(whole.calls) - 1))
    driver.main(args("cut") + ["--save-partial"])
    carried = tmp_path / "cut" / "out" / "partial"
    keep = tmp_path / "kept-partial"
    shutil.copytree(carried, keep)

    import json
    assert json.loads((keep / "number-sveb" / "saved.json").read_text())["dtype"] == "float32"
    on({"avx512f", "avx512_bf16"})
    shutil.rmtree(tmp_path / "cut" / "root")
    eng = ScriptedEngine()
    with pytest.raises(SystemExit, match="sampled in float32; this run samples in bfloat16.*--dtype float32"):
        driver.main(args("cut"), engine=eng)  # under auto it would sample everything anew and drop the shards
    assert eng.calls == [] and sorted(carried.rglob("part-*")) != []
    assert not list((tmp_path / "cut" / "root").rglob("part-*"))  # nothing sampled, nothing carried in
    (carried / "number-sveb" / "saved.json").unlink()  # no record: the fingerprints alone decide
    for extra, calls in (((), len(whole.calls)), (("--dtype", "float32"), 1)):
        shutil.rmtree(tmp_path / "cut", ignore_errors=True)
        shutil.copytree(keep, carried)
        if not extra:
            (carried / "number-sveb" / "saved.json").unlink()
        eng = ScriptedEngine()
        driver.main(args("cut", *extra), engine=eng)
        assert len(eng.calls) == calls, extra
    assert store.read_manifest(tmp_path / "cut" / "exports" / "number-sveb")["dtype"] == "float32"


def test_a_setting_whose_pool_exceeds_its_seed_slot_stops_in_one_line_before_any_engine(tmp_path, monkeypatch):
    """number-paper (50 problems x 24 candidates) exceeds a builtin number seed's slot: the study stops with the
    seed error in one line, before an engine is made, and writes no export."""
    import pytest

    import sveb.engines

    def no_engine(*args, **kwargs):
        raise AssertionError("an engine was started before the draws were checked")
    monkeypatch.setattr(sveb.engines, "make_engine", no_engine)
    with pytest.raises(SystemExit) as e:
        _driver().main(["--settings", "number-paper", "--root", str(tmp_path / "root"),
                        "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out")])
    msg = str(e.value)
    assert msg.startswith("protocols: --seed 0: ") and "\n" not in msg and "needed for --problems 50" in msg
    assert not (tmp_path / "exports").exists()
