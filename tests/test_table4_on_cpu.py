"""Table 4 tooling on the scripted engine: resumable per domain, exports, timings; the verdict math by hand."""

import csv
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sveb.estimators.base import Estimator
from sveb.estimators.families import family_size
from sveb.present.table4 import verdicts

SPEC = importlib.util.spec_from_file_location("table4_bench", Path(__file__).parents[1] / "benchmarks" / "table4.py")
table4 = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(table4)


def test_verdicts_find_the_exact_estimator_better_and_the_copy_tied():
    rng = np.random.default_rng(0)
    v = rng.uniform(0, 1, 200)
    groups = np.repeat(np.arange(50), 4)
    ref = np.clip(v + rng.normal(0, 0.1, 200), 0, 1)
    noisy = np.clip(v + rng.normal(0, 0.3, 200), 0, 1)
    got = verdicts({"base": noisy, "exact": v, "same": noisy.copy()}, "base", ref, groups)
    assert got["exact"]["verdict"] == "better" and got["exact"]["d_hi"] < 0
    assert got["same"]["verdict"] == "no difference" and got["same"]["d_sq"] == 0


def test_the_build_jobs_time_their_own_stage_only_inside_a_clock(tmp_path):
    from sveb.core.config import BuildConfig
    from sveb.sample import jobs
    cfg = BuildConfig()
    fp = "f" * 12

    def no_engine():
        raise AssertionError("an empty shard starts no engine")
    jobs.group_shard(no_engine, cfg, tmp_path / "before.parquet", [], fp, fp)  # outside a clock: nowhere to go
    with jobs.stage_clock() as outer, jobs.stage_clock({"screening": 1.0}) as inner:
        jobs.group_shard(no_engine, cfg, tmp_path / "part-00000.parquet", [], fp, fp)
    jobs.group_shard(no_engine, cfg, tmp_path / "after.parquet", [], fp, fp)
    assert set(outer) == {"rollouts"} and outer["rollouts"] > 0
    assert inner["screening"] == 1.0 and inner["rollouts"] == outer["rollouts"]  # both clocks, the same seconds
    assert jobs.screen_shard.__name__ == "screen_shard" and jobs._clocks == []  # picklable by name; closed


def _files(tmp_path):
    number = tmp_path / "dapo.jsonl"
    number.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                                for a in range(1, 10) for b in range(1, 10)))
    return number


def test_two_domains_resumable_with_exports_and_timings(tmp_path):
    from sveb.engines.scripted import ScriptedEngine
    from sveb.evaluate import evaluate
    from sveb.store.export import verify
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    args = ["--domains", "number", "--source", f"number={number}", "--estimators", "grpo,mcs-2,mcs-4",
            "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out"),
            "--problems", "4", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
            "--oversample", "3", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9", "--seed", "3"]
    out = table4.main(args, engine=ScriptedEngine(), model_dir=weights)
    exp = tmp_path / "exports" / "number-seed3"  # seed k > 0: its own export beside seed 0's
    verify(exp)
    md = (out / "table4.md").read_text()
    assert md.index("held-out") < md.index("in-group") and "| mcs-2 |" in md and "| number |" in md
    timing = list(csv.DictReader(open(out / "timing.csv")))
    stages = {r["stage"]: float(r["seconds per state"]) for r in timing}
    assert {"screening", "rollouts", "references", "build wall", "eval grpo (held-out)"} <= set(stages)
    assert all(v >= 0 for v in stages.values()) and stages["references"] > 0
    dom = next(csv.DictReader(open(out / "domains.csv")))
    assert int(dom["states"]) == 8 and 0 < float(dom["accuracy"]) < 1 and float(dom["export MB"]) > 0
    scores = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(out / "scores.csv"))}
    original = next(p.parent for p in (tmp_path / "root").glob("*/number/*/manifest.json")
                    if not p.parent.name.endswith(".export"))
    row = evaluate(original, "mcs-2", {}, "held-out")
    assert float(scores[("mcs-2", "held-out")]["mae"]) == pytest.approx(row["mae"], abs=1e-4)
    assert scores[("grpo", "held-out")]["verdict"] == "" and scores[("mcs-4", "in-group")]["verdict"] in (
        "better", "worse", "no difference")
    check_scores(out / "scores.csv")
    assert (out / "estimates.parquet").exists() and (out / "interaction.csv").exists()
    assert "the numbers behind each mark" in md and "Does an estimator's Δ differ between domains?" in md
    # --from-exports: the same tables from the stored per-state estimates, no engine and no estimator run
    before_md = md.split("## Domains")[0]
    before_scores = (out / "scores.csv").read_text()
    rescored = table4.main([*args, "--from-exports"])
    assert (rescored / "scores.csv").read_text() == (out / "scores.csv").read_text()
    assert (rescored / "table4.md").read_text().split("## Domains")[0] == before_md
    # --add: one more estimator scored on the exports, its cells beside the stored ones, nothing else moved
    added = table4.main([*args, "--add", "numca, "])  # spaces and a trailing comma as a user types them
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(added / "scores.csv"))}
    assert rows[("numca", "held-out")]["estimates"] == "per state" and rows[("numca", "held-out")]["verdict"]
    assert {k: v for k, v in rows.items() if k[0] != "numca"} == scores
    import pyarrow.parquet as pq
    stored = pq.read_table(added / "estimates.parquet").to_pylist()
    assert sum(r["estimator"] == "numca" for r in stored) == 2 * 8
    table4.main([*args, "--add", "numca", "--add-domains", "number"])  # again: its own cells replaced, not doubled
    assert len(pq.read_table(added / "estimates.parquet").to_pylist()) == len(stored)
    table4.main([*args, "--from-exports", "--estimators", "grpo,mcs-2,mcs-4"])  # back to the first table's cells
    assert (out / "scores.csv").read_text() == before_scores
    # a rerun samples nothing: no engine is passed, and the scripted one cannot be started by name
    before = (out / "scores.csv").read_text()
    (out / "table4.md").unlink()
    first = {r["stage"]: float(r["seconds"]) for r in timing}
    table4.main(args)
    assert (out / "scores.csv").read_text() == before
    again = {r["stage"]: float(r["seconds"]) for r in csv.DictReader(open(out / "timing.csv"))}
    for stage in ("eval mcs-2 (held-out)", "eval mcs-4 (in-group)"):  # the run that computed them, not the reread
        assert again[stage] == pytest.approx(first[stage], abs=0.01)
    assert (out / "table4.md").read_text().split("## Domains")[0] == md.split("## Domains")[0]  # wall times differ
    assert not (exp / "estimates").exists() and not (exp / "scores").exists()  # the export stays as exported
    # an export deleted while its build stays in the root: exported again without sampling, and no stage time is
    # claimed for a run that found every shard done; the build's seconds come from its own manifest
    import shutil
    shutil.rmtree(exp)
    table4.main(args, engine=ScriptedEngine(), model_dir=weights)
    verify(exp)
    stage_times = json.loads((out / "timing.json").read_text())
    assert not {"screening", "rollouts", "references", "build wall"} & set(stage_times["number-seed3"])
    dom = next(csv.DictReader(open(out / "domains.csv")))
    assert float(dom["build s"]) == json.loads((exp / "manifest.json").read_text())["seconds"] > 0


