"""Builds on a local Ray cluster (2 CPUs, one per module) with the scripted engine: the tables do not
depend on the number of workers, a worker killed mid-shard or a killed driver costs no shard twice."""

import os
import pickle
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from functools import partial

import pytest
import ray

from sveb import store
from sveb.engines.scripted import Fault, ScriptedEngine
from sveb.sample.distributed import RayOptions
from sveb.sample.pipeline import build

pytestmark = pytest.mark.ray
TABLES = ("candidates", "problems", "screens", "rollouts", "states", "references")


@pytest.fixture(scope="module")
def cluster():
    start_cluster()
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def start_cluster(tries: int = 3) -> None:
    """A local 2-CPU cluster. Ray gives its raylet 30 s to register (not configurable): on a machine
    starved by other work that can pass, so try again; workers get 10 min to register, and a slow raylet
    is not declared dead for 10 min either."""
    for i in range(tries):
        try:
            ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
                     _system_config={"worker_register_timeout_seconds": 600, "health_check_period_ms": 10000,
                                     "health_check_timeout_ms": 30000, "health_check_failure_threshold": 60})
            return
        except Exception as e:  # Ray raises a bare Exception for "timed out during startup"
            ray.shutdown()
            if i == tries - 1 or "timed out during startup" not in str(e):
                raise


@pytest.fixture
def cfg(small_cfg, monkeypatch):
    # small shards, so that two workers share each stage: 12 candidates in 3 rollout shards (4 x 8 screening
    # rollouts each), 20 states in 3 reference shards (8 + 8 + 4)
    import sveb.sample.pipeline
    monkeypatch.setattr(sveb.sample.pipeline, "ROLLOUT_BATCH", 32)
    monkeypatch.setattr(sveb.sample.pipeline, "SHARD_STATES", 8)
    # the dtype is in the scripted draws, so in how many candidates are screened: pinned for the shard counts
    return replace(small_cfg, states_per_problem=5, dtype="bfloat16")


def tables(bdir):
    return {t: store.read_table(bdir / t).to_pylist() for t in TABLES}


def calls(trace):
    """(pid, kind) of every generate call an engine made, in order."""
    return [tuple(line.split()[:2]) for line in open(trace).read().splitlines()]


def on_ray(workers, factory=ScriptedEngine):
    return RayOptions(workers=workers, engine_factory=factory)


def test_one_and_two_workers_give_the_local_tables(cluster, tmp_path, cfg):
    local = tables(build(cfg, tmp_path / "local", engine=ScriptedEngine()))
    trace1, trace2 = str(tmp_path / "t1"), str(tmp_path / "t2")
    one = build(cfg, tmp_path / "one", engine=ScriptedEngine(), ray=on_ray(1, partial(ScriptedEngine, trace=trace1)))
    two = build(cfg, tmp_path / "two", engine=ScriptedEngine(), ray=on_ray(2, partial(ScriptedEngine, trace=trace2)))
    assert tables(one) == local and tables(two) == local
    assert len(local["references"]) == 20 and len(local["problems"]) == 4
    assert len(list((one / "rollouts").glob("part-*"))) >= 2 and len(list((one / "references").glob("part-*"))) == 3
    assert len({pid for pid, _ in calls(trace1)}) == 1
    assert len({pid for pid, _ in calls(trace2)}) == 2  # both workers did shards
    # each reference shard sampled once; the 2-worker build may screen one rollout shard it then drops
    assert Counter(k for _, k in calls(trace2))["references"] == Counter(k for _, k in calls(trace1))["references"] == 3
    assert store.read_manifest(two)["status"] == "complete"


