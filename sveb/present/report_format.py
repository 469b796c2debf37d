"""How the report writes its tables: number cells, Markdown and HTML tables, the page's style."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np


def ok(x) -> bool:
    return x is not None and bool(np.isfinite(x))


def num(x, nd: int = 3) -> str:
    return f"{x:.{nd}f}" if ok(x) else "n/a"


def cell(r: dict | None) -> str:
    if r is None:
        return "–"
    mae, lo, hi = r["mae"], r["mae_ci_low"], r["mae_ci_high"]
    return "n/a" if not ok(mae) else f"{mae:.3f} ± {(hi - lo) / 2:.3f}" if ok(lo) and ok(hi) else f"{mae:.3f}"


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
               "MAE and of the paired Δ; the verdicts per seed in seed order (each replicate tested alone).")


def spread_md(spread: list[dict]) -> list[str]:
    from sveb.score import replicates
    if not spread:
        return []
    return ["## Training seeds of trained estimators\n", md_table(replicates.HEADER, replicates.cells(spread), 3),
            f"\n{SPREAD_NOTE}\n"]


def spread_html(spread: list[dict]) -> list[str]:
    from sveb.score import replicates
    if not spread:
        return []
    return ["<h2>Training seeds of trained estimators</h2>", html_table(replicates.HEADER, replicates.cells(spread)),
            f"<p class='note'>{html.escape(SPREAD_NOTE)}</p>"]
