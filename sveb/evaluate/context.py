"""What the evaluator hands an estimator (sveb.estimators.base.Context): the train build it declared, found and
checked here (disjoint from the benchmark's problems), and the hidden-state service. Estimators never read the
store themselves; this is the one place that does it for them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import SimpleNamespace

from sveb import store
from sveb.core.errors import EvalError
from sveb.core.records import BuildData
from sveb.estimators.base import Context, Estimator, TrainBuild, call_prepare, view_for
from sveb.lm.checkpoints import build_key
from sveb.lm.hidden import SharedFeatures, hidden_provider, is_policy
from sveb.store.builds import load_build
from sveb.store.train_builds import disjoint_problems, find_train_build


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


def _memo_load(tb: Path):
    """load_build of the train build, each form (with or without references) read once."""
    return functools.cache(lambda references=False: load_build(tb, references=references))


def train_build(est: Estimator, bdir: Path, manifest: dict, console=None) -> TrainBuild | None:
    """The train build the estimator asks for (`train_spec`), found, checked disjoint from the benchmark's
    problems; None when it asks for none, or for an optional one that is not there."""
    spec = est.train_spec()
    if spec is None:
        return None
    what, required = spec
    try:
        tb = find_train_build(bdir, manifest, what, est.name, console)
    except EvalError:
        if required:
            raise
        return None
    bench = set(store.read_table(bdir / "problems").column("problem_id").to_pylist())
    pids = disjoint_problems(tb, SimpleNamespace(bdir=bdir, problems=bench), est.name)
    return TrainBuild(tb, store.read_manifest(tb), pids, build_key(tb), _memo_load(tb))


def context_for(est: Estimator, bdir: Path, manifest: dict | None = None, console=None) -> Context:
    """The context of one estimator on one build (the train build resolved now: it is part of the cache key)."""
    manifest = manifest if manifest is not None else store.read_manifest(bdir)
    return Context(model=manifest["model"], train=train_build(est, Path(bdir), manifest, console),
                   hidden=HiddenService(manifest["model"], console), console=console, write=store.atomic_write_bytes)


def prepare(est: Estimator, data: BuildData, console=None) -> Context:
    """Outside the evaluator (tests, benchmarks): the estimator's context built and prepare() called with it (on
    what the evaluator would hand it: view_for)."""
    ctx = context_for(est, data.bdir, data.manifest, console)
    call_prepare(est, view_for(est, data), ctx)
    return ctx
