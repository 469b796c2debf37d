"""`sveb export` and `sveb import`: a build as a frozen, hashed dataset folder, and back; `--format hista-json`: the
Hista/Numca authors' generated SVEB JSON, both ways (sveb.store.hista_io)."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import DOMAIN, MODEL, ROOT, app, console, out

FORMATS = ("sveb", "hista-json")
FORMAT = typer.Option("sveb", "--format", help="sveb (a folder of Parquet tables, manifest and card) | hista-json "
                      "(the Hista/Numca authors' generated SVEB JSON: one file, one record per state).")


def _check_format(fmt: str) -> None:
    from sveb.core.errors import UsageError
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: unknown (known: {', '.join(FORMATS)})")


@app.command("export")
def export_(
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the dataset (Parquet tables, manifest, card); "
                                 "with --format hista-json, a new .json file."),
    build_id: str | None = typer.Option(None, "--build", help="Build fingerprint (prefix) or folder; default: "
                                           "the newest complete test-split build of --model and --domain."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    model_dir: Path | None = typer.Option(None, help="The weights the build was sampled with, for the card's "
                                             "weights hash (default: --model's, resolved)."),
    fmt: str = FORMAT,
):
    """Write a build as a frozen dataset anyone can score an estimator on without sampling.

    `--format hista-json`: one file in the Hista/Numca authors' generated SVEB JSON, which their reuse scripts read."""
    from sveb.core.models import model_slug
    from sveb.store.builds import locate_build
    _check_format(fmt)
    from sveb.store import check_writable, load_manifest
    check_writable(out_dir, "--out", file=fmt == "hista-json")
    build = locate_build(root, model_slug(model), domain, build_id, console)  # its manifest parsed once, handed on
    if fmt == "hista-json":
        from sveb.store.hista_io import export_hista_json
        path, n, recut = export_hista_json(build.path, out_dir)
        note = f"; {recut} prefixes cut back to a character boundary" if recut else ""
        out.print(f"exported {build.name} -> {path} ({n} records, {fmt}{note})")
        return
    from sveb.store.export import export_build
    path = export_build(build, out_dir, model_dir)
    ex = load_manifest(path).export  # the export's own record: its tables' rows and its content hash
    rows = ", ".join(f"{t} {v['rows']}" for t, v in ex["tables"].items())
    out.print(f"exported {build.name} -> {path} ({rows}; content hash {ex['content_hash']})")


@app.command("import")
def import_(
    dataset: str = typer.Argument(..., help="Hub dataset id of an SVEB export, or a local export folder; with "
                                  "--format hista-json, the authors' JSON file."),
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the build."),
    fmt: str = FORMAT,
    model: str | None = typer.Option(None, "--model", help="hista-json: the model that sampled the file, for the "
                                        "manifest (default: unknown)."),
    domain: str | None = typer.Option(None, "--domain", help="hista-json: the build's domain (default: from the "
                                         "records' verifier: default -> math, general -> general, code -> "
                                         "programming)."),
):
    """Read an exported build through `datasets` into a folder `sveb eval --build` takes (hashes checked).

    `--format hista-json`: the Hista/Numca authors' generated SVEB JSON file instead (t counts characters; grpo,
    numca and other text-level estimators run, MCS@k and token-level ones are unavailable)."""
    _check_format(fmt)
    from sveb.store import check_writable
    check_writable(out_dir, "--out")
    if fmt == "hista-json":
        from sveb.store.hista_io import import_hista_json
        path = import_hista_json(Path(dataset), out_dir, model, domain)
        out.print(f"imported {dataset} ({fmt}) -> {path}; score it with `sveb eval --build {path}` (t counts "
                  f"characters; MCS@k and token-level estimators are unavailable)")
        return
    if model is not None or domain is not None:
        from sveb.core.errors import UsageError
        raise UsageError("--model and --domain apply to --format hista-json (an SVEB export states its own)")
    from sveb.store.hub import import_build
    path = import_build(dataset, out_dir)
    out.print(f"imported {dataset} -> {path}; score it with `sveb eval --build {path}`")