COLUMNS = ["domain", "estimator", "protocol", "n_states", "mae", "mae_ci_low", "mae_ci_high", "k_eq", "k_eq_ci_low",
           "k_eq_ci_high", "spearman", "delta_sq",
           "delta_sq_ci_low", "delta_sq_ci_high", "delta_sq_se", "df", "p", "family", "family_size", "p_holm",
           "delta_sq_holm_low", "delta_sq_holm_high", "verdict", "mde_80", "trainings", "training_sd", "estimates",
           "builds"]


def check_scores(path):
    """scores.csv has every column, and each cell's numbers agree with its mark: "better" only where the
    Holm p < 0.05 and Δ < 0, "worse" only where Holm p < 0.05 and Δ > 0, "no difference" only where Holm p
    >= 0.05 and always with an MDE; Holm p >= p; the MDE is the formula's at alpha / m."""
    from sveb.score.power import mde
    rows = list(csv.DictReader(open(path)))
    assert rows and list(rows[0]) == COLUMNS
    for r in rows:
        if r["estimator"] == "grpo" or r["estimates"] != "per state":
            assert r["delta_sq"] == "" and r["mde_80"] == ""
            continue
        d, p, ph = float(r["delta_sq"]), float(r["p"]), float(r["p_holm"])
        lo, hi = float(r["delta_sq_ci_low"]), float(r["delta_sq_ci_high"])
        assert lo <= d <= hi and ph >= p - 1e-12 and int(r["family_size"]) >= 1 and int(r["df"]) >= 1
        assert r["verdict"] in ("better", "worse", "no difference")
        if r["verdict"] == "better":
            assert ph < 0.05 and d < 0 and r["mde_80"] == ""
        elif r["verdict"] == "worse":
            assert ph < 0.05 and d > 0 and r["mde_80"] == ""
        else:
            assert ph >= 0.05 or d == 0
            assert r["mde_80"] != "" and float(r["mde_80"]) == pytest.approx(
                mde(float(r["delta_sq_se"]), int(r["df"]), 0.05, int(r["family_size"])), nan_ok=True)
    return rows


def test_a_tiny_table_from_synthetic_arrays(tmp_path):
    """Three domains, grpo against an exact estimator, a copy of grpo and two MCS@k rows: scores.csv's
    columns are all there and every mark agrees with its Holm p and Δ; the interaction test finds the
    estimator whose gain differs between domains and not the copy of the baseline."""
    from sveb.present.table4 import COLUMNS as T4
    from sveb.present.table4 import cells, details_markdown, interaction_markdown, markdown
    from sveb.score import power
    assert list(T4) == COLUMNS
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(40), 4)
    rows = []
    for i, dom in enumerate(["a", "b", "c"]):
        v = rng.uniform(0, 1, 160)
        ref = np.clip(v + rng.normal(0, 0.1, 160), 0, 1)
        grpo = np.clip(v + rng.normal(0, 0.3, 160), 0, 1)
        numca = np.clip(v + rng.normal(0, 0.3 * (1 - 0.45 * i), 160), 0, 1)  # better in b and c than in a
        est = {"grpo": grpo, "numca": numca, "hista": grpo.copy(), "mcs-1": np.clip(v + rng.normal(0, 0.35, 160), 0, 1),
               "mcs-4": np.clip(v + rng.normal(0, 0.15, 160), 0, 1)}
        rows += cells(dom, {"held-out": est, "in-group": dict(est)}, "grpo", ref, groups)
    path = tmp_path / "scores.csv"
    table4.write_csv(path, rows)
    got = check_scores(path)
    assert {r["verdict"] for r in got} >= {"better", "no difference"}
    by = {(r["domain"], r["estimator"], r["protocol"]): r for r in got}
    assert by[("c", "numca", "held-out")]["verdict"] == "better"
    hista = by[("a", "hista", "held-out")]
    assert hista["verdict"] == "no difference" and float(hista["delta_sq"]) == 0
    assert by[("a", "mcs-1", "held-out")]["family"] != by[("a", "numca", "held-out")]["family"]  # scale vs main
    inter = {(r["protocol"], r["estimator"]): r for r in power.interaction([r for r in rows if r["delta_sq_se"] != ""])}
    assert inter[("held-out", "numca")]["differs"] and inter[("held-out", "numca")]["df"] == 2
    assert np.isnan(inter[("held-out", "hista")]["q"])  # a copy of the baseline: Δ = 0 with se 0, nothing to test
    md = markdown(rows, ["a", "b", "c"], "held-out", ["grpo", "numca", "hista"])
    assert "▲" in md and "=" in md
    det = details_markdown(rows, ["a", "b", "c"], "held-out", ["grpo", "numca", "hista"])
    assert len(det.splitlines()) == 2 + 6  # numca and hista in three domains; grpo has no comparison
    assert "| numca |" in interaction_markdown(list(inter.values()))


