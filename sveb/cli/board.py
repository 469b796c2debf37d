"""`sveb submit` and `sveb leaderboard [add | html]`: result bundles, boards that rescore them, a static site.

`sveb leaderboard --root ...` (no subcommand) is the local CSV leaderboard it always was."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import (
    ALLOW_MIXED_DTYPE,
    ALLOW_UNEQUAL_SEEDS,
    BUILD_DIR,
    DOMAIN,
    EXPECT,
    MODEL,
    ROOT,
    app,
    build_root,
    console,
    out,
)

board_app = typer.Typer(add_completion=False, invoke_without_command=True, no_args_is_help=False,
                        help="Gather every score under ROOT into one CSV (no subcommand), or manage a shared board.")
app.add_typer(board_app, name="leaderboard")

BOARD = typer.Option(..., "--board", help="The board folder (created on first add).")


@board_app.callback()
def leaderboard(ctx: typer.Context, root: Path = ROOT,
                out_csv: Path = typer.Option(Path("leaderboard.csv"), "--out"),
                wide: bool = typer.Option(False, "--wide", help="Also bias, calibration slope, ranking metrics and "
                                          "own-outcome shift, CIs as \\[low, high] (needs a wide terminal)."),
                build_id: str | None = BUILD_DIR,
                published: bool = typer.Option(True, "--published/--no-published", help="Also show the committed "
                                               "Table 4 estimates of these builds (results/table4/estimates.parquet, "
                                               "where it exists) beside the ones scored here."),
                allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS):
    """Gather every score under ROOT into one CSV and print one table per domain and protocol
    (subcommands: `add` bundles to a shared board, `html` its static site)."""
    if ctx.invoked_subcommand is not None:
        return
    from sveb.present.leaderboard import print_pivot, rows, write_csv
    from sveb.store import check_writable
    check_writable(out_csv, "--out", file=True)
    root = build_root(root, build_id)
    from sveb.score.compare import published_for
    from sveb.score.pool_checks import Allow
    source = published_for(root)
    r = rows(root, allow=Allow(allow_mixed_dtype, allow_unequal_seeds),
             published=source if published and source.exists() else None)
    if not r:
        from sveb.core.errors import UsageError
        from sveb.store.builds import frozen_hint
        raise UsageError(f"no scores under {root}; run `sveb eval` first" + frozen_hint(None))
    write_csv(r, out_csv)
    print_pivot(r, out, wide=wide)
    out.print(f"wrote {out_csv} ({len(r)} rows) and its tables' scope, "
              f"{out_csv.with_name(out_csv.stem + '.scope.txt')}")


@app.command()
def submit(
    estimator: str = typer.Option(..., "--estimator", "-e", help="Estimator name (`sveb ls estimators`) or "
                                  "module:Class."),
    param: list[str] = typer.Option([], "--param", "-P", help="Estimator parameter key=value; repeatable."),
    protocol: list[str] = typer.Option(["held-out", "in-group"], help="Protocols to include (repeatable)."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: str | None = typer.Option(None, "--build", help="Build fingerprint (prefix), build or export "
                                           "folder, or hub:ID."),
    expect: str | None = EXPECT,
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the bundle."),
    archive: str | None = typer.Option(None, "--archive", help="Also write OUT.tar.gz or OUT.zip: tar.gz | zip."),
    force: bool = typer.Option(False, help="Re-run the estimator even if its estimates are stored."),
):
    """Run (or reuse) an estimator's evaluation and write a result bundle anyone can verify on a board."""
    from sveb.board.submit import submit as run
    from sveb.core.models import check_model, model_slug
    from sveb.evaluate import params_dict
    from sveb.store.builds import locate_build
    model = check_model(model, weights=False)
    build = locate_build(root, model_slug(model), domain, build_id, console)  # opened once, passed down
    from sveb.store.builds import check_expected
    check_expected([build], expect)
    from sveb.store import check_writable
    from sveb.store.builds import results_view
    check_writable(out_dir, "--out")
    build = results_view(build, console)  # a read-only export: its scores in a writable mirror
    path = run(build, estimator, params_dict(param), list(protocol), out_dir, archive, force=force, console=console)
    out.print(f"bundle {path}" + (f" (and {path}.{archive})" if archive else ""))


@board_app.command("add")
def add(
    bundles: list[Path] = typer.Argument(None, help="Bundle folders, .tar.gz or .zip files."),
    board: Path = BOARD,
    build: list[Path] = typer.Option([], "--build", help="A build or export folder the board scores against "
                                     "(recorded in the board; repeatable)."),
    from_root: Path | None = typer.Option(None, "--from-root", help="Bundle every evaluated estimator of every "
                                             "complete build under this data root and add them."),
    max_bundle_mb: float = typer.Option(256, "--max-bundle-mb", help="Refuse an archive over this many MiB, packed "
                                        "or unpacked (checked before anything is unpacked)."),
):
    """Validate bundles against a known build, recompute their scores, and add them to the board."""
    from sveb.board import add_all
    from sveb.core.errors import UsageError
    if not bundles and from_root is None:
        raise UsageError("leaderboard add: give bundles to add, or --from-root ROOT")
    if max_bundle_mb <= 0:
        raise UsageError(f"--max-bundle-mb {max_bundle_mb:g}: must be positive")
    from sveb.store import check_writable
    check_writable(board, "--board")
    if from_root is not None:
        from sveb.board.root import add_root
        for line in add_root(from_root, board, console):
            out.print(line)
    if bundles:  # all or nothing: every bundle is checked and scored before any is written
        for b, (key, status) in zip(bundles, add_all(board, list(bundles), build, max_bundle_mb)):
            out.print(f"{status}: {b} (bundle {key})")


@board_app.command("html")
def html(board: Path = BOARD, out_dir: Path = typer.Option(..., "--out", help="Folder for the site."),
         force: bool = typer.Option(False, "--force", help="Write into a non-empty --out that is not an earlier "
                                    "site.")):
    """One static page (no server, no network): sortable tables, verdicts, cost, provenance, the cost plot."""
    from sveb.present.site import write_site
    from sveb.store import check_own_out, check_writable
    check_own_out(out_dir, "leaderboard html", "SVEB leaderboard", force)
    check_writable(out_dir, "--out")
    index = write_site(board, out_dir)
    out.print(f"site: {index}")
