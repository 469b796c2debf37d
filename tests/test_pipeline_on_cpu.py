"""Build stages on the scripted engine: selection, seeds, resume after a crash, fingerprints."""

from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy.stats import binom

from sveb import store
from sveb.engines.scripted import ScriptedEngine, flip_probability
from sveb.sample.pipeline import build, stage_fps


def read(bdir, table):
    return store.read_table(bdir / table).to_pylist()


def test_build_tables_and_filter(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    m = store.read_manifest(bdir)
    assert m["status"] == "complete" and m["n_problems"] == 4
    problems = read(bdir, "problems")
    rollouts = read(bdir, "rollouts")
    screens = read(bdir, "screens")
    for p in problems:
        rw = [r["reward"] for r in rollouts if r["problem_id"] == p["problem_id"]]
        screened = [r["reward"] for r in screens if r["problem_id"] == p["problem_id"]]
        assert len(rw) == 8 and 0.1 <= np.mean(screened) <= 0.9  # the filter decides on the screen
    states = read(bdir, "states")
    assert len(states) == 8
    by_id = {(r["problem_id"], r["rollout_idx"]): r for r in rollouts}
    for s in states:
        r = by_id[(s["problem_id"], s["rollout_idx"])]
        assert 1 <= s["t"] <= len(r["response_token_ids"]) - 1
        assert s["prefix_text"] == r["response_text"][: s["t"]]
    refs = {r["state_id"]: r for r in read(bdir, "references")}
    assert set(refs) == {s["state_id"] for s in states}
    for r in refs.values():
        assert len(r["mc_rewards"]) == 10 and len(r["extra_rewards"]) == 4
        assert r["value"] == pytest.approx(np.mean(r["mc_rewards"]))


def test_reference_values_match_true_values(tmp_path, small_cfg):
    """The scripted policy's true V(s) is a binomial tail; MC references must be unbiased for it."""
    cfg = replace(small_cfg, mc=200, mc_extra=0, states_per_problem=6)
    bdir = build(cfg, tmp_path, engine=ScriptedEngine())
    problems = {p["problem_id"]: p for p in read(bdir, "problems")}
    errs = []
    for s, r in zip(read(bdir, "states"), read(bdir, "references")):
        body = s["prefix_text"][len("steps: "):].split(".")[0] if s["prefix_text"].startswith("steps: ") else ""
        flips = [int(c) for c in body if c in "01"]
        if "." in s["prefix_text"]:
            continue  # answer already decided
        need = max(0, 4 - sum(flips))
        p = flip_probability(problems[s["problem_id"]]["question"])
        true = binom.sf(need - 1, 8 - len(flips), p)
        errs.append(r["value"] - true)
    assert len(errs) >= 3
    assert abs(np.mean(errs)) < 0.05 and np.max(np.abs(errs)) < 0.15


def test_same_config_same_selection_and_no_regeneration(tmp_path, small_cfg):
    e1 = ScriptedEngine()
    b1 = build(small_cfg, tmp_path / "a", engine=e1)
    b2 = build(small_cfg, tmp_path / "b", engine=ScriptedEngine())
    assert read(b1, "states") == read(b2, "states")
    assert read(b1, "references") == read(b2, "references")
    e3 = ScriptedEngine()
    build(small_cfg, tmp_path / "a", engine=e3)
    assert e3.calls == []  # everything was already done


def test_resume_after_crash_does_only_missing_shards(tmp_path, small_cfg, monkeypatch):
    monkeypatch.setattr("sveb.sample.pipeline.SHARD_STATES", 8)  # several reference shards in a small build
    full = build(small_cfg, tmp_path / "full", engine=ScriptedEngine())

    class Crash(ScriptedEngine):
        def generate(self, requests, params, desc=""):
            if desc == "references" and len(self.calls) >= 3:
                raise KeyboardInterrupt
            return super().generate(requests, params, desc)

    cfg = replace(small_cfg, states_per_problem=5)
    full = build(cfg, tmp_path / "full", engine=ScriptedEngine())
    with pytest.raises(KeyboardInterrupt):
        build(cfg, tmp_path / "crash", engine=Crash())
    crashed = store.list_builds(tmp_path / "crash")[0]
    assert store.read_manifest(crashed)["status"] == "running"
    done_before = sorted(p.name for p in (crashed / "references").glob("part-*.parquet"))
    assert 0 < len(done_before) < len(list((full / "references").glob("part-*")))
    again = ScriptedEngine()
    bdir = build(cfg, tmp_path / "crash", engine=again)
    assert again.calls and all(c == 8 * 14 or c <= 8 * 14 for c in again.calls)
    assert len(again.calls) == len(list((full / "references").glob("part-*"))) - len(done_before)
    assert read(bdir, "states") == read(full, "states")
    assert read(bdir, "references") == read(full, "references")
    assert not list((bdir / "references").glob(".tmp-*"))


def test_fingerprints_change_with_results_not_speed(small_cfg):
    a = stage_fps(small_cfg)
    assert stage_fps(replace(small_cfg, batch_size=7, workers=1, eager=True)) == a
    # the engine draws the samples (and hf's padded batches change its numerics): a resume with another engine
    # or another hf batch size is another build, never a mix under one fingerprint
    vllm, hf = replace(small_cfg, engine="vllm"), replace(small_cfg, engine="hf")
    assert stage_fps(vllm)["rollouts"] != stage_fps(hf)["rollouts"]
    assert stage_fps(hf)["rollouts"] != stage_fps(replace(hf, batch_size=7))["rollouts"]
    assert stage_fps(vllm)["rollouts"] == stage_fps(replace(vllm, batch_size=7))["rollouts"]
    assert stage_fps(vllm)["problems"] == stage_fps(hf)["problems"]
    b = stage_fps(replace(small_cfg, mc=11))
    assert b["rollouts"] == a["rollouts"] and b["references"] != a["references"]
    c = stage_fps(replace(small_cfg, seed=4))
    assert c["problems"] != a["problems"]


def test_shard_metadata_carries_fingerprint(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    shard = sorted((bdir / "rollouts").glob("part-*.parquet"))[0]
    assert pq.read_schema(shard).metadata[b"sveb_fp"]
    rows = store.read_shard(shard).num_rows
    shard.write_bytes(b"garbage")
    with pytest.raises(store.StoreError, match="part-00000.parquet"):
        store.read_shard(shard)
    # a rerun rebuilds the corrupt shard instead of trusting it
    bdir2 = build(small_cfg, tmp_path, engine=ScriptedEngine())
    assert store.read_shard(shard).num_rows == rows > 0
    assert bdir2 == bdir


def test_a_rerun_of_a_complete_build_keeps_its_build_time(tmp_path, small_cfg):
    """The manifest's seconds (shown in exports' cards and timings) are the build's, not a no-op rerun's."""
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    m = store.read_manifest(bdir)
    # as if sampling had taken that long, long ago: a rerun that stamps the time again cannot pass unseen
    store.write_manifest(bdir, {**m, "seconds": 1234.5, "updated": "2000-01-01T00:00:00"}, stamp=False)
    before = (bdir / "manifest.json").read_bytes()
    again = ScriptedEngine()
    assert build(small_cfg, tmp_path, engine=again) == bdir and not again.calls
    assert store.read_manifest(bdir)["seconds"] == 1234.5
    assert (bdir / "manifest.json").read_bytes() == before  # the previous manifest, read typed, written back as it was


def test_reference_progress_lines_follow_the_work(tmp_path, small_cfg):
    """Each 'references: shard k/n done' line comes after that shard's continuations were sampled, not when the
    shard was queued (all shards are queued before the first one runs)."""
    import io

    from rich.console import Console

    events = []

    class Log(io.StringIO):
        def write(self, s):
            events.extend(("line", x) for x in s.splitlines() if x.startswith("references"))
            return len(s)

    class Recording(ScriptedEngine):
        def generate(self, reqs, sampling, desc=None, **kw):
            if desc == "references":
                events.append(("generate", len(reqs)))
            return super().generate(reqs, sampling, desc=desc, **kw)

    cfg = replace(small_cfg, states_per_problem=6)  # 24 states: two reference shards
    build(cfg, tmp_path, engine=Recording(), console=Console(file=Log(), width=200))
    gens = [i for i, e in enumerate(events) if e[0] == "generate"]
    done = [i for i, e in enumerate(events) if e[0] == "line" and " done " in e[1]]
    assert len(gens) == 2 and len(done) == 2
    assert gens[0] < done[0] < gens[1] < done[1]
    assert "shard 1/2 done" in events[done[0]][1] and "shard 2/2 done" in events[done[1]][1]