def test_scale_rows_are_a_holm_family_of_their_own():
    """Adding MCS@k rows to a domain's table leaves the estimators' Holm p as it was (and the reverse)."""
    rng = np.random.default_rng(1)
    v = rng.uniform(0, 1, 200)
    groups = np.repeat(np.arange(50), 4)
    ref = np.clip(v + rng.normal(0, 0.1, 200), 0, 1)
    est = {"grpo": np.clip(v + rng.normal(0, 0.3, 200), 0, 1), "numca": np.clip(v + rng.normal(0, 0.25, 200), 0, 1),
           "hista": np.clip(v + rng.normal(0, 0.28, 200), 0, 1)}
    alone = verdicts(est, "grpo", ref, groups)
    scale = {f"mcs-{k}": np.clip(v + rng.normal(0, 0.3 / k, 200), 0, 1) for k in (1, 2, 4)}
    both = verdicts({**est, **scale}, "grpo", ref, groups)
    assert all(both[n]["p_holm"] == alone[n]["p_holm"] for n in ("numca", "hista"))
    assert both["mcs-4"]["p_holm"] == verdicts({"grpo": est["grpo"], **scale}, "grpo", ref, groups)["mcs-4"]["p_holm"]


def test_eval_seconds_are_the_computing_runs(tmp_path):
    row = {"estimator": "probe", "params_fp": "abc", "protocol": "held-out", "seconds": 2.0}
    (tmp_path / "timings").mkdir()
    (tmp_path / "timings" / "probe-abc-held-out.json").write_text(json.dumps({"prepare_seconds": 5.0}))
    assert table4.eval_seconds(tmp_path, row, wall=0.01) == 7.0  # estimation + training, not the reread's 0.01
    assert table4.eval_seconds(tmp_path, {**row, "protocol": "in-group"}, wall=0.01) == 2.0
    assert table4.eval_seconds(tmp_path, {**row, "seconds": None}, wall=0.01) == 0.01


class _Pass:
    """HiddenStates' contract: ensure() returns the arrays it computed now, None for a cached group."""
    def __init__(self, cached):
        self.cached, self.asked = cached, []

    def ensure(self, pid, rollouts):
        self.asked.append(pid)
        return None if pid in self.cached else {0: np.zeros((1, 1))}


def test_a_cached_hidden_pass_keeps_the_time_its_computing_run_recorded():
    from types import SimpleNamespace
    data = SimpleNamespace(problems={"a": 0, "b": 0}, rollouts={"a": [], "b": []})
    hs = _Pass(cached={"a", "b"})
    assert table4.hidden_pass(hs, data) is None and hs.asked == ["a", "b"]
    assert table4.hidden_pass(_Pass(cached={"a"}), data) >= 0.0  # part of it computed now: timed


def test_the_shared_hidden_pass_shows_a_bar_over_its_problems(monkeypatch):
    """The pass runs for minutes on a large build before any estimator prints: it must show its progress."""
    import io
    from types import SimpleNamespace

    import rich.progress
    from rich.console import Console
    seen = []

    def track(seq, description="", **kw):
        seen.append((description, list(seq), kw.get("console")))
        yield from seen[-1][1]
    monkeypatch.setattr(rich.progress, "track", track)
    data = SimpleNamespace(problems={"b": 0, "a": 0}, rollouts={"a": [], "b": []})
    console = Console(file=io.StringIO(), width=120)  # not a terminal, as a nohup log: the line stands in for the bar
    table4.hidden_pass(_Pass(cached=set()), data, console)
    assert seen == [("hidden states (shared pass)", ["a", "b"], console)]
    assert "hidden states: shared pass over 2 problems" in console.file.getvalue()


def test_a_cached_pass_unrecorded_is_estimated_from_its_files_write_times(tmp_path):
    import os
    for i, t in enumerate([100.0, 110.0, 130.0]):  # three problems; the span 30 s covers two of them
        f = tmp_path / f"p{i}.npz"
        f.write_bytes(b"x")
        os.utime(f, (t, t))
    assert table4.cached_pass_seconds(tmp_path) == 45.0
    (tmp_path / "p1.npz").unlink()
    (tmp_path / "p2.npz").unlink()
    assert table4.cached_pass_seconds(tmp_path) is None  # one file says nothing of a pass's length


def test_a_local_source_is_shown_without_this_machines_path():
    shown = table4.shown_source("mmlu-stem=/work/shared/datasets/mmlu_stem/test.jsonl")
    assert shown == "mmlu-stem=mmlu_stem/test.jsonl"
    assert table4.shown_source("builtin") == "builtin"


def test_the_cost_table_divides_by_each_domains_states_and_marks_what_is_missing():
    from sveb.present.table4 import cost_markdown
    md = cost_markdown({"a": {"rollouts": 10.0, "eval x": 2.0}, "b": {"eval x": 9.0}}, {"a": 5, "b": 3}, ["a", "b"])
    assert md.splitlines()[2] == "| rollouts | 2.000 | - |"
    assert md.splitlines()[3] == "| eval x | 0.400 | 3.000 |"


def test_a_family_with_members_unscored_is_corrected_for_its_whole_size():
    """One main-family estimator scored of the declared main family: its Holm p is m p (the others count as
    p = 1), as if the others had been scored and found nothing."""
    rng = np.random.default_rng(2)
    v = rng.uniform(0, 1, 200)
    groups = np.repeat(np.arange(50), 4)
    ref = np.clip(v + rng.normal(0, 0.1, 200), 0, 1)
    est = {"grpo": np.clip(v + rng.normal(0, 0.3, 200), 0, 1), "numca": np.clip(v + rng.normal(0, 0.27, 200), 0, 1)}
    got = verdicts(est, "grpo", ref, groups)["numca"]
    m = family_size("main")
    assert got["m"] == m >= 9 and got["p_holm"] == pytest.approx(min(1.0, m * got["p"]))


