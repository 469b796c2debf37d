"""What the evaluator hands an estimator (sveb.estimators.base.Context): the train build it declared, found and
checked here (disjoint from the benchmark's problems), and the hidden-state service. Estimators never read the
store themselves; this is the one place that does it for them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

from sveb.core.errors import EvalError
from sveb.core.records import BuildData
from sveb.estimators.base import Context, Estimator, TrainBuild, call_prepare, view_for
from sveb.lm.checkpoints import build_key
from sveb.lm.hidden import SharedFeatures, hidden_provider, is_policy
from sveb.store import Build, Manifest, atomic_write_bytes
from sveb.store.builds import load_build
from sveb.store.train_builds import disjoint_problems, train_build_of


class HiddenService:
    """Hidden states of the build's model, for any build an estimator is handed: `provider(est, data)` (every
    group's states extracted or found cached, as the evaluator gives a `needs_hidden` estimator), `states(bdir)`
    (the extractor of one build), `shared(layer)` (a critic's frozen features over the builds' shared passes)."""

    def __init__(self, model: str, console=None):
        self.model, self.console = model, console

    def provider(self, est, data: BuildData, options: dict | None = None):
        return hidden_provider(est, data, self.console, options)

    def states(self, bdir: Path, layer: int = -1, **options):
        from sveb.lm.hidden import HiddenStates  # per call: tests patch sveb.lm.hidden.HiddenStates
        return HiddenStates(bdir, self.model, layer=layer, **options)

    def shared(self, layer: int):
        return SharedFeatures(self.model, layer)

    def is_policy(self, path: str) -> bool:
        """Whether the model at `path` is the build's policy (whose shared pass a critic can reuse)."""
        return is_policy(path, self.model)


def _memo_load(tb: Build):
    """load_build of the train build, each form (with or without references) read once."""
    return functools.cache(lambda references=False: load_build(tb, references=references))


def train_build(est: Estimator, bdir: Build | Path, manifest: dict | None = None, console=None) -> TrainBuild | None:
    """The train build the estimator asks for (`train_spec`), found, checked disjoint from the benchmark's
    problems; None when it asks for none, or for an optional one that is not there."""
    spec = est.train_spec()
    if spec is None:
        return None
    build = _handle(bdir, manifest)
    what, required = spec
    try:
        tb = train_build_of(build, what, est.name, console)
    except EvalError:
        if required:
            raise
        return None
    bench = set(build.table("problems").column("problem_id").to_pylist())
    pids = disjoint_problems(tb, SimpleNamespace(bdir=build.path, problems=bench), est.name)
    return TrainBuild(tb.path, tb.manifest, pids, build_key(tb.path), _memo_load(tb))


def _handle(bdir: Build | Path, manifest: dict | None) -> Build:
    """The build as a handle; an older caller's path and manifest become one."""
    return Build.of(bdir) if manifest is None else Build(Path(bdir), Manifest.of(manifest))


def context_for(est: Estimator, bdir: Build | Path, manifest: dict | None = None, console=None) -> Context:
    """The context of one estimator on one build (the train build resolved now: it is part of the cache key)."""
    build = _handle(bdir, manifest)
    model = build.manifest.model
    return Context(model=model, train=train_build(est, build, console=console),
                   hidden=HiddenService(model, console), console=console, write=atomic_write_bytes)


def prepare(est: Estimator, data: BuildData, console=None) -> Context:
    """Outside the evaluator (tests, benchmarks): the estimator's context built and prepare() called with it (on
    what the evaluator would hand it: view_for)."""
    ctx = context_for(est, data.bdir, data.manifest, console)
    call_prepare(est, view_for(est, data), ctx)
    return ctx