@pytest.mark.parametrize("stage", ["rollouts", "references"])
def test_worker_killed_mid_shard_still_completes_the_same_tables(cluster, tmp_path, cfg, stage):
    local = tables(build(cfg, tmp_path / "local", engine=ScriptedEngine()))
    marker = tmp_path / "killed"
    # the first call of the stage on whichever worker makes one: with at=1 the fault only fired when one
    # worker happened to get two of the stage's calls (the rollout stage may need only two in all)
    factory = partial(ScriptedEngine, fault=Fault(stage, at=0, marker=str(marker)))
    bdir = build(cfg, tmp_path / "ray", engine=ScriptedEngine(), ray=on_ray(2, factory))
    assert marker.exists()  # a worker process did die in the middle of a shard
    assert tables(bdir) == local
    assert not list(bdir.rglob(".tmp-*"))


DRIVER = """
import os, pickle, sys
import ray
from sveb.sample.distributed import RayOptions
from sveb.engines.scripted import ScriptedEngine
from sveb.sample import pipeline
from sveb.sample.pipeline import build
pipeline.ROLLOUT_BATCH, pipeline.SHARD_STATES = 32, 8  # the test's small shards
cfg, root, address, factory, pid_file = pickle.load(open(sys.argv[1], "rb"))
open(pid_file, "w").write(str(os.getpid()))
ray.init(address=address, logging_level="ERROR")
build(cfg, root, engine=ScriptedEngine(), ray=RayOptions(workers=1, engine_factory=factory))
"""


def test_killed_driver_rerun_does_only_the_missing_shards(cluster, tmp_path, cfg):
    local = tables(build(cfg, tmp_path / "local", engine=ScriptedEngine()))
    root, marker, pid_file = tmp_path / "ray", tmp_path / "killed", tmp_path / "driver.pid"
    # the worker kills the driver (and itself) in the middle of the second reference shard
    factory = partial(ScriptedEngine, fault=Fault("references", at=1, marker=str(marker), pid_file=str(pid_file)))
    args = tmp_path / "args.pkl"
    args.write_bytes(pickle.dumps((cfg, root, cluster, factory, str(pid_file))))
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(args)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == -9, proc.stderr[-2000:]
    bdir = store.list_builds(root)[0]
    assert store.read_manifest(bdir)["status"] == "running"
    # every finished shard but the kept-problems list (rewritten whenever the rollouts stage runs)
    before = {p: p.stat().st_mtime_ns for p in bdir.rglob("part-*.parquet") if p.parent.name != "problems"}
    assert {p.parent.name for p in before} == {"candidates", "screens", "rollouts", "states", "references"}
    assert len(list((bdir / "references").glob("part-*"))) == 1  # the first of 3 reference shards
    trace = str(tmp_path / "trace")
    again = build(cfg, root, engine=ScriptedEngine(), ray=on_ray(2, partial(ScriptedEngine, trace=trace)))
    assert again == bdir
    assert [k for _, k in calls(trace)] == ["references", "references"]  # the 2 missing shards, nothing else
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())  # finished shards were not rewritten
    assert tables(bdir) == local and store.read_manifest(bdir)["status"] == "complete"


def test_ray_errors_are_one_line(tmp_path, cfg, monkeypatch):
    """Without Ray installed, --ray fails before any work with the extra to install."""
    import builtins
    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray" or name.startswith("ray."):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    from sveb.sample.distributed import RayError
    with pytest.raises(RayError, match=r"pip install 'sveb\[ray\]'"):
        build(cfg, tmp_path, engine=ScriptedEngine(), ray=on_ray(1))
    assert not tmp_path.exists() or not list(tmp_path.rglob("*.parquet"))


def _scores(row):
    """The row less wall time (the only thing allowed to differ), NaN (e.g. no step pairs) made comparable."""
    return {k: "nan" if isinstance(v, float) and v != v else v for k, v in row.items() if k != "seconds"}


