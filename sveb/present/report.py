"""Static report of a root: Table-4 style MAE tables, paired tests against GRPO, plots, one index.html.
Builds that differ only in their seed are pooled (one column; clusters = (build, problem)) with a per-seed
table of the paired Δ. The paired comparisons are recomputed: they need every estimator's per-state estimates.
Which views it shows: report_views.py; cell and table formatting: report_format.py."""

from __future__ import annotations

import csv
import html
import re
import time
from pathlib import Path

import numpy as np

from sveb.core import metrics
from sveb.data_builders import DOMAINS
from sveb.estimators import BASELINE, CONSTRUCTED, role_of
from sveb.evaluate.protocols import PROTOCOL_LABELS
from sveb.present import leaderboard, plots, report_by, scope
from sveb.present.report_format import CSS, cell, html_table, img, md_table, ok, spread_html, spread_md
from sveb.present.report_views import (
    ReportError,  # noqa: F401  (report.ReportError, as callers catch it)
    collect_views,
    drop_variants,
    protocols_of,
    sorted_protocols,
    truncated_shares,
    view_order,
)
from sveb.score import pooling, replicates
from sveb.score.paper_rows import is_ref_row
from sveb.score.pooling import View  # noqa: F401  (report.View: the per-state view of a build or pool)

PAIRED_IDENTITY = ["model", "domain", "build_fp", "kind", "seeds", "protocol", "estimator", "params"]


def paired_columns() -> list[str]:
    """paired.csv's columns: identity, then the metric table's paired view (sveb.core.metrics)."""
    return [*PAIRED_IDENTITY, *metrics.columns(metrics.PAIRED)]


NOTE = ("Cells: MAE against the MC reference ± half-width of the 95% problem-clustered CR1 t-interval (lower is "
        "better). Bold: best estimator per column (scale rows excluded). oracle floor: expected MAE of the best "
        "predictor that knows each state's true value (a lower bound in expectation, under the prior fitted to the "
        "references); ref noise: expected |V − reference| (not a bound). Scale rows (MCS@k, mean of k fresh "
        "continuations) are shown for scale. held-out is the headline protocol; in-group is the paper's, where an "
        "estimate may see the state's own outcome (its own-outcome share is in the table below it). "
        f"{', '.join(CONSTRUCTED)}: their V(s) is SVEB's construction from those papers' signals (the papers define "
        "no state-value estimator), not the papers' own estimators.")


ARROW = {"lower": " ↓", "higher": " ↑"}  # which side of a metric is better


def _labels(views: list[View]) -> dict[tuple[str, str], str]:
    params: dict[tuple[str, str], str] = {}
    for v in views:
        params.update(v.params)
    return leaderboard.labels(params)


def _is_scale(name: str) -> bool:
    return role_of(name) == "scale" or is_ref_row(name)


def _order(key: tuple, labels: dict) -> tuple:
    """Baseline, estimators, then the scale rows, in registry order (plugins by name); the authors' MCS@k last."""
    label = labels.get(key[:2], key[0])  # today's name (a row stored under an old one ranks as today's)
    return leaderboard.row_order(label.split(" ")[0])[:2] + (label,)


def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", "_".join(parts)).strip("-")


