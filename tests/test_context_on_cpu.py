"""Issue 33, item 2: estimators are handed their data. A plugin declares training on the class and gets the
disjoint train build in its context (found, checked and fingerprinted by the evaluator); a plugin written
against the older `prepare(build, console)` / `cache_key(bdir, manifest)` shape still runs. Scripted builds."""

from dataclasses import dataclass, replace

import numpy as np
import pytest
from rich.console import Console
from typer.testing import CliRunner

from sveb import store
from sveb.board.bundle import read_bundle
from sveb.board.submit import submit
from sveb.cli import app
from sveb.core import schema
from sveb.core.cost import rollout_tokens
from sveb.core.errors import EvalError
from sveb.engines.scripted import ScriptedEngine
from sveb.estimators import entry, make
from sveb.estimators.base import Context, Estimator
from sveb.evaluate import evaluate
from sveb.sample.pipeline import build
from sveb.store.builds import load_rollouts
from sveb.store.train_builds import train_build_of

SEEN: dict = {}


@dataclass
class TrainMean(Estimator):
    """a plugin that trains: every state valued at the train build's mean reward"""
    needs_training = True
    train_split = True
    train_build: str = ""

    def cache_key(self, bdir, manifest, ctx: Context | None = None) -> str:
        return ctx.train.key

    def prepare(self, build, ctx: Context | None = None) -> None:
        SEEN["ctx"] = ctx
        rows = ctx.train.data().rollouts
        self._mean = float(np.mean([r["reward"] for rs in rows.values() for r in rs]))

    def estimate(self, group, states):
        return np.full(len(states), self._mean)


@dataclass
class OldShape(Estimator):
    """a plugin of the older shape: prepare(build, console), cache_key(bdir, manifest)"""
    level: float = 0.25

    def cache_key(self, bdir, manifest) -> str:
        SEEN["old_key"] = manifest["build_fp"]
        return "old"

    def prepare(self, build, console=None) -> None:
        SEEN["console"] = console

    def estimate(self, group, states):
        return np.full(len(states), self.level)


def values(bdir, name: str) -> dict:
    rows = store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
    return {r["state_id"]: r["value"] for r in rows if r["estimator"] == name}


@pytest.fixture
def builds(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    return tmp_path, bdir, build(replace(small_cfg, split="train"), tmp_path, engine=ScriptedEngine())


def test_a_plugin_declares_training_and_is_handed_the_train_build(builds):
    _, bdir, tdir = builds
    name = "test_context_on_cpu:TrainMean"
    e = entry(name)
    assert (e.needs_training, e.train_split, e.needs_hidden) == (True, True, False)
    assert e.description.startswith("a plugin that trains")
    evaluate(bdir, name, {}, protocol="held-out", console=Console(quiet=True))
    ctx = SEEN["ctx"]
    assert isinstance(ctx, Context) and ctx.train.bdir == tdir and ctx.model == "scripted"
    bench = {p["problem_id"] for p in store.read_table(bdir / "problems").to_pylist()}
    assert ctx.train.problems and not set(ctx.train.problems) & bench  # disjoint, checked by the evaluator
    assert ctx.train.key == store.content_hash(tdir) and ctx.train.build_fp == store.read_manifest(tdir)["build_fp"]
    rewards = [r["reward"] for rs in ctx.train.data().rollouts.values() for r in rs]
    v = values(bdir, name)
    assert len(v) == len(store.read_table(bdir / "states").to_pylist())
    assert all(x == pytest.approx(np.mean(rewards)) for x in v.values())
    # through the CLI, by import path: the same stored values
    r = CliRunner().invoke(app, ["eval", "-e", name, "--build", str(bdir), "--force"])
    assert r.exit_code == 0, r.output
    assert values(bdir, name) == v
    # its bundle (sveb submit: the build's handle passed down) counts the train build's tokens (found from it)
    meta, _ = read_bundle(submit(store.Build(bdir), name, {}, ["held-out"], builds[0] / "bundle"))
    assert meta["cost"]["held-out"]["train_tokens"] == rollout_tokens(load_rollouts(tdir)) > 0


def test_a_training_plugin_without_a_train_build_or_with_an_overlapping_one(tmp_path, small_cfg):
    bdir = build(small_cfg, tmp_path, engine=ScriptedEngine())
    name = "test_context_on_cpu:TrainMean"
    with pytest.raises(EvalError, match=r"sveb build --split train"):
        evaluate(bdir, name, {})
    # the message names the estimator that needs it (not a builtin's name), and a caller naming none reads neutral
    with pytest.raises(EvalError, match=rf"^{name} needs a training build of disjoint problems"):
        evaluate(bdir, name, {})
    with pytest.raises(EvalError, match=r"^the estimator needs a training build"):
        train_build_of(store.Build(bdir))
    with pytest.raises(EvalError, match=r"^probe: train_build=zzz matches 0 builds"):
        train_build_of(store.Build(bdir), "zzz", "probe")
    with pytest.raises(EvalError, match="shares .* problems"):  # the benchmark build itself: refused
        evaluate(bdir, name, {"train_build": str(bdir)})


def test_a_plugin_of_the_older_shape_gets_the_console(scripted_build):
    _, bdir = scripted_build
    console = Console(quiet=True)
    row = evaluate(bdir, "test_context_on_cpu:OldShape", {}, console=console)
    assert SEEN["console"] is console and SEEN["old_key"] == store.read_manifest(bdir)["build_fp"]
    assert set(values(bdir, "test_context_on_cpu:OldShape").values()) == {0.25} and np.isfinite(row["mae"])
    est = make("test_context_on_cpu:OldShape")
    assert not entry("test_context_on_cpu:OldShape").needs_training and est.train_spec() is None
