"""What every experiment does (`sveb demo`, Table 4): the estimator list, builds sampled with one shared engine,
every estimator under both protocols, the leaderboard and report."""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from sveb import store
from sveb.core import signals
from sveb.core.config import BuildConfig
from sveb.core.models import resolve
from sveb.estimators import BASELINE, entry, make
from sveb.estimators import names as registered
from sveb.evaluate import evaluate
from sveb.evaluate.protocols import PROTOCOLS
from sveb.sample.pipeline import dtype_of, locate


def estimator_list(names: list[str] | None = None) -> list[str]:
    """`names` (default: every registered estimator) with the baseline first, every estimator is paired against it;
    each one is made once so that a typo fails before an hour of sampling."""
    names = [BASELINE] + [n for n in (names or registered()) if n != BASELINE]
    for name in names:
        make(name)
    return names


def needs_train(names: list[str]) -> bool:
    """Whether any of the estimators learns on a disjoint `--split train` build."""
    return any(entry(n).train_split for n in names)


class Sampler:
    """Builds made with one engine: starting vLLM costs a minute or more. The engine (`engine`, else one of kind
    `kind`) is started for the first build that has sampling left, and closed by `close`."""

    def __init__(self, kind: str, engine=None):
        self.kind, self.engine = kind, engine
        self._own = engine is None  # started here: closed (and started again when needed) here

    def ready(self, cfg: BuildConfig, root: Path) -> None:
        """Start the engine now if `cfg`'s build has sampling left (so that a timed build does not time it)."""
        bdir = locate(cfg, root)
        if self.engine is None and not ((bdir / "manifest.json").exists() and store.complete(bdir)):
            from sveb.engines import make_engine, uses_model  # per call: tests patch sveb.engines.make_engine
            model = resolve(cfg.model) if uses_model(self.kind) else ""  # a model-free engine (scripted) reads none
            self.engine = make_engine(self.kind, model, cfg.seed, eager=cfg.eager, dtype=dtype_of(cfg))
            signals.reinstall()

    def build(self, cfg: BuildConfig, root: Path, console: Console) -> Path:
        from sveb.sample.pipeline import build  # per call: tests patch sveb.sample.pipeline.build
        self.ready(cfg, root)
        return build(cfg, root, engine=self.engine, console=console)

    def close(self) -> None:
        """Free the engine's memory before hidden states and critics; a later build starts one again. An engine
        passed in is its caller's: left open."""
        if self._own and self.engine is not None:
            if hasattr(self.engine, "close"):
                self.engine.close()
            self.engine = None


def evaluate_all(bdir: Path, names: list[str], console: Console, label: str | None = None,
                 params: dict[str, str] | None = None) -> list[tuple[dict, float]]:
    """Every estimator on the build under both protocols (sveb.evaluate, cached), at `params` (default: its
    defaults): each score row with the wall seconds it took here."""
    done = []
    for name in names:
        for protocol in PROTOCOLS:
            if label:
                console.print(f"eval {name} ({protocol}) on {label}")
            t0 = time.perf_counter()
            row = evaluate(bdir, name, dict(params or {}), protocol, console=console)
            done.append((row, time.perf_counter() - t0))
    return done


def write_board(root: Path, results: Path, builds: list[Path], out: Console) -> None:
    """The leaderboard (seeds of one config pooled) and the report of the builds, into `results`."""
    from sveb.present.leaderboard import print_pivot, rows, write_csv  # matplotlib, scipy
    from sveb.present.report import write_report
    fps = {b.name for b in builds}
    board = rows(root, builds=fps)
    path = write_csv(board, results / "leaderboard.csv")
    print_pivot(board, out)
    out.print(f"wrote {path}")
    index = write_report(root, results / "report", builds=fps)
    out.print(f"report: {index}")