def _table(views: list[View], protocol: str, labels: dict) -> dict:
    """Paper Table 4: domains as columns, estimators as rows, noise floor, then the scale rows."""
    hit = {(v.fp, r["estimator"], r["params_fp"]): r for v in views for r in v.scores if r["protocol"] == protocol}
    keys = sorted({k[1:] for k in hit}, key=lambda k: _order(k, labels))
    main = [k for k in keys if not _is_scale(k[0])]

    def mae_label(k: tuple) -> str:  # a default row tested over its trainings: "(mean of N trainings)"
        n = max((hit[(v.fp, *k)].get("trainings") or 0 for v in views if (v.fp, *k) in hit), default=0)
        return replicates.label(labels.get(k, k[0]), {"trainings": n})
    best = {}
    for v in views:
        maes = [(hit[(v.fp, *k)]["mae"], i) for i, k in enumerate(main) if ok(hit.get((v.fp, *k), {}).get("mae"))]
        best[v.fp] = min(maes)[1] if maes else None
    rows = [(mae_label(k), [cell(hit.get((v.fp, *k))) for v in views], [best[v.fp] == i for v in views],
             "est") for i, k in enumerate(main)]
    floors = [next((r.get("oracle_floor") for (fp, *_), r in hit.items() if fp == v.fp), None) for v in views]
    noise = [next((r.get("ref_noise") for (fp, *_), r in hit.items() if fp == v.fp), None) for v in views]
    rows.append(("oracle floor (knows V)", [metrics.fmt(x, "oracle_floor") for x in floors], [False] * len(views),
                 "floor"))
    rows.append(("ref noise (not a bound)", [metrics.fmt(x, "ref_noise") for x in noise], [False] * len(views),
                 "floor"))
    rows += [(labels.get(k, k[0]), [cell(hit.get((v.fp, *k))) for v in views], [False] * len(views), "mcs")
             for k in keys if _is_scale(k[0])]
    n = [next((f"{r['n_states']} / {r['n_problems']}" for (fp, *_), r in hit.items() if fp == v.fp),
              metrics.MISSING) for v in views]
    rows.append(("states / problems", n, [False] * len(views), "n"))

    def per_estimator(m) -> list:  # one metric: estimators as rows, builds as columns
        return [(labels.get(k, k[0]), [metrics.cell(hit[(v.fp, *k)], m, m.interval) if (v.fp, *k) in hit
                                       else metrics.MISSING for v in views]) for k in main]
    return {"own": per_estimator(metrics.metric("own_share")),
            "more": [(m, per_estimator(m)) for m in metrics.shown(metrics.REPORT)],
            "title": f"{views[0].model} — {PROTOCOL_LABELS.get(protocol, protocol)}",
            "header": [f"{v.col}{ARROW['lower']}" for v in views], "rows": rows,
            "series": {labels.get(k, k[0]): [tuple(hit[(v.fp, *k)][c] if (v.fp, *k) in hit else np.nan
                                                  for c in ("mae", "mae_ci_low", "mae_ci_high")) for v in views]
                       for k in keys},
            "floors": [x if ok(x) else np.nan for x in floors], "cols": [v.col for v in views]}


def _paired(v: View, protocol: str, labels: dict, notes: list[str], cmp: dict,
            kind: str = "") -> tuple[list[dict], list]:
    """Each estimator against the baseline on the same states: paired Δ of squared error, its CI, the
    cluster-robust p, Holm over the table, the verdict; and the per-state differences for the histograms."""
    if not any(k[0] == BASELINE and k[2] == protocol for k in v.est):
        notes.append(f"{v.model}/{v.domain} [{v.fp}] {protocol}: no {BASELINE} estimates, "
                     "so no paired comparison or difference histograms")
        return [], []
    b = v.est[sorted(k for k in v.est if k[0] == BASELINE and k[2] == protocol)[0]]
    cmp = cmp[(v.fp, protocol)]
    rows, diffs = [], []
    for k in sorted((k for k in v.est if k[2] == protocol and k[0] != BASELINE), key=lambda k: _order(k, labels)):
        ok = np.isfinite(v.est[k]) & np.isfinite(b) & np.isfinite(v.ref)
        diffs.append((labels.get(k[:2], k[0]), v.est[k][ok] - b[ok]))
        if not ok.any():
            continue
        c = cmp[k[:2]]
        rows.append({"model": v.model, "domain": v.domain, "build_fp": v.fp,
                     "kind": kind or ("pooled" if v.pooled else "build"), "seeds": ",".join(map(str, v.seeds)),
                     "protocol": protocol, "estimator": labels.get(k[:2], k[0]), "params": v.params.get(k[:2], ""),
                     **{c_: c[c_] for c_ in metrics.columns(metrics.PAIRED)}})
    return rows, diffs


PAIRED_HEADER = ["model", "domain", "protocol", "estimator", "states", "MAE", f"MAE {BASELINE}",
                 "Δ sq err [95% CI]", "p", "p (Holm)", "verdict"]
BUILD_HEADER = ["model", "domain", "build", "status", "states", "estimators", "rollouts cut off",
                "reference draws cut off"]
