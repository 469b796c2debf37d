"""`sveb export` and `sveb import`: a build as a frozen, hashed dataset folder, and back."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from sveb.cli_common import DOMAIN, MODEL, ROOT, app, console, out


@app.command("export")
def export_(
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the dataset (Parquet tables, manifest, card)."),
    build_id: Optional[str] = typer.Option(None, "--build", help="Build fingerprint (prefix) or folder; default: "
                                           "the newest complete test-split build of --model and --domain."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    model_dir: Optional[Path] = typer.Option(None, help="The weights the build was sampled with, for the card's "
                                             "weights hash (default: --model's, resolved)."),
):
    """Write a build as a frozen dataset anyone can score an estimator on without sampling."""
    from sveb.builds import find_build
    from sveb.export import export_build
    from sveb.models import model_slug
    bdir = find_build(root, model_slug(model), domain, build_id, console)
    path = export_build(bdir, out_dir, model_dir)
    import json
    ex = json.loads((path / "manifest.json").read_text())["export"]
    rows = ", ".join(f"{t} {v['rows']}" for t, v in ex["tables"].items())
    out.print(f"exported {bdir.name} -> {path} ({rows}; content hash {ex['content_hash']})")


@app.command("import")
def import_(
    dataset: str = typer.Argument(..., help="Hub dataset id of an SVEB export, or a local export folder."),
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the build."),
):
    """Read an exported build through `datasets` into a folder `sveb eval --build` takes (hashes checked)."""
    from sveb.hub import import_build
    path = import_build(dataset, out_dir)
    out.print(f"imported {dataset} -> {path}; score it with `sveb eval --build {path}`")
