"""`make demo`: the embedded default model end to end, small enough for a 2-core CPU."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from sveb.core.config import BuildConfig, SamplingConfig
from sveb.sample.paper import PRESET as PAPER

BASE = dict(model="smollm2-135m", source="builtin", oversample=3, mc=20, mc_extra=4, min_acc=0.1, max_acc=0.8,
            seed=0, sampling=SamplingConfig(max_tokens=256))
# Each preset: the benchmark build's size, and the disjoint `train` build the trained estimators learn on.
PRESETS = {
    # `make demo`: every estimator in about 10 minutes on 2 cores (24 states: a demonstration, not evidence)
    "demo": (dict(problems=8, rollouts=16, states_per_problem=3), dict(problems=8, states_per_problem=1, mc=2, mc_extra=0)),
    # `--quick`: a first look at a domain
    "quick": (dict(problems=6, rollouts=16, states_per_problem=2), dict(problems=6, states_per_problem=1, mc=2, mc_extra=0)),
    # `make powered`: 50 problems x 4 states (two pairs t1 < t2 of one rollout) per seed, run on seeds 0,1,2: 600
    # states for paired tests that survive Holm; the train build is big enough for the probe's MC labels
    "powered": (dict(problems=50, rollouts=16, states_per_problem=4, step_pairs=True),
                dict(problems=60, states_per_problem=2, mc=4, mc_extra=0)),
    # `--preset paper`: the Hista/Numca authors' protocol (sveb/sample/paper.py: G = 32, one space cut per problem in the
    # first rollout, full-budget continuations, 20 screens, equal tiers), 4 problems per tier; the demo's
    # 256-token budget (theirs is 4096: `sveb build --preset paper`)
    "paper": (dict(PAPER, problems=12, oversample=4), dict(problems=6, mc=2, mc_extra=0)),
}
PROTOCOLS = ["held-out", "in-group"]


def available_estimators() -> list[str]:
    """Every estimator of the registry (baseline, estimators, scale rows); plugins only when named."""
    from sveb.estimators import names
    return names()


def _validate(domains: list[str], engine: str, config: dict, train: dict, seeds: list[int] | None) -> None:
    """The demo's builds checked like `sveb build`'s flags (a mistyped domain fails before vLLM starts)."""
    from sveb.sample.rules import validate
    from sveb.core.errors import UsageError
    if not domains:
        raise UsageError("--domains: none given")
    for domain in domains:
        for cfg in [BuildConfig(domain=domain, engine=engine, **{**config, "seed": s}) for s in seeds or [0]] + \
                [BuildConfig(domain=domain, engine=engine, split="train", **{**config, **train})]:
            validate(cfg)


def run_demo(root: Path, results: Path, domains: list[str], engine: str, console: Console, out: Console,
             estimators: list[str] | None = None, preset: str = "demo", seeds: list[int] | None = None,
             build_only: bool = False) -> None:
    """Every domain's benchmark build for each seed (independent draws the leaderboard pools), one `train` build
    per domain (seed 0) that every trained row of the result learns on, then every estimator on every build."""
    from sveb.evaluate import evaluate
    from sveb.present.leaderboard import print_pivot, rows, write_csv
    from sveb import store
    from sveb.engines import make_engine
    from sveb.core.models import resolve
    from sveb.sample.pipeline import build, locate
    shared = None  # one engine for every domain: starting vLLM costs a minute or more
    from sveb.estimators import BASELINE, entry, make
    names = estimators or available_estimators()
    if BASELINE not in names:  # every estimator is compared against it
        names = [BASELINE, *names]
    for name in names:
        make(name)  # fail on a typo before an hour of sampling
    size, train = PRESETS[preset]
    config = {**BASE, **size}
    _validate(domains, engine, config, train, seeds)  # every flag, as `sveb build` checks them, before the engine
    benchmark = {}
    for domain in domains:
        # the benchmark builds, and one disjoint `train` build for the estimators that train on one
        cfgs = [BuildConfig(domain=domain, engine=engine, **{**config, "seed": s}) for s in seeds or [0]]
        if any(entry(n).train_split for n in names):
            cfgs.append(BuildConfig(domain=domain, engine=engine, split="train", **{**config, **train}))
        for cfg in cfgs:
            console.rule(f"build: {domain} ({cfg.split})")
            bdir = locate(cfg, root)
            done = (bdir / "manifest.json").exists() and store.read_manifest(bdir).get("status") == "complete"
            if shared is None and not done:
                from sveb.sample.pipeline import dtype_of
                shared = make_engine(engine, resolve(cfg.model), cfg.seed, dtype=dtype_of(cfg))
                from sveb.core import signals
                signals.reinstall()
            built = build(cfg, root, engine=shared, console=console)
            if cfg.split == "test":
                benchmark[(domain, cfg.seed)] = built
    if shared is not None and hasattr(shared, "close"):
        shared.close()  # free the engine's memory before hidden states and critics
    if build_only:
        for bdir in benchmark.values():
            out.print(str(bdir))
        return
    for (domain, _), bdir in benchmark.items():
        for name in names:
            for protocol in PROTOCOLS:
                console.print(f"eval {name} ({protocol}) on {domain}")
                evaluate(bdir, name, {}, protocol, console=console)
    fps = {b.name for b in benchmark.values()}
    board = rows(root, builds=fps)  # seeds of one config are pooled
    path = write_csv(board, results / "leaderboard.csv")
    print_pivot(board, out)
    out.print(f"wrote {path}")
    from sveb.present.report import write_report
    index = write_report(root, results / "report", builds=fps)
    out.print(f"report: {index}")
