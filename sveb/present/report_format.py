"""How the report writes its tables: number cells, Markdown and HTML tables, the page's style."""

from __future__ import annotations

import html
from pathlib import Path

from sveb.core import metrics
from sveb.score import replicates

ok = metrics.ok


def cell(r: dict | None) -> str:
    """An MAE cell: MAE ± half-width of its 95% CI (MISSING without a row)."""
    return metrics.MISSING if r is None else metrics.fmt_ci(r, "mae")


def md_table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(":--" if i < right_from else "--:" for i in range(len(header))) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows])


def html_table(header: list[str], rows: list[list[str]], classes: list[str] | None = None,
                bold: list[list[bool]] | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for i, r in enumerate(rows):
        cells = "".join(f"<td>{'<b>' if bold and j and bold[i][j - 1] else ''}{html.escape(str(c))}"
                        f"{'</b>' if bold and j and bold[i][j - 1] else ''}</td>" for j, c in enumerate(r))
        body.append(f"<tr class='{classes[i] if classes else ''}'>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


CSS = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}"
       "table{border-collapse:collapse;margin:0.6em 0 1.4em}td,th{border-bottom:1px solid #ddd;padding:3px 10px;"
       "text-align:right}td:first-child,th:first-child{text-align:left}tr.floor td{border-top:2px solid #888;"
       "font-style:italic}tr.mcs td,tr.n td{color:#777}img{max-width:100%;margin:0.4em 0 1.2em}"
       ".note{color:#555;font-size:0.9em}li.warn,p.warn{color:#a35b00}")


def img(png: Path) -> str:
    return f"<img src='{png.name}' alt='{png.name}'>"


SPREAD_NOTE = ("A trained estimator scored again with `-P seed=K`: mean ± sd (ddof 1) over its training seeds of "
               "MAE and of the paired Δ, and the verdict of its test over trainings (each replicate alone is "
               "tested alone and gives no verdict of the estimator).")


def spread_md(spread: list[dict]) -> list[str]:
    if not spread:
        return []
    return ["## Training seeds of trained estimators\n", md_table(replicates.HEADER, replicates.cells(spread), 3),
            f"\n{SPREAD_NOTE}\n"]


def spread_html(spread: list[dict]) -> list[str]:
    if not spread:
        return []
    return ["<h2>Training seeds of trained estimators</h2>", html_table(replicates.HEADER, replicates.cells(spread)),
            f"<p class='note'>{html.escape(SPREAD_NOTE)}</p>"]
