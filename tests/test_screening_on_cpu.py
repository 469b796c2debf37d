"""The difficulty filter decides on screening rollouts that estimators never see (issue 17): a kept problem's
group is G fresh draws, so it is not selected on its own accuracy. The scripted engine's true values tell."""

from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from sveb import store
from sveb.core.errors import BuildError
from sveb.engines.scripted import ScriptedEngine, flip_probability
from sveb.sample.jobs import LocalRunner
from sveb.sample.pipeline import build


def many_sums(tmp_path):
    """6,156 'What is a + b + c?' problems in DAPO-Math's schema (the scripted engine answers them): about 3,080
    test problems, dealt into 8 seeds of about 377 (sveb.data_builders.seeds)."""
    import json
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b} + {c}?", "solution": str(a + b + c)})
                             for a in range(1, 10) for b in range(1, 10) for c in range(1, 77)))
    return src


def rows(bdir, table):
    out: dict[str, list[dict]] = {}
    for r in store.read_table(bdir / table).to_pylist():
        out.setdefault(r["problem_id"], []).append(r)
    return out


def test_the_filter_decides_on_screens_and_the_group_is_fresh(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    m = store.read_manifest(bdir)
    assert m["screening"]["separate_from_group"] and m["screening"]["rollouts_per_candidate"] == small_cfg.screen
    kept = [p["problem_id"] for p in store.read_table(bdir / "problems").to_pylist()]
    screens, groups = rows(bdir, "screens"), rows(bdir, "rollouts")
    assert set(groups) == set(kept) and len(kept) == small_cfg.problems
    for pid in kept:
        scr, grp = screens[pid], groups[pid]
        assert len(scr) == small_cfg.screen and len(grp) == small_cfg.rollouts
        assert small_cfg.min_acc <= np.mean([r["reward"] for r in scr]) <= small_cfg.max_acc
        assert not {r["seed"] for r in scr} & {r["seed"] for r in grp}  # disjoint draws
        assert sorted(r["rollout_idx"] for r in grp) == list(range(small_cfg.rollouts))
    dropped = set(screens) - set(kept)
    assert all(pid not in groups for pid in dropped)  # a dropped candidate costs only its screen


def test_a_kept_group_is_the_draw_an_unfiltered_build_makes(tmp_path, small_cfg):
    # the group's seeds come from the rollout stage, not from the filter or the shard layout
    filtered = build(small_cfg, tmp_path / "a", engine=ScriptedEngine())
    open_ = build(replace(small_cfg, min_acc=0.0, max_acc=1.0, problems=12, oversample=1), tmp_path / "b",
                  engine=ScriptedEngine())
    assert not (open_ / "screens").exists()
    a, b = rows(filtered, "rollouts"), rows(open_, "rollouts")
    shared = set(a) & set(b)
    assert shared
    for pid in shared:
        assert ([(r["seed"], r["response_token_ids"]) for r in a[pid]]
                == [(r["seed"], r["response_token_ids"]) for r in b[pid]])


def test_groups_are_unbiased_for_the_true_value_where_screens_are_not(tmp_path, small_cfg):
    """Keep only problems whose 8 screening rollouts were mostly wrong: the screens' accuracy then underestimates
    the problems' true values (selection), while the G fresh rollouts are unbiased for them."""
    cfg = replace(small_cfg, source=str(many_sums(tmp_path)), problems=370, oversample=1, rollouts=16, screen=8,
                  min_acc=0.0,
                  max_acc=0.375, states_per_problem=1, mc=1, mc_extra=0)
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine())
    problems = {p["problem_id"]: p for p in store.read_table(bdir / "problems").to_pylist()}
    screens, groups = rows(bdir, "screens"), rows(bdir, "rollouts")
    assert len(problems) >= 60
    true = {pid: binom.sf(3, 8, flip_probability(p["question"])) for pid, p in problems.items()}  # >= 4 of 8 flips
    grp = np.array([np.mean([r["reward"] for r in groups[pid]]) - v for pid, v in true.items()])
    scr = np.array([np.mean([r["reward"] for r in screens[pid]]) - v for pid, v in true.items()])
    se = grp.std(ddof=1) / np.sqrt(len(grp))
    assert scr.mean() < 0                 # the filter's own evidence is selected low (about -3 SE here)
    assert abs(grp.mean()) < 3.5 * se     # the group estimators see is not (fails by chance 1 run in 2,000)


