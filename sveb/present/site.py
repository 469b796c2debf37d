"""`sveb leaderboard html`: a board as one static page. No server, no build step, no network when viewed: the
CSS and the sorting script are inline, the cost plots and bundle archives lie beside index.html.

Test hook: index.html#sort=KEY clicks KEY's header of every table once the page has loaded (a headless
browser's --dump-dom then shows the sorted rows)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from sveb import board as boards
from sveb.board.bundle import pack_tgz
from sveb.core import metrics
from sveb.core.errors import SvebError
from sveb.estimators import rank
from sveb.estimators.families import current_name
from sveb.present import scope
from sveb.score import replicates
from sveb.store.builds import load_build

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}h2{margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0}th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right;
white-space:nowrap}th{cursor:pointer;background:#f3f3f3;user-select:none}th.asc:after{content:" \\25B2"}
th.desc:after{content:" \\25BC"}td.l,th.l{text-align:left}.better{color:#1a7f37;font-weight:600}
.worse{color:#b42318;font-weight:600}.dim{color:#888}img{max-width:100%;border:1px solid #eee}
span.params{display:inline-block;white-space:normal;max-width:26em;font-size:12px}
caption{caption-side:bottom;text-align:left;color:#666;font-size:12px;padding-top:4px}"""

JS = """function sortBy(th){var t=th.closest('table'),b=t.tBodies[0],i=Array.from(th.parentNode.children).indexOf(th);
var asc=!th.classList.contains('asc');t.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc')});
th.classList.add(asc?'asc':'desc');var rows=Array.from(b.rows);rows.sort(function(x,y){
var a=x.cells[i].dataset.v,c=y.cells[i].dataset.v,na=parseFloat(a),nc=parseFloat(c);
if(!isNaN(na)&&!isNaN(nc))return asc?na-nc:nc-na;if(isNaN(na)!==isNaN(nc))return isNaN(na)?1:-1;
return asc?a.localeCompare(c):c.localeCompare(a)});rows.forEach(function(r){b.appendChild(r)})}
document.querySelectorAll('th').forEach(function(th){th.addEventListener('click',function(){sortBy(th)})});
var m=location.hash.match(/sort=([\\w-]+)/);if(m)document.querySelectorAll('th[data-key="'+m[1]+'"]')
.forEach(function(th){th.click()});"""



def columns() -> list[tuple[str, str, bool]]:
    """(key, header, left-aligned) of every table's sortable columns: the estimator, the metric table's site
    metrics (sveb.core.metrics, text ones left-aligned), the provenance and the bundle."""
    return [("estimator", "estimator", True),
            *((m.name, m.title, m.style == "text") for m in metrics.shown(metrics.SITE)),
            ("provenance", "provenance", True), ("bundle", "bundle", True)]


class SiteError(SvebError, ValueError):
    pass


def _f(x) -> str:
    return metrics.fmt(x, "")


def _cell(r: dict, key: str) -> tuple[str, str, str]:
    """(sort value, shown HTML, css class) of one cell."""
    e = html.escape
    v = r.get(key)
    if key == "estimator":
        params = json.loads(r.get("params") or "{}")
        shown = ", ".join(f"{k}={x}" for k, x in sorted(params.items()))
        name = replicates.label(str(v), r)  # "(mean of N trainings)", "(training seed K)"
        what = _trainings_line(r)
        more = "<br>".join(f"<span class='dim params'>{e(x)}</span>" for x in (what, shown) if x)
        return e(name), f"{e(name)}<br>{more}" if more else e(name), "l"
    if key == "provenance":
        who = f"{r.get('provenance')}: {r.get('distribution') or r.get('target') or '?'} {r.get('version') or ''}"
        if r.get("provenance_check") != "verified":  # what the board could not reproduce is the submitter's word
            who = f"{who.strip()} (self-declared)"
        flags = json.loads(r.get("machine") or "{}")
        title = f"target {r.get('target')}; SVEB {r.get('sveb_version')}; build {r.get('content_hash')}; " \
                f"CPU {flags.get('cpu_flags')}; GPU {flags.get('gpu') or 'none'}"
        return e(who), f"<span title=\"{e(title)}\">{e(who)}</span>", "l"
    if key == "bundle":
        return e(str(v)), f"<a href=\"bundles/{e(str(v))}.tar.gz\">{e(str(v))[:8]}</a>", "l"
    m = metrics.metric(key)  # a metric: shown as the table says (Δ with its interval, MAE ± half-width)
    if m.style == "text":
        shown = metrics.fmt(v, m)
        return e(shown), e(shown), (str(v) if v in ("better", "worse") else "dim" if v == replicates.REPLICATE
                                    else "") if key == "verdict" else ""
    key = "Infinity" if v == float("inf") else metrics.fmt(v, "", m.sort_decimals)  # k_eq unbounded sorts first
    return key, metrics.cell(r, m, interval=m.interval), ""


def _trainings_line(r: dict) -> str:
    """What a trained estimator's row rests on: the mean over its trainings, or one replicate training alone."""
    if r.get("replicate_of"):
        return (f"replicate of {r['replicate_of']}: training seed {r.get('training_seed')} alone "
                f"(p unadjusted; no verdict of the estimator)")
    if (r.get("trainings") or 0) > 1:
        return (f"MAE, Δ, p, verdict: mean of {r['trainings']} trainings (seeds {r.get('training_seeds')}); "
                f"other columns: the default training")
    return ""