def test_an_estimate_scored_under_a_name_renamed_since_carries_todays_name():
    from sveb.experiment.table4_files import current_name, merge_estimates
    rec = {"estimator": "numca", "provenance": "sveb eval numca-sveb b45f608043c6"}
    assert current_name(rec) == "numca-sveb"
    assert current_name({"estimator": "hista", "provenance": "board bundle x (the table's hista: the reading "
                                                              "registered as hista-sveb since)"}) == "hista-sveb"
    assert current_name({"estimator": "grpo", "provenance": "board bundle results/powered/board/bundles/07"}) == "grpo"
    cell = {"estimator": "e", "protocol": "p"}
    old = [cell | {"domain": "a", "build_fp": "s0", "v": 1}, cell | {"domain": "b", "build_fp": "s0", "v": 2},
           cell | {"domain": "a", "build_fp": "s1", "v": 4}]  # another seed's build of domain a
    new = cell | {"domain": "a", "build_fp": "s0", "v": 3}
    assert merge_estimates(old, [new]) == [old[1], old[2], new]  # seed s1's rows of the cell stay


TRAINED_ON: list = []


@dataclass
class TrainSeen(Estimator):
    """a stand-in for ppo-1, probe, pacs: learns on the train build it is handed (the states valued at its mean
    reward) and records which build that was"""
    train_split = True
    train_build: str = ""

    def cache_key(self, bdir, manifest, ctx=None) -> str:
        return ctx.train.key

    def prepare(self, build, ctx=None) -> None:
        TRAINED_ON.append(ctx.train.build_fp)
        rows = ctx.train.data().rollouts
        self._mean = float(np.mean([r["reward"] for rs in rows.values() for r in rs]))

    def estimate(self, group, states):
        return np.full(len(states), self._mean)


def test_seeds_are_disjoint_builds_pooled_per_domain_with_one_train_build(tmp_path):
    """--seeds: each seed its own export of disjoint problems, one train build for all of them, a later run that
    adds a seed keeps the others' estimates, and a domain's cells pool every seed's states (clusters: problems)."""
    import numpy as np
    import pyarrow.parquet as pq

    from sveb import store
    from sveb.engines.scripted import ScriptedEngine
    from sveb.experiment.table4_files import domain_exports
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    args = ["--domains", "number", "--source", f"number={number}",
            "--estimators", "grpo,mcs-2,test_table4_on_cpu:TrainSeen",
            "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out"),
            "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
            "--train-problems", "3", "--train-states", "1", "--train-mc", "2",
            "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9"]
    TRAINED_ON.clear()
    table4.main([*args, "--seeds", "0,1"], engine=ScriptedEngine(), model_dir=weights)
    exports = tmp_path / "exports"
    assert domain_exports(exports, "number") == ["number", "number-seed1"]
    assert sorted(p.name for p in exports.iterdir()) == ["number", "number-seed1", "number-train"]
    probs = [set(store.read_table(exports / n / "problems").column("problem_id").to_pylist())
             for n in ("number", "number-seed1")]
    assert probs[0] and probs[1] and not probs[0] & probs[1]
    assert len(set(TRAINED_ON)) == 1 and len(TRAINED_ON) == 4  # both seeds' trainer got the one train build
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(tmp_path / "out" / "scores.csv"))}
    states = [store.read_table(exports / n / "states").num_rows for n in ("number", "number-seed1")]
    assert int(rows[("grpo", "held-out")]["n_states"]) == sum(states)
    # the pooled MAE is the mean over both seeds' states of |estimate - reference|
    est = pq.read_table(tmp_path / "out" / "estimates.parquet").to_pylist()
    refs = {}
    for n in ("number", "number-seed1"):
        refs |= {r["state_id"]: r["value"] for r in store.read_table(exports / n / "references").to_pylist()}
    mcs = [abs(r["value"] - refs[r["state_id"]]) for r in est
           if r["estimator"] == "mcs-2" and r["protocol"] == "held-out"]
    assert len(mcs) == sum(states)
    assert float(rows[("mcs-2", "held-out")]["mae"]) == pytest.approx(np.mean(mcs), abs=1e-6)
    dom = list(csv.DictReader(open(tmp_path / "out" / "domains.csv")))
    assert [(d["domain"], d["seed"]) for d in dom] == [("number", "0"), ("number", "1")]
    # a later run adds seed 2: seeds 0 and 1 keep their estimates, the cells pool three builds
    before = len(est)
    table4.main([*args, "--seeds", "2"], engine=ScriptedEngine(), model_dir=weights)
    est2 = pq.read_table(tmp_path / "out" / "estimates.parquet").to_pylist()
    assert len({r["build_fp"] for r in est2}) == 3 and len(est2) > before
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(tmp_path / "out" / "scores.csv"))}
    n3 = sum(store.read_table(exports / n / "states").num_rows for n in domain_exports(exports, "number"))
    assert int(rows[("mcs-2", "in-group")]["n_states"]) == n3
    assert len(set(TRAINED_ON)) == 1 and not (exports / "number-seed2-train").exists()
    # --from-exports with the estimates alone gives the same table
    saved = (tmp_path / "out" / "scores.csv").read_text()
    table4.main([*args, "--from-exports"])
    assert (tmp_path / "out" / "scores.csv").read_text() == saved


