"""`make demo`: the embedded default model end to end, small enough for a 2-core CPU.

Its leaderboard and report go under the data root (ROOT/demo, git-ignored), never over the committed results/: a
demo on another kind of CPU samples under another compute dtype and gets other numbers. Each results folder says
in made-by.txt which machine and dtype made it.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from sveb.core.errors import UsageError
from sveb.experiment.presets import BASE, PRESETS, preset_configs  # noqa: F401  (BASE, PRESETS: read from here too)
from sveb.experiment.runner import Sampler, estimator_list, evaluate_all, needs_train, write_board
from sveb.sample.rules import validate


def _validate(domains: list[str], engine: str, preset: str, seeds: list[int] | None,
              eager: bool | None = None) -> None:
    """The demo's builds checked like `sveb build`'s flags (a mistyped domain fails before vLLM starts)."""
    if not domains:
        raise UsageError("--domains: none given")
    for domain in domains:
        tests, train = preset_configs(preset, domain, engine, seeds, eager)
        for cfg in [*tests, train]:
            validate(cfg)


def run_demo(root: Path, results: Path, domains: list[str], engine: str, console: Console, out: Console,
             estimators: list[str] | None = None, preset: str = "demo", seeds: list[int] | None = None,
             build_only: bool = False, eager: bool | None = None) -> None:
    """Every domain's benchmark build for each seed (independent draws the leaderboard pools), one `train` build
    per domain (seed 0) that every trained row of the result learns on, then every estimator on every build."""
    names = estimator_list(estimators)
    _validate(domains, engine, preset, seeds, eager)  # every flag, as `sveb build` checks them, before the engine
    sampler = Sampler(engine)
    benchmark = {}
    for domain in domains:
        # the benchmark builds, and one disjoint `train` build for the estimators that train on one
        tests, train = preset_configs(preset, domain, engine, seeds, eager)
        for cfg in tests + ([train] if needs_train(names) else []):
            console.rule(f"build: {domain} ({cfg.split})")
            built = sampler.build(cfg, root, console)
            if cfg.split == "test":
                benchmark[(domain, cfg.seed)] = built
    sampler.close()
    if build_only:
        for bdir in benchmark.values():
            out.print(str(bdir))
        return
    for (domain, _), bdir in benchmark.items():
        evaluate_all(bdir, names, console, label=domain)
    write_board(root, results, list(benchmark.values()), out)
    made = results / MADE_BY
    made.write_text(made_by(list(benchmark.values()), preset))
    out.print(f"wrote {made}")


MADE_BY = "made-by.txt"


def made_by(builds: list[Path], preset: str) -> str:
    """Which machine and compute dtype sampled the builds a results folder shows (from their manifests): the
    numbers of another dtype differ, so a results folder names its own."""
    from sveb import __version__, store
    lines = [f"`sveb demo --preset {preset}`, sveb {__version__}, {time.strftime('%Y-%m-%d')}"]
    for b in builds:
        m = store.load_manifest(b)
        lines.append(f"build {m.build_fp} ({m.domain}): compute dtype {m.dtype or '?'}, "
                     f"CPU flags {m.cpu_flags or '?'}")
    return "\n".join(lines) + "\n"