@pytest.mark.parametrize("name", ["grpo", "mcs-2", "hista"])
def test_eval_on_ray_gives_the_local_scores(cluster, scripted_build, tmp_path, name):
    """Per problem group on 2 workers: the same estimates and scores; hista's hidden states (the real
    default model run over the scripted build's token ids) are extracted on the workers."""
    import shutil

    import numpy as np

    from sveb.evaluate import evaluate
    _, bdir = scripted_build
    copy = shutil.copytree(bdir, tmp_path / "copy" / bdir.name)
    local = evaluate(bdir, name, {}, "held-out")
    on = evaluate(copy, name, {}, "held-out", ray=on_ray(2))

    def est(b):
        return store.read_table(b / "estimates").to_pylist()
    if name != "hista":
        assert _scores(on) == _scores(local) and est(copy) == est(bdir)
        return
    # hidden states: a bf16 forward pass on 1 thread (a 1-CPU actor) and on 2 (here) sum in different
    # orders, so they agree to rounding, not bit for bit; the scores then agree to ~1e-8 (measured 3e-9)
    a, b = _scores(on), _scores(local)
    nums = {k for k, v in b.items() if isinstance(v, float)}  # "nan" strings compare as equal below
    assert {k: a[k] for k in a.keys() - nums} == {k: b[k] for k in b.keys() - nums} and "mae" in nums
    assert {k: a[k] for k in nums} == pytest.approx({k: b[k] for k in nums}, rel=1e-6)
    assert [r["value"] for r in est(copy)] == pytest.approx([r["value"] for r in est(bdir)], rel=1e-5, abs=1e-7)
    mine, theirs = sorted((copy / "hidden").rglob("*.npz")), sorted((bdir / "hidden").rglob("*.npz"))
    # extracted on the workers: per problem the response states and (hista reads them) the prompt's
    assert [p.name for p in mine] == [p.name for p in theirs] and len(mine) == 8
    for a, b in zip(mine, theirs):
        with np.load(a) as za, np.load(b) as zb:
            assert sorted(za.files) == sorted(zb.files)
            for k in zb.files:
                x, y = za[k].astype(np.float32), zb[k].astype(np.float32)
                assert x.shape == y.shape and np.linalg.norm(x - y) <= 1e-2 * np.linalg.norm(y)


def test_cli_ray_flags_fail_in_one_line(tmp_path, monkeypatch):
    import builtins

    from typer.testing import CliRunner

    from sveb.cli import app

    def run(*a):
        return CliRunner().invoke(app, [*a, "--root", str(tmp_path)])
    for args, msg in [(["build", "--gpus-per-worker", "1"], "--gpus-per-worker: only with --ray"),
                      (["build", "--ray", "--workers", "0"], "--workers 0: must be at least 1"),
                      (["eval", "--workers", "2"], "--workers: only with --ray"),
                      (["build", "--tp", "0"], "--tp 0: must be at least 1")]:
        r = run(*args)
        assert r.exit_code == 1 and msg in r.output and len(r.output.strip().splitlines()) == 1, r.output
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name.split(".")[0] == "ray" else real(name, *a, **k))
    r = run("build", "--problems", "1", "--ray")  # `--ray` last, without a value: a local cluster
    assert r.exit_code == 1 and "--ray: Ray is not installed; pip install 'sveb[ray]'" in r.output, r.output
    assert not list(tmp_path.rglob("*.parquet"))


def test_local_runner_runs_jobs_in_submission_order():
    from types import SimpleNamespace

    from sveb.sample.jobs import LocalRunner
    done = []

    def job(engine, x):
        return done.append(x) or x * 10
    r = LocalRunner(lazy=SimpleNamespace(get=lambda: None))
    a, b = r.submit(job, 1), r.submit(job, 2)
    assert done == [] and r.result(b) == 20 and done == [1, 2]  # deferred, then in order
    c = r.submit(job, 3)
    assert r.result(a) == 10 and r.result(c) == 30 and len({a, b, c}) == 3


def test_a_job_error_on_a_worker_is_the_error_itself(cluster, tmp_path, cfg):
    """An engine that cannot start fails the build with its own one-line error, not a Ray traceback."""
    from sveb.engines import make_engine
    with pytest.raises(ValueError,
                       match=r"^--engine nope: unknown engine; known: vllm, hf, scripted \(or pass module:Class\)$"):
        build(cfg, tmp_path, engine=ScriptedEngine(), ray=on_ray(1, partial(make_engine, "nope", "x")))