def test_scoring_against_sampling_sums_the_pass_and_every_estimator():
    from sveb.present.table4 import scoring_vs_sampling
    timing = {"a": {"screening": 10.0, "rollouts": 20.0, "references": 70.0, "build wall": 101.0,
                    "hidden pass": 5.0, "eval grpo (held-out)": 1.0, "eval ppo-n (in-group)": 24.0},
              "a-seed1": {"hidden pass (from cache file times)": 3.0, "eval grpo (held-out)": 2.0},
              "b": {"screening": 1.0}}
    rows = {r["build"]: r for r in scoring_vs_sampling(timing, ["a", "a-seed1", "b", "c"])}
    assert rows["a"]["sampling s"] == 100.0 and rows["a"]["scoring s"] == 30.0 and rows["a"]["ratio"] == 0.3
    assert rows["a"]["dearest"].startswith("ppo-n (in-group) 24 s")
    assert rows["a-seed1"]["sampling s"] is None and rows["a-seed1"]["scoring s"] == 5.0
    assert rows["a-seed1"]["ratio"] is None and rows["b"]["scoring s"] is None and rows["c"]["ratio"] is None


def test_a_cell_scored_on_some_seeds_only_is_named_with_its_share(tmp_path):
    """A domain pooled over two seeds whose estimator has estimates on one: its cell covers that seed's states,
    and table4.md says so beside the pooled-builds line."""
    from types import SimpleNamespace

    from rich.console import Console

    from sveb.experiment.table4_files import write_tables
    rng = np.random.default_rng(0)
    exports = tmp_path / "exports"
    records = []
    for name, fp, pids in (("number", "b0", ["p0", "p1", "p2"]), ("number-seed1", "b1", ["p3", "p4", "p5"])):
        write_export(exports / name, fp, pids, rng)
        for e in ("grpo", "mcs-2") if name == "number" else ("grpo",):
            for pid in pids:
                for k in range(2):
                    records.append({"domain": "number", "build_fp": fp, "state_id": f"{pid}-{k}", "estimator": e,
                                    "params_fp": "x", "protocol": "held-out", "value": float(rng.random()),
                                    "provenance": ""})
    a = SimpleNamespace(exports=str(exports), mc=20)
    drows = [{"domain": "number", "seed": 0, "states": 6}, {"domain": "number", "seed": 1, "states": 6}]
    write_tables(a, tmp_path, ["number"], ["grpo", "mcs-2"], records, drows, [], {}, "CPU flags: x",
                 Console(file=open(tmp_path / "log", "w")), ["number", "number-seed1"])
    md = (tmp_path / "table4.md").read_text()
    assert "number: seeds 0, 1 (12 states)" in md and "number mcs-2 (6 of 12)" in md and "number grpo (" not in md
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(tmp_path / "scores.csv"))}
    assert rows[("grpo", "held-out")]["n_states"] == "12" and rows[("mcs-2", "held-out")]["n_states"] == "6"


def test_a_stored_score_is_kept_only_while_its_builds_are_still_pooled(tmp_path):
    """A cell without per-state estimates keeps its stored MAE (a † cell) while the builds it was scored on are
    among the domain's; once the domain is sampled again (another build_fp), the old score is dropped, not shown
    beside the new builds' cells. Every row names the builds it pools."""
    from types import SimpleNamespace

    from rich.console import Console

    from sveb.experiment.table4_files import write_tables
    rng = np.random.default_rng(1)
    exports = tmp_path / "exports"
    write_export(exports / "number", "b0", ["p0", "p1", "p2"], rng)
    records = [{"domain": "number", "build_fp": "b0", "state_id": f"p{i}-{k}", "estimator": "grpo", "params_fp": "x",
                "protocol": "held-out", "value": float(rng.random()), "provenance": ""}
               for i in range(3) for k in range(2)]
    a = SimpleNamespace(exports=str(exports), mc=20)
    drows = [{"domain": "number", "seed": 0, "states": 6}]
    log = Console(file=open(tmp_path / "log", "w"))

    def table(recs):
        write_tables(a, tmp_path, ["number"], ["grpo", "mcs-2"], recs, drows, [], {}, "CPU flags: x", log)
        return {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(tmp_path / "scores.csv"))}

    stored = {"mcs-2": "0.25", "grpo": ""}
    with open(tmp_path / "scores.csv", "w", newline="") as f:  # a previous run's score of mcs-2 on build b0
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerow({c: "" for c in COLUMNS} | {"domain": "number", "estimator": "mcs-2", "protocol": "held-out",
                                               "n_states": "6", "mae": stored["mcs-2"], "mae_ci_low": "0.2",
                                               "mae_ci_high": "0.3", "estimates": "per state", "builds": "b0"})
    rows = table(records)
    mcs2 = rows[("mcs-2", "held-out")]
    assert mcs2["mae"] == "0.25" and mcs2["estimates"].startswith("MAE only")
    assert rows[("grpo", "held-out")]["builds"] == "b0" and rows[("mcs-2", "held-out")]["builds"] == "b0"
    assert "number mcs-2 on 6 states of build b0" in (tmp_path / "table4.md").read_text()
    import shutil
    shutil.rmtree(exports / "number")  # the domain sampled again: a new build, new grpo estimates
    write_export(exports / "number", "b9", ["q0", "q1", "q2"], rng)
    rows = table([r | {"build_fp": "b9", "state_id": "q" + r["state_id"][1:]} for r in records])
    assert ("mcs-2", "held-out") not in rows and rows[("grpo", "held-out")]["builds"] == "b9"
    assert "†" not in (tmp_path / "table4.md").read_text()


def write_export(path, fp, pids, rng):
    """A minimal export: manifest, problems, states and references tables (what the tables read)."""
    import pyarrow as pa

    from sveb import store
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"build_fp": fp, "domain": "number"}))
    states = [{"state_id": f"{p}-{k}", "problem_id": p} for p in pids for k in range(2)]
    store.write_shard(store.shard_path(path / "states", 0), pa.Table.from_pylist(states), "t")
    store.write_shard(store.shard_path(path / "references", 0), pa.Table.from_pylist(
        [{"state_id": s["state_id"], "value": float(rng.random())} for s in states]), "t")


def test_a_bad_seeds_list_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        table4.parse(["--seeds", "1,x"])
    assert e.value.code == 2 and "--seeds 1,x: expected comma-separated seeds" in capsys.readouterr().err
    assert table4.parse(["--seeds", "0, 1,2"]).seeds == "0, 1,2"