def _figures(v: View, proto: str, labels: dict, colors: dict, out: Path, cmp: dict, notes: list[str]):
    """Paired rows and HTML for one build and protocol: difference histograms, calibration, error by position."""
    what = f"{v.model} — {v.col} — {proto}"
    paired, diffs = _paired(v, proto, labels, notes, cmp)
    keys = sorted((k for k in v.est if k[2] == proto), key=lambda k: _order(k, labels))
    html_ = [f"<h3>{html.escape(what)}</h3>"]
    name = lambda kind: out / f"{_slug(kind, v.model, v.domain, v.fp, proto)}.png"  # noqa: E731
    if diffs:
        html_.append(img(plots.hist_diffs(diffs, colors, f"V_est − V_{BASELINE} per state — {what}", name("hist"))))
    else:  # say why on the page, where the histogram would have been
        if any(k[0] == BASELINE for k in keys):
            notes.append(f"{what}: {BASELINE} is the only estimator, so there is no difference histogram to draw")
        html_.append(f"<p class='warn'>{html.escape(notes[-1])}</p>")
    if not keys:
        notes.append(f"{what}: scores but no stored estimates, so no per-state plots")
        return paired, html_
    errs = [(labels.get(k[:2], k[0]), v.est[k], v.ref) for k in keys]
    html_.append(img(plots.calibration(errs, colors, f"Calibration — {what}", name("calib"))))
    html_.append(img(plots.error_by_position([(lab, v.pos, np.abs(e - r)) for lab, e, r in errs], colors,
                                              f"Error by position in the rollout — {what}", name("position"))))
    return paired, html_