def test_an_active_filter_needs_screening_rollouts(tmp_path, small_cfg):
    with pytest.raises(BuildError, match="--screen 0"):
        build(replace(small_cfg, screen=0), tmp_path, engine=ScriptedEngine())


def test_the_screening_bias_benchmark_sees_the_selection(tmp_path, small_cfg):
    """benchmarks/screening_bias.py on a scripted build: the replica of the old group (screening rollouts first)
    is pulled toward the filter's band, the fresh group is not; both are compared with the same references."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "screening_bias.py"
    spec = importlib.util.spec_from_file_location("screening_bias", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = replace(small_cfg, source=str(many_sums(tmp_path)), problems=60, oversample=6, rollouts=16, screen=8,
                  min_acc=0.0, max_acc=0.375, states_per_problem=2, mc=40, mc_extra=0)
    d = mod.grpo_before_after(*mod.load(build(cfg, tmp_path / "root", engine=ScriptedEngine())))
    assert len(d["ref"]) >= 100
    # screening rewards are selected low: the old group's mean sits below the fresh group's
    assert (d["before"] - d["ref"]).mean() < (d["after"] - d["ref"]).mean()


class LateRunner(LocalRunner):
    """Two workers that finish late: a job runs only when its own result is asked for, and any job nobody asked
    for runs at close, as a Ray worker still screening ahead finishes after the driver has moved on."""
    slots = 2

    def result(self, handle):
        _, fn, args = self._todo.pop(next(i for i, job in enumerate(self._todo) if job[0] == handle))
        return fn(self.lazy.get, *args)

    def close(self):
        while self._todo:
            self.result(self._todo[0][0])


def test_a_screen_run_ahead_and_not_needed_leaves_no_shard(tmp_path, small_cfg, monkeypatch):
    import sveb.sample.jobs
    import sveb.sample.pipeline
    # 4 candidates a shard: 3 shards, the 4 kept by the 2nd
    monkeypatch.setattr(sveb.sample.pipeline, "ROLLOUT_BATCH", 32)
    local = build(small_cfg, tmp_path / "local", engine=ScriptedEngine())
    monkeypatch.setattr(sveb.sample.jobs, "LocalRunner", LateRunner)
    late = build(small_cfg, tmp_path / "late", engine=ScriptedEngine())
    assert len(list((late / "screens").glob("part-*"))) < 3  # the third shard's screen ran ahead, then was dropped
    key = lambda r: sorted(map(str, r.values()))  # noqa: E731
    for t in ("problems", "screens", "rollouts", "states", "references"):
        assert sorted(map(key, store.read_table(late / t).to_pylist())) == \
            sorted(map(key, store.read_table(local / t).to_pylist())), t


def test_a_small_build_screens_in_shards_of_twice_its_problems_and_keeps_the_same_problems(tmp_path, small_cfg,
                                                                                          monkeypatch):
    # `make demo`'s builds: 3 x problems candidates, about 2/3 of which pass. Shards of 2 x problems stop screening
    # once the first shards hold enough; the kept set is the first `problems` passing candidates either way.
    import sveb.sample.pipeline as pipeline
    # the dtype is in the rollouts fingerprint, so in the scripted draws: pinned, as the test counts draws
    cfg = replace(small_cfg, min_acc=0.0, max_acc=0.999, screen=4, dtype="float32")  # almost every candidate passes
    small = build(cfg, tmp_path / "small", engine=ScriptedEngine())
    screened = set(rows(small, "screens"))
    assert len(screened) == pipeline.SMALL_SHARD * cfg.problems < cfg.problems * cfg.oversample
    assert len(list((small / "screens").glob("part-*"))) == 1
    monkeypatch.setattr(pipeline, "SMALL_SHARD", 100)  # one shard of every candidate, as before
    whole = build(cfg, tmp_path / "whole", engine=ScriptedEngine())
    assert len(set(rows(whole, "screens"))) == cfg.problems * cfg.oversample
    kept = lambda b: [p["problem_id"] for p in store.read_table(b / "problems").to_pylist()]  # noqa: E731
    assert kept(small) == kept(whole) and len(kept(small)) == cfg.problems
    same = lambda b: sorted((r["problem_id"], r["seed"], r["response_token_ids"])  # noqa: E731
                            for r in store.read_table(b / "rollouts").to_pylist())
    assert same(small) == same(whole)  # the groups are the same draws