@dataclass
class SeededTrainSeen(TrainSeen):
    """a trained stand-in whose estimates move with its training seed, as a probe's do"""
    seed: int = 0

    def estimate(self, group, states):
        rng = np.random.default_rng([self.seed, len(states)])
        return np.clip(self._mean + rng.normal(0, 0.05, len(states)), 0, 1)


def test_a_trained_estimator_is_tested_over_its_trainings(tmp_path):
    """--trainings 3: a trained estimator (one whose settings have a `seed`) is scored with seeds 0, 1, 2 on the
    one train build; the replicates are stored with their training seed; its cell's test is the test over
    trainings (sveb.score.trainings) and its MAE the mean of the three; an untrained one gets no trainings column;
    --trainings 1 gives the default training alone, called one training."""
    from sveb.engines.scripted import ScriptedEngine
    from sveb.experiment.table4_files import pooled_estimates, read_estimates
    from sveb.score.trainings import over_trainings
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    name = "test_table4_on_cpu:SeededTrainSeen"
    args = ["--domains", "number", "--source", f"number={number}", "--estimators", f"grpo,mcs-2,{name}",
            "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out"),
            "--problems", "4", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
            "--train-problems", "3", "--train-states", "1", "--train-mc", "2",
            "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9"]
    TRAINED_ON.clear()
    out = table4.main([*args, "--trainings", "3"], engine=ScriptedEngine(), model_dir=weights)
    assert len(set(TRAINED_ON)) == 1 and len(TRAINED_ON) == 6  # three trainings x two protocols, one train build
    records = read_estimates(out / "estimates.parquet")
    assert {r["training"] for r in records if r["estimator"] == name} == {None, 1, 2}
    assert {r["training"] for r in records if r["estimator"] != name} == {None}
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(out / "scores.csv"))}
    row = rows[(name, "held-out")]
    assert row["trainings"] == "3" and float(row["training_sd"]) > 0 and rows[("mcs-2", "held-out")]["trainings"] == ""
    a = table4.parse([*args, "--trainings", "3"])
    ref, groups, est, reps = pooled_estimates("number", Path(a.exports), ["grpo", name], records)
    reps = reps["held-out"][name]
    runs = [est["held-out"][name], reps[1], reps[2]]
    assert not np.allclose(runs[0], runs[1])  # the seed moved the estimates
    base = est["held-out"]["grpo"]
    d = np.stack([(x - ref) ** 2 - (base - ref) ** 2 for x in runs])
    want = over_trainings(d, groups)
    assert float(row["p"]) == pytest.approx(want["p_delta"], rel=1e-6)
    assert float(row["delta_sq"]) == pytest.approx(want["delta_sq"], rel=1e-6, abs=1e-12)
    assert float(row["mae"]) == pytest.approx(np.mean([np.abs(x - ref).mean() for x in runs]), abs=1e-6)
    acc = over_trainings(np.stack([np.abs(x - ref) for x in runs]), groups)  # its CI carries the spread too
    assert (float(row["mae_ci_low"]), float(row["mae_ci_high"])) == pytest.approx(
        (acc["delta_sq_ci_low"], acc["delta_sq_ci_high"]), rel=1e-6)
    check_scores(out / "scores.csv")
    md = (out / "table4.md").read_text()
    assert f"Over trainings: {name} (3)" in md and "One training" not in md
    assert f"| 3 ({float(row['training_sd']):.4f}) |" in md  # the spread beside the cell's numbers
    # the rescore from the stored estimates gives the same cells
    saved = (out / "scores.csv").read_text()
    table4.main([*args, "--trainings", "3", "--from-exports"])
    assert (out / "scores.csv").read_text() == saved
    # one training: the default's cell alone, said so
    one = table4.main([*args, "--trainings", "1", "--out", str(tmp_path / "one"),
                       "--estimates", str(out / "estimates.parquet"), "--from-exports"])
    assert "Over trainings" in (one / "table4.md").read_text()  # the stored replicates are still read
    records = [r for r in records if r["training"] is None]
    from sveb.experiment.table4_files import write_estimates
    write_estimates(tmp_path / "default-only.parquet", records)
    one = table4.main([*args, "--out", str(tmp_path / "one"), "--estimates", str(tmp_path / "default-only.parquet"),
                       "--from-exports"])
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(one / "scores.csv"))}
    assert rows[(name, "held-out")]["trainings"] == "1" and rows[(name, "held-out")]["training_sd"] == ""
    assert f"One training: {name}" in (one / "table4.md").read_text()


def test_a_bad_trainings_count_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit):
        table4.parse(["--trainings", "0"])
    assert "--trainings 0: expected 1 or more" in capsys.readouterr().err


def test_a_seed_the_source_cannot_fill_is_one_line_before_any_engine_starts(tmp_path, monkeypatch, capsys):
    """200 problems x 3 candidates exceed a builtin number seed's slot: the run stops in one line naming the seed,
    before an engine is made (the first domain would otherwise sample for an hour before the error)."""
    import sveb.engines

    def no_engine(*args, **kwargs):
        raise AssertionError("an engine was started before the draw was checked")
    monkeypatch.setattr(sveb.engines, "make_engine", no_engine)
    with pytest.raises(SystemExit) as e:
        table4.main(["--domains", "number", "--estimators", "grpo,mcs-2", "--root", str(tmp_path / "root"),
                     "--exports", str(tmp_path / "exports"), "--out", str(tmp_path / "out"),
                     "--problems", "200", "--oversample", "3", "--no-train"])
    msg = str(e.value)
    assert msg.startswith("table4: error: ") and "\n" not in msg and "--seed 0" in msg and "number" in msg
    assert not (tmp_path / "exports").exists()


