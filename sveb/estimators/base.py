"""What every estimator sees, and the contract the evaluator holds it to.

An estimator never sees reference rewards. The protocol is applied by the caller:
under `held-out` the group passed in lacks the state's own rollout. Blind by construction: what it is handed
(`view_for`) holds no reference data of the evaluated build, neither the reference draws and values nor the extra
independent draws, unless its class declares `reads_references` (a reference-scale estimator, role "scale", the
MCS@k kind), which then gets the extra draws (never the reference ones) as `State.extra_rewards`. A train build
(`ctx.train`) is another, disjoint build: its references are an estimator's to learn from.

An estimator is a @dataclass subclass of `Estimator` whose fields are its parameters
(`-P key=value` on the CLI) and whose class attributes are its capabilities (declared once, here or on the
subclass; the registry reads them from there). The evaluator builds a `Context` (the train build, the
hidden-state service, the console) and calls, in order: `cache_key(bdir, manifest, ctx)` (part of the stored
scores' fingerprint), `prepare(build, ctx)` once per build, `estimate(group, states)` once per problem
(held-out: once per state), then `diagnostics()`. Only `estimate` must be written. No estimator reads the
store itself: what it needs is in the context.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

# The data types an estimator receives live with the read side (sveb.core.records); plugins import them from here.
from sveb.core.manifest import Manifest
from sveb.core.records import BuildData, HiddenFn, PrefixHidden, ProblemGroup, Rollout, State, group_for, hidden_source

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["BuildData", "Context", "Estimator", "HiddenFn", "PrefixHidden", "ProblemGroup", "Rollout", "State",
           "TrainBuild", "as_context", "group_for", "group_mean", "hidden_source", "need_context", "reads_references",
           "view_for"]


@dataclass
class TrainBuild:
    """The disjoint `--split train` build an estimator trains on, resolved and checked by the evaluator."""
    bdir: Path
    manifest: Manifest                      # typed (a plain dict given is typed on the way in)
    problems: list[str]                     # its problem ids, none of them the benchmark's (checked)
    key: str                                # its content hash: the identity a trained model is cached under
    load: Callable[[bool], BuildData] = field(repr=False, default=None)  # load(references) -> its tables

    def __post_init__(self):
        self.manifest = Manifest.of(self.manifest)

    @property
    def build_fp(self) -> str:
        return self.manifest.build_fp

    def data(self, references: bool = False) -> BuildData:
        """Its tables in memory (references only where asked: a Monte-Carlo-labelled fit)."""
        return self.load(references)


@dataclass
class Context:
    """What the evaluator hands an estimator beside the build: `train` (the train build, when the class declares
    `train_split` or asks for one through `train_spec`; else None), `hidden` (the hidden-state service of
    sveb.evaluate.context: `provider`, `states`, `shared`; lazy, nothing runs until asked), `model` (the build's
    model name), `console` (where to print; None = quiet), `write(path, bytes)` (the store's atomic write, for a
    cache kept beside the train build)."""
    model: str = ""
    train: TrainBuild | None = None
    hidden: Any = None
    console: Console | None = None
    write: Callable[[Path, bytes], None] | None = field(repr=False, default=None)  # the store's atomic write

    def print(self, *args, **kw) -> None:
        """Print on the console; nothing without one."""
        if self.console is not None:
            self.console.print(*args, **kw)


class Estimator:
    """Base of every estimator (subclass it as a @dataclass; its fields are the parameters).

    Capabilities (class attributes, not parameters), declared once: `description` (shown by `sveb ls
    estimators`), `role` (estimator | baseline | scale), `grid` (the default `sveb ablate` grid),
    `needs_hidden` (the group carries hidden states of the layer `self.layer`), `needs_training` (it trains a
    model in prepare(), once per build), `train_split` (it trains on a disjoint `--split train` build: the
    evaluator finds it, checks it and hands it in as `ctx.train`), `trains_on_benchmark` (its dependence on a
    state's own outcome lives in its weights, so the own-outcome share is not measurable in-group),
    `constructed` (its V(s) is SVEB's construction from a paper that defines none), `reads_references` (it
    reads the evaluated build's extra independent draws: a reference-scale estimator, role "scale" only),
    `reads_tokens` (it reads the policy's token ids: log-probs, hidden states, training on them; None: whether it
    needs hidden states or training; a build that holds text only, an imported hista-json one, refuses it),
    `loads_model` (it runs a language model itself, the policy or another: its values follow the compute dtype, so
    the dtype is in its estimates' key; None: whether it needs hidden states or training).
    """

    name: str = ""                          # the registry name, set by sveb.estimators.make
    description: ClassVar[str] = ""
    role: ClassVar[str] = "estimator"
    grid: ClassVar[dict] = {}
    needs_hidden: ClassVar[bool] = False
    needs_training: ClassVar[bool] = False
    train_split: ClassVar[bool] = False
    trains_on_benchmark: ClassVar[bool] = False
    constructed: ClassVar[bool] = False
    reads_references: ClassVar[bool] = False
    reads_tokens: ClassVar[bool | None] = None
    loads_model: ClassVar[bool | None] = None
    layer: int = -1                         # hidden layer read when needs_hidden (a field where tunable)

    def train_spec(self) -> tuple[str, bool] | None:
        """Which train build to hand in: (spec, required), spec a build dir or fingerprint prefix ("" = the
        newest of the model and domain under the root); None = none. Default: `train_split` classes take their
        `train_build` parameter, and must have one."""
        return (str(getattr(self, "train_build", "") or ""), True) if self.train_split else None

    def cache_key(self, bdir: Path, manifest: dict, ctx: Context | None = None) -> str:
        """What besides the build and the parameters decides the values (e.g. a training build's content)."""
        return ""

    def prepare(self, build: BuildData, ctx: Context | None = None) -> None:
        """Called once per build before any estimate (validate, train or load a model from `ctx.train`)."""

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        """One value in [0, 1] per state, from the group's rollouts (their rewards) and the states."""
        raise NotImplementedError(f"{type(self).__name__}.estimate")

    def diagnostics(self) -> dict[str, object]:
        """Per-build numbers worth printing beside the scores (after every estimate of a run)."""
        return {}


CAPABILITIES = ("description", "role", "grid", "needs_hidden", "needs_training", "train_split", "constructed",
                "reads_references", "reads_tokens", "loads_model")
FLAGS = ("needs_hidden", "needs_training", "train_split", "constructed", "reads_references", "reads_tokens",
         "loads_model")


def capabilities_of(cls: type) -> dict:
    """A class's declared capabilities as the registry carries them (the description defaults to the docstring's
    first line; grid values as strings)."""
    caps = {f: getattr(cls, f, None) for f in CAPABILITIES}
    doc = (cls.__doc__ or "").strip().splitlines()
    caps["description"] = caps["description"] or (doc[0] if doc else "")
    caps["role"] = caps["role"] or "estimator"
    caps["grid"] = {k: [str(v) for v in vs] for k, vs in dict(caps["grid"] or {}).items()}
    if caps["reads_tokens"] is None or caps["needs_hidden"]:  # hidden states are read from token ids
        caps["reads_tokens"] = bool(caps["reads_tokens"] or caps["needs_hidden"] or caps["needs_training"])
    caps["loads_model"] = bool(caps["loads_model"] or caps["needs_hidden"] or caps["needs_training"])
    for f in FLAGS:
        caps[f] = bool(caps[f])
    return caps


def runs_model(est) -> bool:
    """Whether an estimator (or its class) runs a language model: its values then follow the compute dtype."""
    cls = type(est) if not isinstance(est, type) else est
    return bool(cls.needs_hidden or cls.needs_training or getattr(cls, "loads_model", False))


def reads_references(est) -> bool:
    """Whether an estimator (or its class) declares itself reference-scale: it alone is handed the evaluated
    build's extra draws. Declared on the class, not settable per object (a parameter cannot open the references)."""
    return bool(getattr(type(est) if not isinstance(est, type) else est, "reads_references", False))


def view_for(est, data: BuildData) -> BuildData:
    """What an estimator's prepare() and estimate() are handed of the evaluated build: no reference values or draws
    (`data.public()`), and the extra independent draws only for a declared reference-scale estimator."""
    return data.public(extra_draws=reads_references(est))


def takes_context(method) -> bool:
    """Whether a hook is written against the context (`prepare(build, ctx)`, `cache_key(bdir, manifest, ctx)`)
    rather than the older shape (`prepare(build, console)`, `cache_key(bdir, manifest)`): an annotation naming
    Context, or a parameter called ctx/context."""
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return True
    names = {p.name for p in params}
    if names & {"ctx", "context"}:
        return True
    return any("Context" in str(p.annotation) for p in params)


def call_prepare(est: Estimator, build: BuildData, ctx: Context) -> None:
    """prepare() with the context, or with its console for a plugin of the older `prepare(build, console)` shape."""
    est.prepare(build, ctx if takes_context(est.prepare) else ctx.console)


def call_cache_key(est: Estimator, bdir: Path, manifest: dict, ctx: Context) -> str:
    """cache_key() with the context, or without it for a plugin of the older `cache_key(bdir, manifest)` shape."""
    if takes_context(est.cache_key):
        return est.cache_key(bdir, manifest, ctx)
    return est.cache_key(bdir, manifest)


def as_context(ctx) -> Context:
    """ctx as a Context: None is an empty one (no train build, no hidden-state service), a Console (a caller of the
    older `prepare(build, console)`) one that prints there."""
    return ctx if isinstance(ctx, Context) else Context(console=ctx)


def need_context(est: Estimator, ctx) -> Context:
    """The context, or a clear error for a caller that passed none (outside the evaluator, build one with
    sveb.evaluate.context.prepare(est, data))."""
    if not isinstance(ctx, Context):
        raise TypeError(f"{est.name or type(est).__name__}: prepare() needs the evaluator's Context, got "
                        f"{type(ctx).__name__} (outside the evaluator: sveb.evaluate.context.prepare(est, data))")
    return ctx


def group_mean(group: ProblemGroup) -> float:
    """Mean reward of the group; 0.5 for an empty group (no information)."""
    r = group.rewards
    return float(r.mean()) if len(r) else 0.5