FIGURE_KINDS = ("mae", "hist", "calib", "position")  # the report's own PNG names start with these
def write_report(root: Path, out: Path, all_settings: bool = False, by: tuple = (),
                 builds: set | None = None, allow: pooling.Allow = pooling.Allow()) -> Path:
    """Write leaderboard.csv, paired.csv, table.md, PNG plots and index.html into `out`; return index.html.
    Ablation settings are left out where the default setting exists (leaderboard.csv keeps them all)
    unless `all_settings`. Each key of `by` adds MAE per value of that problem property (by_KEY.csv).
    `builds`: only these build fingerprints (e.g. one preset's builds in a shared root). `allow`: what a table
    may mix (seeds of different problem mixes, two dtypes), said under each table that does."""
    root, out = Path(root), Path(out)
    views, seed_groups, notes = collect_views(root, builds, allow)
    seed_views = [v for g in seed_groups for v in g]
    out.mkdir(parents=True, exist_ok=True)
    board = leaderboard.rows(root, builds, allow)
    leaderboard.write_csv(board, out / "leaderboard.csv")
    spread = replicates.of_rows(board)  # trained estimators' training seeds, when several were scored
    if spread:
        with open(out / "training_seeds.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(spread[0]))
            w.writeheader()
            w.writerows(spread)
    # paired tests before hiding ablation settings: the Holm family is every setting, as in leaderboard.csv
    cmp = {(v.fp, p): pooling.paired(v, p) for v in views + seed_views for p in protocols_of(v)}
    for v in views:  # a default row tested over its trainings: MAE and its CI the mean over them (Table 4's)
        for r in v.scores:
            c = cmp.get((v.fp, r["protocol"]), {}).get((r["estimator"], r["params_fp"]), {})
            r.update(pooling.over_trainings_row(c), trainings=c.get("trainings"))
    trained = replicates.notes([r for c in cmp.values() for r in c.values()])  # the caption's trainings lines
    labels = _labels(views)
    if not all_settings:
        drop_variants(views + seed_views, labels)
        labels = _labels(views)
    colors = plots.palette(sorted(set(labels.values()), key=lambda s: (plots.is_scale(s), s)))
    models = sorted({v.model for v in views})
    domains = sorted({v.domain for v in views}, key=lambda d: (DOMAINS.index(d) if d in DOMAINS else 99, d))

    md, body = [], []
    for m in models:
        mine = [v for v in views if v.model == m]
        for proto in sorted_protocols({p for v in mine for p in protocols_of(v)}):
            cols = [v for v in mine if any(r["protocol"] == proto for r in v.scores)]
            if not cols:
                continue
            t = _table(cols, proto, labels)
            cells = [[lab, *(f"**{c}**" if b else c for c, b in zip(cs, bs))] for lab, cs, bs, _ in t["rows"]]
            caveats = [f"Caveat: {c}\n" for c in dict.fromkeys(c for v in cols for c in v.notes)]
            sc = scope.caption(scope.of_builds([b for v in cols for b in v.bdirs])).splitlines()
            md += [f"## MAE: {t['title']}\n", md_table(["estimator", *t["header"]], cells), f"\n{NOTE}\n", *caveats,
                   *(f"{x}\n" for x in trained), "Scope:\n", *(f"- {x}" for x in sc), ""]
            own_rows = [[lab, *cs] for lab, cs in t["own"]]
            md += [f"Own-outcome share ({proto}): mean |Δ estimate| when the state's own final reward flips "
                   f"(0 by construction under held-out; {metrics.MISSING}: a critic trained on that rollout).\n",
                   md_table(["estimator", *t["cols"]], own_rows), ""]
            png = plots.mae_bars(t["cols"], t["series"], t["floors"], colors,
                                 f"MAE vs MC reference — {m} — {proto}", out / f"{_slug('mae', m, proto)}.png")
            body += [f"<h2>MAE: {html.escape(t['title'])}</h2>",
                     html_table(["estimator", *t["header"]], [[lab, *cs] for lab, cs, _, _ in t["rows"]],
                                 [k for *_, k in t["rows"]], [bs for _, _, bs, _ in t["rows"]]),
                     f"<p class='note'>{html.escape(NOTE)}</p>",
                     *(f"<p class='note'>{html.escape(x)}</p>" for x in trained),
                     *(f"<p class='note'>{html.escape(c)}</p>" for c in caveats),
                     "<p class='note'>Scope:<br>" + "<br>".join(html.escape(x) for x in sc) + "</p>",
                     f"<p>Own-outcome share ({html.escape(proto)}): mean |Δ estimate| when the state's own final "
                     "reward flips.</p>", html_table(["estimator", *t["cols"]], [[lab, *cs] for lab, cs in t["own"]]),
                     img(png)]
            for mt, per in t["more"]:  # metrics the table shows in the report (sveb.core.metrics REPORT)
                what = f"{mt.title} ({proto})" + ARROW.get(mt.direction, "")
                md += [f"{what}:\n", md_table(["estimator", *t["cols"]], [[lab, *cs] for lab, cs in per]), ""]
                body += [f"<p>{html.escape(what)}:</p>", html_table(["estimator", *t["cols"]],
                                                                   [[lab, *cs] for lab, cs in per])]
    all_paired, figs = [], []
    for v in views:
        for proto in protocols_of(v):
            paired, html_ = _figures(v, proto, labels, colors, out, cmp, notes)
            all_paired += paired
            figs += html_
    seed_md, seed_html = [], []
    for g in seed_groups:  # the spread over seeds behind each pooled column
        for proto in sorted_protocols({p for v in g for p in protocols_of(v)}):
            per = [_paired(v, proto, labels, [], cmp, "seed")[0] for v in g]
            all_paired += [r for rs in per for r in rs]
            ests = list(dict.fromkeys(r["estimator"] for rs in per for r in rs))
            cells = [[e, *(next((metrics.fmt(r["delta_sq"], "delta_sq", signed=False) for r in rs
                                 if r["estimator"] == e), metrics.MISSING) for rs in per)]
                     for e in ests]
            header = ["estimator", *(f"seed {v.seeds[0]}" for v in g)]
            title = f"{g[0].model} — {g[0].domain} — {proto}: Δ sq err vs {BASELINE} per seed"
            seed_md += [f"### {title}\n", md_table(header, cells), ""]
            seed_html += [f"<h3>{html.escape(title)}</h3>", html_table(header, cells)]

    for key in by:  # MAE per value of a problem property (meta key), as tables and by_KEY.csv
        rows_by = report_by.rows(views, key, labels)
        csv_by = report_by.write_csv(rows_by, out / f"by_{report_by.slug(key)}.csv").name
        md.append(f"## MAE by {key}\n\nPer value of the problems' `{key}` (all rows in `{csv_by}`).\n")
        body.append(f"<h2>MAE by {html.escape(key)}</h2><p class='note'>all rows in {html.escape(csv_by)}</p>")
        for title, header, cells in report_by.tables(rows_by, key):
            md += [f"### {title}\n", md_table(header, cells, 2), ""]
            body += [f"<h3>{html.escape(title)}</h3>", html_table(header, cells)]
    with open(out / "paired.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=paired_columns())
        w.writeheader()
        w.writerows({k: metrics.csv_cell(k, x) for k, x in r.items()} for r in all_paired)
    pnote = (f"Paired on the same states: Δ sq err = mean of (estimate − ref)² − ({BASELINE} − ref)² (< 0: closer "
             "than grpo; the reference's noise cancels, so it estimates the difference of true MSEs), with its 95% "
             "problem-clustered CR1 t-interval; p: the same cluster-robust paired t-test (clusters = problems, pooled "
             "seeds included), so the CI excludes 0 exactly when p < 0.05; p (Holm): Holm-adjusted within the row's "
             "declared family (main: the builtin estimators at their defaults; scale: MCS@k; variant: SVEB's earlier "
             "readings; each family corrected for all its declared members; any other setting is tested alone); "
             "verdict: Holm p < 0.05 and the sign of Δ, the same as the Holm-adjusted interval excluding 0.")
    prow = [[*(r[c] for c in ("model", "domain", "protocol")),
             r["estimator"] if r.get("replicate_of") else replicates.label(r["estimator"], r), str(r["n_states"]),
             *(metrics.fmt(r[c], c) for c in ("mae", "mae_grpo")),
             metrics.fmt_ci(r, "delta_sq", interval=True, signed=False),  # unsigned here, as it always was
             *(metrics.fmt(r[c], c) for c in ("p_delta", "p_holm", "verdict"))]
            for r in all_paired if r["kind"] != "seed"]
    shown = sorted([v for v in views if not v.pooled] + seed_views, key=view_order)
    brow = [[v.model, v.domain, v.fp, v.status, str(len(v.ref)), str(len({k[:2] for k in v.est})),
             *truncated_shares(v.bdir)] for v in shown]
    pngs = re.findall(r"<img src='([^']+)'", "".join(body + figs))
    for old in out.glob("*.png"):  # figures of builds no longer in the root: stale, and linked from nowhere
        if old.name.split("_")[0] in FIGURE_KINDS and old.name not in pngs:
            old.unlink()
    md = [f"# SVEB report\n\nroot: `{root}`  \nmodels: {', '.join(models)}  \ndomains: {', '.join(domains)}\n",
          "## Builds\n", md_table(BUILD_HEADER, brow, 4), "", *md,
          f"## Paired comparison against {BASELINE}\n", md_table(PAIRED_HEADER, prow, 4) if prow else "(none)",
          f"\n{pnote}\n", *seed_md, *spread_md(spread),
          *(["## Notes\n", *(f"- {n}" for n in notes), ""] if notes else []),
          "## Figures\n", *(f"- ![{p}]({p})" for p in pngs)]
    (out / "table.md").write_text("\n".join(md) + "\n", encoding="utf-8")

    page = [f"<!doctype html><html><head><meta charset='utf-8'><title>SVEB report</title><style>{CSS}</style>"
            "</head><body><h1>SVEB report</h1>",
            f"<p>root: <code>{html.escape(str(root))}</code> · generated {time.strftime('%Y-%m-%d %H:%M')}<br>"
            f"models: {html.escape(', '.join(models))} · domains: {html.escape(', '.join(domains))} · "
            f"states: {sum(len(v.ref) for v in views)}</p>", html_table(BUILD_HEADER, brow)]
    if notes:
        page.append("<h2>Notes</h2><ul>" + "".join(f"<li class='warn'>{html.escape(n)}</li>" for n in notes) + "</ul>")
    page += body + [f"<h2>Paired comparison against {BASELINE}</h2>",
                    html_table(PAIRED_HEADER, prow) if prow else "<p>(none)</p>", f"<p class='note'>{pnote}</p>",
                    *seed_html, *spread_html(spread),
                    "<h2>Per-build figures</h2>", *figs, "</body></html>"]
    (out / "index.html").write_text("\n".join(page), encoding="utf-8")
    return out / "index.html"
