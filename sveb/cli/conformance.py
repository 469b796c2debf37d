"""`sveb conformance DIR`: SVEB's Numca, Hista and PACS kernels against cases computed by the authors' code."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import app, out


@app.command()
def conformance(
    directory: Path = typer.Argument(..., help="A folder in the conformance format (FORMAT.md): numca.jsonl, "
                                     "hista/cases.jsonl + .npz groups, pacs.jsonl; or a folder above such folders "
                                     "(every one below it runs)."),
    show: int = typer.Option(5, help="Disagreeing cases listed per estimator."),
):
    """Run every case of DIR through SVEB's estimators; per estimator and rule tag, how many agree (within 1e-6).
    Exits 1 when any case disagrees."""
    from rich import box
    from rich.table import Table

    from sveb.evaluate.conformance import run_dir, tally
    outcomes = run_dir(directory, progress=lambda msg: out.print(f"running {msg}"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False,
                  title=f"conformance of {directory} (agree / cases)")
    for c in ("estimator", "rule", "agree", "cases"):
        table.add_column(c, no_wrap=True, justify="left" if c in ("estimator", "rule") else "right")
    for name, t in tally(outcomes).items():
        for tag in ["all", *sorted(k for k in t.total if k != "all")]:
            table.add_row(name if tag == "all" else "", tag, str(t.agree[tag]), str(t.total[tag]))
    out.print(table)
    bad = [o for o in outcomes if not o.ok]
    for name in dict.fromkeys(o.estimator for o in bad):
        mine = [o for o in bad if o.estimator == name]
        for o in mine[:show]:
            out.print(f"  {name} {o.case_id}: {o.detail} [{', '.join(o.rules)}]")
        if len(mine) > show:
            out.print(f"  ... and {len(mine) - show} more {name} cases")
    out.print(f"{len(outcomes) - len(bad)} of {len(outcomes)} cases agree")
    if bad:
        raise typer.Exit(1)