def test_a_build_cut_off_resumes_in_a_fresh_clone_from_its_saved_shards(tmp_path):
    """--save-partial copies what an unexported seed's build has sampled into OUT/partial (to commit); a fresh
    clone (an empty root) takes the shards back and samples only the rest; the export equals an uninterrupted
    run's, its timing says how many shards were found, and the partial folder goes once exported."""
    import shutil

    from sveb import store
    from sveb.core import schema
    from sveb.engines.scripted import ScriptedEngine
    from tests.helpers.engines import StopsAfter
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")

    def args(name):
        w = tmp_path / name
        return ["--domains", "number", "--source", f"number={number}", "--estimators", "grpo,mcs-2", "--no-train",
                "--root", str(w / "root"), "--exports", str(w / "exports"), "--out", str(w / "out"),
                "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
                "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9",
                "--dtype", "float32"]
    whole = ScriptedEngine()
    table4.main(args("whole"), engine=whole, model_dir=weights)
    assert len(whole.calls) >= 3
    with pytest.raises(KeyboardInterrupt):
        table4.main(args("cut"), engine=StopsAfter(len(whole.calls) - 1), model_dir=weights)
    assert not (tmp_path / "cut" / "exports" / "number").exists()
    table4.main(args("cut") + ["--save-partial"])
    carried = tmp_path / "cut" / "out" / "partial" / "number"
    saved = sorted(carried.rglob("part-*.parquet"))
    assert saved and json.loads((carried / "saved.json").read_text())["dtype"] == "float32"
    shutil.rmtree(tmp_path / "cut" / "root")  # a fresh clone: no sveb_data
    rest = ScriptedEngine()
    table4.main(args("cut"), engine=rest, model_dir=weights)
    assert len(rest.calls) == 1 and rest.calls[0] == whole.calls[-1]  # only what was not saved
    spent = json.loads((tmp_path / "cut" / "out" / "timing.json").read_text())["number"]
    assert spent["shards found"] == len(saved)
    for t in ("problems", "rollouts", "states", "references"):
        rows = [store.read_table(tmp_path / k / "exports" / "number" / t, getattr(schema, t.upper())).to_pylist()
                for k in ("cut", "whole")]
        assert rows[0] == rows[1], t
    assert not carried.exists()
    # a carried folder sampled in another dtype stops the run in one line before it samples anything anew
    shutil.rmtree(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        table4.main(args("cut"), engine=StopsAfter(1), model_dir=weights)
    table4.main(args("cut") + ["--save-partial"])
    shutil.rmtree(tmp_path / "cut" / "root")
    other = [a if a != "float32" else "bfloat16" for a in args("cut")]
    eng = ScriptedEngine()
    with pytest.raises(SystemExit, match="sampled in float32; this run samples in bfloat16.*--dtype float32"):
        table4.main(other, engine=eng, model_dir=weights)
    assert eng.calls == [] and not list((tmp_path / "cut" / "root").rglob("part-*"))


@dataclass
class CutsOff(Estimator):
    """an estimator during which the session ends"""

    def estimate(self, group, states):
        raise KeyboardInterrupt("the session ends")


def test_estimates_are_kept_per_estimator_and_a_fresh_clone_runs_only_what_is_missing(tmp_path):
    """Each estimator's per-state estimates reach estimates.parquet as soon as it is scored, so a run cut off
    mid-domain keeps the ones it finished; a fresh clone (no sveb_data) runs only the estimators (and training
    replicates) that the stored estimates lack, with today's parameters."""
    import shutil

    import pyarrow.parquet as pq

    from sveb.engines.scripted import ScriptedEngine
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    seeded = "test_table4_on_cpu:SeededTrainSeen"

    def args(estimators, *extra):
        return ["--domains", "number", "--source", f"number={number}", "--estimators", estimators,
                "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"),
                "--out", str(tmp_path / "out"), "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10",
                "--mc-extra", "4", "--train-problems", "3", "--train-states", "1", "--train-mc", "2",
                "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9", *extra]
    with pytest.raises(KeyboardInterrupt):
        table4.main(args("grpo,mcs-2,test_table4_on_cpu:CutsOff"), engine=ScriptedEngine(), model_dir=weights)
    kept = {r["estimator"] for r in pq.read_table(tmp_path / "out" / "estimates.parquet").to_pylist()}
    assert kept == {"grpo", "mcs-2"}  # finished before the cut: kept
    TRAINED_ON.clear()
    table4.main(args(f"grpo,mcs-2,{seeded}", "--trainings", "2"), engine=ScriptedEngine(), model_dir=weights)
    assert len(TRAINED_ON) == 4  # two trainings x two protocols
    saved = (tmp_path / "out" / "scores.csv").read_text()
    shutil.rmtree(tmp_path / "root")  # a fresh clone: no caches
    TRAINED_ON.clear()
    table4.main(args(f"grpo,mcs-2,{seeded}", "--trainings", "2"))  # no engine needed: the export is there
    assert TRAINED_ON == [] and (tmp_path / "out" / "scores.csv").read_text() == saved
    table4.main(args(f"grpo,mcs-2,{seeded}", "--trainings", "3"))  # one more training: only it runs
    assert len(TRAINED_ON) == 2
    rows = {(r["estimator"], r["protocol"]): r for r in csv.DictReader(open(tmp_path / "out" / "scores.csv"))}
    assert rows[(seeded, "held-out")]["trainings"] == "3"


def test_a_run_cut_off_in_a_later_domain_has_scored_the_domains_before_it(tmp_path):
    """Domain by domain: each domain is scored as soon as its builds are exported, so a session that ends while
    a later domain samples leaves the earlier domains' estimates stored (not hours of builds with nothing scored)."""
    import pyarrow.parquet as pq

    from sveb.engines.scripted import ScriptedEngine
    from tests.helpers.engines import StopsAfter
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")

    def args(name, domains):
        w = tmp_path / name
        return ["--domains", domains, "--source", f"number={number}", "--estimators", "grpo,mcs-2", "--no-train",
                "--root", str(w / "root"), "--exports", str(w / "exports"), "--out", str(w / "out"),
                "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
                "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9",
                "--dtype", "float32"]
    first = ScriptedEngine()
    table4.main(args("count", "number"), engine=first, model_dir=weights)
    with pytest.raises(KeyboardInterrupt):  # the session ends at the second domain's first sampling call
        table4.main(args("cut", "number,general"), engine=StopsAfter(len(first.calls)), model_dir=weights)
    out = tmp_path / "cut"
    assert (out / "exports" / "number").exists() and not (out / "exports" / "general").exists()
    stored = pq.read_table(out / "out" / "estimates.parquet").to_pylist()
    assert {(r["domain"], r["estimator"], r["protocol"]) for r in stored} == {
        ("number", e, p) for e in ("grpo", "mcs-2") for p in ("held-out", "in-group")}