def _table(rows: list[dict], title: str, scope_text: str = "") -> str:
    e = html.escape
    cols = columns()
    head = "".join(f"<th data-key=\"{k}\"{' class=l' if left else ''}>{e(h)}</th>" for k, h, left in cols)
    body = []
    for r in rows:
        cells = []
        for k, _, _ in cols:
            v, shown, cls = _cell(r, k)
            cells.append(f"<td data-v=\"{v}\"{f' class={cls}' if cls else ''}>{shown}</td>")
        body.append(f"<tr data-estimator=\"{e(str(r['estimator']))}\">{''.join(cells)}</tr>")
    r0 = rows[0]
    cap = (f"{r0.get('n_states')} states, {r0.get('n_problems')} problems; oracle floor {_f(r0.get('oracle_floor'))}, "
           f"reference noise {_f(r0.get('ref_noise'))}. Δ sq err: paired vs grpo on the same states, &lt; 0 better; "
           f"p: cluster-robust t-test, Holm-adjusted over this table. Click a header to sort."
           + "".join(f"<br>{e(x)}" for x in replicates.notes(rows))
           + "".join(f"<br>{e(x)}" for x in scope_text.splitlines()))
    return (f"<h3>{e(title)}</h3><table><caption>{cap}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def _pooled(rs: list[dict]) -> bool:
    return rs[0].get("kind") == "pooled"


def _table_order(kv: tuple) -> tuple:
    """Per model, seed pools first (the headline: most states), then each build; held-out first."""
    (model, h, proto), rs = kv
    return model, not _pooled(rs), h, proto != "held-out"


def write_site(board: Path, out: Path) -> Path:
    """index.html, one cost plot per domain and every bundle as a .tar.gz, in the folder `out`."""
    from sveb.present.cost_plot import cost_plot, mcs_curve  # matplotlib, scipy
    board, out = Path(board), Path(out)
    known = boards.known_handles(board)  # each build's manifest parsed once, for the rows and the captions
    rows = [{**r, "estimator": current_name(r["estimator"], r.get("params"))} for r in boards.rows(board, known)]
    if not rows:
        raise SiteError(f"--board {board}: no accepted bundles; add some with `sveb leaderboard add`")
    out.mkdir(parents=True, exist_ok=True)
    held = {b.path.resolve(): b for b in known.values()}  # the scope captions read these handles' manifests
    parts = []
    for domain in sorted({r["domain"] for r in rows}):
        drows = [r for r in rows if r["domain"] == domain]
        # a pooled row repeats its builds' points; a replicate training is inside its estimator's mean
        per_build = [r for r in drows if r.get("kind") != "pooled" and not r.get("replicate_of")]
        curves = {h: mcs_curve(load_build(known[h])) for h in {r["content_hash"] for r in per_build} if h in known}
        png = cost_plot(per_build, curves, f"{domain}: accuracy vs cost", out / f"cost-{domain}.png")
        keq = cost_plot(per_build, curves, f"{domain}: worth k rollouts vs cost", out / f"keq-{domain}.png",
                        metric="k_eq")
        parts.append(f"<h2>{html.escape(domain)}</h2><p><img src=\"{png.name}\" alt=\"accuracy vs cost, "
                     f"{html.escape(domain)}\"><img src=\"{keq.name}\" alt=\"worth k rollouts vs cost, "
                     f"{html.escape(domain)}\"></p>")
        tables: dict[tuple, list[dict]] = {}
        for r in drows:
            tables.setdefault((r["model"], r["content_hash"], r["protocol"]), []).append(r)
        # seed pools first (the headline: most states), then each build
        for (model, h, proto), rs in sorted(tables.items(), key=_table_order):
            rs.sort(key=lambda r: (*rank(r["estimator"]), r["estimator"], r.get("params") or ""))
            where = (f"seeds {rs[0].get('seeds')} pooled (builds {h.replace('+', ', ')})" if _pooled(rs)
                     else f"build {h}")
            bdirs = [known[x] for x in h.split("+") if x in known]
            parts.append(_table(rs, f"{model} · {where} · {proto}" + (" (paper; sees own outcome)"
                                                                      if proto == "in-group" else "")
                                + (" · paper's build protocol" if rs[0].get("build_protocol") == "paper" else ""),
                                "Scope:\n" + scope.caption(scope.of_builds(bdirs, known=held)) if bdirs else ""))
    (out / "bundles").mkdir(exist_ok=True)
    for key in sorted({r["bundle"] for r in rows if r.get("kind") != "pooled"}):
        src = board / "bundles" / key
        if src.is_dir() and not (out / "bundles" / f"{key}.tar.gz").exists():
            pack_tgz(src, out / "bundles" / f"{key}.tar.gz")
    shutil.copy2(board / "scores.csv", out / "scores.csv")
    page = (f"<!doctype html><html lang=en><meta charset=utf-8><title>SVEB leaderboard</title><style>{CSS}</style>"
            f"<h1>SVEB leaderboard</h1><p>Every score here was recomputed from the submitted per-state estimates and "
            f"the build's Monte-Carlo references (<a href=\"scores.csv\">scores.csv</a>); costs: extra sampled "
            f"tokens per state (MCS@k: k continuations), forward-pass tokens (hidden states, training data), "
            f"seconds per state as reported by the submitter's machine (hover a provenance for it).</p>"
            f"{''.join(parts)}<script>{JS}</script></html>")
    (out / "index.html").write_text(page, encoding="utf-8")
    return out / "index.html"
