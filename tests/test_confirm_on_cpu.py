"""benchmarks/confirm.py at tiny size on the scripted engine (a tiny random Llama for the probe's hidden states):
the seeds draw none of the excluded problems, the test runs over the probe's trainings and writes result.md, and a
rerun samples nothing again."""

import importlib.util
import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from sveb.core.config import SamplingConfig
from sveb.core.errors import UsageError
from sveb.data_builders.load import load_problems

SPEC = importlib.util.spec_from_file_location("confirm_bench", Path(__file__).parents[1] / "benchmarks" / "confirm.py")
confirm = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(confirm)


def _source(path: Path) -> Path:
    """'What is a + b?' questions (which the scripted engine answers), enough for 5 disjoint test slots."""
    rows = [{"prompt": f"What is {a} + {b}?", "solution": str(a + b)} for a in range(1, 41) for b in range(1, 41)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


def test_the_confirmatory_run_end_to_end_and_resumed(tmp_path, monkeypatch):
    import os

    from sveb.engines.scripted import ScriptedEngine
    from tests.helpers.tiny_llama import tiny_llama
    dtype = os.environ.get("SVEB_CPU_DTYPE") or "float32"  # CI reruns under the other dtype: follow it
    monkeypatch.setenv("SVEB_CPU_DTYPE", dtype)
    src, model = str(_source(tmp_path / "dapo.jsonl")), tiny_llama(tmp_path / "llama")
    first = load_problems("number", src, 6, 3, "test")[0]  # what seed 3 draws without --exclude
    ids = tmp_path / "excluded.txt"
    ids.write_text("\n".join(p["problem_id"] for p in first) + "\n")
    out = tmp_path / "out"
    args = ["--seeds", "3,4", "--problems", "3", "--oversample", "2", "--trainings", "2", "--model", model,
            "--engine", "scripted", "--root", str(tmp_path / "root"), "--out", str(out), "--exclude", str(ids),
            "--dtype", dtype, "--results", str(tmp_path)]
    over = {"source": src, "rollouts": 8, "mc": 4, "mc_extra": 4, "max_acc": 0.9, "min_novel_numbers": 0,
            "sampling": SamplingConfig(max_tokens=120), "train_problems": 4}
    md = confirm.main(args, engine=ScriptedEngine(), model_dir=model, override=over)
    res = json.loads((out / "result.json").read_text())
    text = md.read_text()
    assert "probe − grpo, held-out" in text and res["verdict"] in text and "mcs-3" in text
    assert res["trainings"] == 2 and res["training_seeds"] == "0,1" and res["seeds"] == [3, 4]
    assert res["states"] == 4 * res["problems"] and res["problems"] >= 4 and res["dtype"] == dtype
    assert res["ci"][0] <= res["delta_sq"] <= res["ci"][1] and 0 <= res["p"] <= 1
    kept = {s: set(pq.read_table(out / "exports" / f"number-seed{s}" / "problems").column("problem_id").to_pylist())
            for s in (3, 4)}
    assert kept[3] and not kept[3] & {p["problem_id"] for p in first} and not kept[3] & kept[4]

    est = pq.read_table(out / "estimates.parquet").to_pylist()
    assert {r["build_fp"] for r in est} == set(res["builds"]) and {r["protocol"] for r in est} == {"held-out"}
    assert {r["estimator"] for r in est} == {"probe", "grpo", "mcs-2", "mcs-3"}
    assert len({r["params_fp"] for r in est if r["estimator"] == "probe"}) == 2  # one per training
    assert sum(r["estimator"] == "grpo" for r in est) == res["states"]
    redo = tmp_path / "redo"  # from the committed files alone: the exports and estimates.parquet
    confirm.main([*args, "--from-estimates", str(out / "estimates.parquet"), "--out", str(redo)], override=over)
    again = json.loads((redo / "result.json").read_text())
    for k in ("delta_sq", "ci", "se", "df", "p", "verdict", "delta_per_seed", "beside", "states", "problems",
              "training_sd", "train_build", "builds"):
        assert again[k] == res[k], k
    one = pq.read_table(out / "estimates.parquet")  # a file short of a seed, or not Parquet: one line, nothing written
    pq.write_table(one.filter(pc.equal(one["build_fp"], res["builds"][0])), tmp_path / "short.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really\n")
    first = pc.equal(one["build_fp"], res["builds"][0])
    mixed = pc.if_else(first, "cpu-bfloat16", "cpu-float32")  # one seed's model passes in another dtype
    pq.write_table(one.set_column(one.column_names.index("compute"), "compute", mixed), tmp_path / "mixed.parquet")
    for bad, says in (("short.parquet", f"no estimates of build {res['builds'][1]}"), ("junk.parquet", "readable"),
                      ("mixed.parquet", "estimates: mixed dtypes")):
        shutil.copytree(out / "exports", tmp_path / "exports", dirs_exist_ok=True)
        with pytest.raises(SystemExit, match=says) as e:
            confirm.main([*args, "--from-estimates", str(tmp_path / bad), "--out", str(tmp_path / "bad")],
                         override=over)
        assert str(e.value).startswith("confirm: error: --from-estimates")
        assert "\n" not in str(e.value) and not (tmp_path / "bad").exists()

    class Silent(ScriptedEngine):
        def generate(self, *a, **k):
            raise AssertionError("a rerun sampled again")
    again = confirm.main(args, engine=Silent(), model_dir=model, override=over).read_text()
    assert again.rsplit(";", 1)[0] == text.rsplit(";", 1)[0]  # the same result; only this run's seconds differ


def test_the_plan_dtype_is_enforced(monkeypatch):
    from sveb.experiment.confirm import check_dtype
    monkeypatch.setenv("SVEB_CPU_DTYPE", "bfloat16")
    with pytest.raises(UsageError, match="SVEB_CPU_DTYPE=bfloat16: the plan fixes --dtype float32"):
        check_dtype("float32")


def test_the_default_flags_are_the_plan():
    a = confirm.parse([])
    assert (a.seeds, a.problems, a.oversample, a.trainings, a.dtype) == ("3,4,5,6,7", 75, 2, 3, "float32")
    assert a.exclude == ["results/confirm-2/excluded.txt"]


def test_the_pre_registered_builds_keep_their_fingerprints():
    """results/confirm-2/plan.md names each build's fingerprint before sampling; a later change to the configs or
    to the fingerprint rule would silently make the run sample other builds than the ones registered."""
    import re
    from pathlib import Path

    from sveb.experiment.confirm import configs
    from sveb.sample.rules import stage_fps
    plan = (Path(__file__).resolve().parents[1] / "results" / "confirm-2" / "plan.md").read_text()
    line = re.search(r"\*\*Build fingerprints\*\*(.*?)(?:\n- |\n\n)", plan, re.S).group(1)
    registered = dict(re.findall(r"(\d)\s+`([0-9a-f]{12})`", line))
    train = re.search(r"fingerprint is \*\*`([0-9a-f]{12})`\*\*", plan).group(1)
    tests, tr = configs(confirm.parse([]))
    assert {str(c.seed): stage_fps(c)["references"] for c in tests} == registered and len(registered) == 5
    assert stage_fps(tr)["references"] == train


def test_a_seed_cut_off_resumes_in_a_fresh_clone_from_its_saved_shards(tmp_path, monkeypatch):
    """The confirmatory run outlasts a session: --save-partial copies what an unexported seed has sampled into
    OUT/partial (to commit), a fresh clone (an empty root) takes it back and samples only the rest, the seed's
    export equals an uninterrupted run's, and the partial folder goes once the seed is exported."""
    import os
    import shutil

    from rich.console import Console

    from sveb import store
    from sveb.core import schema
    from sveb.engines.scripted import ScriptedEngine
    from sveb.experiment.confirm import sample
    from tests.helpers.engines import StopsAfter
    from tests.helpers.tiny_llama import tiny_llama
    dtype = os.environ.get("SVEB_CPU_DTYPE") or "float32"
    monkeypatch.setenv("SVEB_CPU_DTYPE", dtype)
    src, model = str(_source(tmp_path / "dapo.jsonl")), tiny_llama(tmp_path / "llama")
    ids = tmp_path / "excluded.txt"
    ids.write_text("# nothing excluded\n")
    over = {"source": src, "rollouts": 8, "mc": 4, "mc_extra": 4, "max_acc": 0.9, "min_novel_numbers": 0,
            "sampling": SamplingConfig(max_tokens=120), "train_problems": 4}

    def args(name: str, *more: str):
        w = tmp_path / name
        return ["--seeds", "3", "--problems", "3", "--oversample", "2", "--trainings", "1", "--model", model,
                "--engine", "scripted", "--root", str(w / "root"), "--out", str(w / "out"), "--exclude", str(ids),
                "--dtype", dtype, "--results", str(w / "none"), *more]

    def parsed(name: str, *more: str):
        a = confirm.parse(args(name, *more))
        a.override = over
        return a
    quiet = Console(quiet=True)
    whole = ScriptedEngine()
    sample(parsed("whole"), quiet, whole, model)
    assert len(whole.calls) >= 3
    with pytest.raises(KeyboardInterrupt):
        sample(parsed("cut"), quiet, StopsAfter(1), model)
    assert not (tmp_path / "cut" / "out" / "exports" / "number-seed3").exists()
    confirm.main(args("cut", "--save-partial"), override=over)
    carried = tmp_path / "cut" / "out" / "partial" / "number-seed3"
    saved = sorted(carried.rglob("part-*.parquet"))
    assert saved and json.loads((carried / "saved.json").read_text())["dtype"] == dtype
    shutil.rmtree(tmp_path / "cut" / "root")  # a fresh clone: no sveb_data
    rest = ScriptedEngine()
    sample(parsed("cut"), quiet, rest, model)
    assert rest.calls == whole.calls[1:]  # only what was not saved
    for t in ("problems", "rollouts", "states", "references"):
        rows = [store.read_table(tmp_path / k / "out" / "exports" / "number-seed3" / t,
                                 getattr(schema, t.upper())).to_pylist() for k in ("cut", "whole")]
        assert rows[0] == rows[1], t
    assert not carried.exists()
