"""A data root's evaluated builds as bundles on a board: the committed results take the contributor's path."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console

from sveb import store
from sveb.board import add, register
from sveb.board.check import params_args
from sveb.board.submit import submit
from sveb.core.errors import SvebError


def add_root(root: Path, board: Path, console: Console | None = None) -> list[str]:
    """Every (estimator, setting) scored on every complete build under root, bundled (its stored estimates are
    reused: `sveb submit` finds them) and added to the board. Estimators not installed here are skipped."""
    from sveb.score.pooling import read_scores  # scipy
    console = console or Console(stderr=True)
    lines = []
    for build in map(store.Build, store.list_builds(root)):  # one handle each: its manifest parsed once
        if not build.manifest.complete or not (build / "scores").exists():
            continue
        register(board, [build])
        found: dict[tuple[str, str], list[str]] = {}
        for r in read_scores(build):
            found.setdefault((r["estimator"], r["params"]), []).append(r["protocol"])
        for (name, pj), protocols in sorted(found.items()):
            with tempfile.TemporaryDirectory(prefix=".sveb-submit-") as tmp:
                try:
                    path = submit(build, name, params_args(name, pj), sorted(set(protocols)), Path(tmp) / "bundle",
                                  console=console)
                except SvebError as e:  # e.g. a plugin not installed here: the rest still goes on the board
                    lines.append(f"skipped {name} on {build.name}: {e}")
                    continue
                key, status = add(board, path)
            lines.append(f"{status}: {name} on {build.name} (bundle {key})")
    return lines