def test_a_later_domains_run_keeps_the_earlier_domains_column(tmp_path):
    """Table 4 is regenerated one domain per run (`make table4 ARGS="--domains D"`): the tables a run writes show
    its own domain and every domain already scored into the same estimates with its exports, not only its own."""
    import csv

    from sveb.engines.scripted import ScriptedEngine
    files = {"number": _files(tmp_path), "math": tmp_path / "math.jsonl"}
    files["math"].write_text("\n".join(json.dumps({"problem": f"What is {a} + {b}?", "answer": str(a + b),
                                                    "solution": f"\\boxed{{{a + b}}}"})
                                        for a in range(1, 10) for b in range(1, 10)))
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")

    def args(domain):
        return ["--domains", domain, "--source", f"{domain}={files[domain]}", "--estimators", "grpo,mcs-2",
                "--no-train", "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"),
                "--out", str(tmp_path / "out"),
                "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
                "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9",
                "--dtype", "float32"]
    table4.main(args("number"), engine=ScriptedEngine(), model_dir=weights)
    before = (tmp_path / "out" / "scores.csv").read_text()
    table4.main(args("math"), engine=ScriptedEngine(), model_dir=weights)
    rows = list(csv.DictReader(open(tmp_path / "out" / "scores.csv")))
    assert {r["domain"] for r in rows} == {"number", "math"}
    kept = [r for r in rows if r["domain"] == "number"]
    assert kept == [r for r in csv.DictReader(before.splitlines())]  # number's rows as its own run wrote them
    assert [r["domain"] for r in csv.DictReader(open(tmp_path / "out" / "domains.csv"))] == ["number", "math"]
    md = (tmp_path / "out" / "table4.md").read_text()
    assert "| estimator | number | math |" in md


BESIDE: list = []  # the estimates file another run (`--add`) writes into while a sampling run scores


@dataclass
class AddedMeanwhile(Estimator):
    """an estimator during whose scoring another run stores a cell of its own into the same estimates file"""

    def estimate(self, group, states):
        from sveb.experiment.table4_files import read_estimates, write_estimates
        path = BESIDE[0]
        write_estimates(path, read_estimates(path) + [{
            "domain": "science", "build_fp": "elsewhere", "state_id": "s0", "estimator": "judge-cal",
            "params_fp": "p", "protocol": "held-out", "value": 0.5, "provenance": "sveb eval judge-cal p",
            "training": None}])
        return np.full(len(states), float(np.mean(group.rewards)))


def test_cells_another_run_stores_meanwhile_survive_the_sampling_runs_next_save(tmp_path):
    """`--add NAMES` may score more estimators into estimates.parquet while a sampling run is scoring its domain:
    the sampling run saves over the file as it is then, not over the copy it read when it started."""
    import pyarrow.parquet as pq

    from sveb.engines.scripted import ScriptedEngine
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")
    out = tmp_path / "out"
    BESIDE[:] = [out / "estimates.parquet"]
    table4.main(["--domains", "number", "--source", f"number={number}", "--no-train",
                 "--estimators", "grpo,test_table4_on_cpu:AddedMeanwhile,mcs-2",
                 "--root", str(tmp_path / "root"), "--exports", str(tmp_path / "exports"), "--out", str(out),
                 "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
                 "--oversample", "2", "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9",
                 "--dtype", "float32"], engine=ScriptedEngine(), model_dir=weights)
    stored = {(r["domain"], r["estimator"]) for r in pq.read_table(out / "estimates.parquet").to_pylist()}
    assert ("science", "judge-cal") in stored  # the other run's cell
    assert {("number", e) for e in ("grpo", "mcs-2", "test_table4_on_cpu:AddedMeanwhile")} <= stored


def test_a_run_cut_off_while_the_train_build_samples_keeps_the_seeds_export_and_timing(tmp_path):
    """A seed's benchmark build is exported, and its sampling time recorded, before the domain's train build
    samples: a session that ends during the (long) train build loses neither."""
    from sveb.engines.scripted import ScriptedEngine
    from tests.helpers.engines import StopsAfter
    number = _files(tmp_path)
    weights = tmp_path / "w"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"w")

    def args(name, *extra):
        w = tmp_path / name
        return ["--domains", "number", "--source", f"number={number}",
                "--estimators", "grpo,test_table4_on_cpu:SeededTrainSeen", "--root", str(w / "root"),
                "--exports", str(w / "exports"), "--out", str(w / "out"),
                "--problems", "3", "--states", "2", "--rollouts", "8", "--mc", "10", "--mc-extra", "4",
                "--train-problems", "3", "--train-states", "1", "--train-mc", "2", "--oversample", "2",
                "--max-tokens", "200", "--min-novel-numbers", "0", "--max-acc", "0.9", "--dtype", "float32", *extra]
    alone = ScriptedEngine()
    table4.main(args("alone", "--no-train", "--estimators", "grpo"), engine=alone, model_dir=weights)
    with pytest.raises(KeyboardInterrupt):  # the session ends at the train build's first sampling call
        table4.main(args("cut"), engine=StopsAfter(len(alone.calls)), model_dir=weights)
    cut = tmp_path / "cut"
    assert (cut / "exports" / "number" / "manifest.json").exists()
    assert not (cut / "exports" / "number-train").exists()
    timing = json.loads((cut / "out" / "timing.json").read_text())["number"]
    assert timing["references"] > 0
