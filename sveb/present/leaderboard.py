"""All scores under a root -> one CSV and readable terminal tables.

One row per model x domain x estimator x params x protocol x build. Builds that differ only in their seed are
pooled: each seed's row (kind `seed`) and one row over all of them (kind `pooled`, clusters = (build, problem));
a build without siblings has one row (kind `build`). Every row carries its paired Δ of squared error against grpo
(same states), the CI, the cluster-robust p, the Holm-adjusted p over its table and the verdict. A trained
estimator's default row tested over its trainings (`trainings` > 1) shows the mean over them of MAE and its CI
(sveb.score.pooling.over_trainings_row, as Table 4 does) and is named "NAME (mean of N trainings)" in the terminal;
its training-seed replicates are named "NAME (training seed K)", carry `replicate_of` and `training_seed`, and
their verdict is "replicate" (tested alone: not a verdict of the estimator).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sveb import store
from sveb.core import metrics
from sveb.core.config import protocol_of
from sveb.estimators import BASELINE, ROLES, rank
from sveb.estimators.families import current_name
from sveb.evaluate.protocols import PROTOCOLS
from sveb.present import scope
from sveb.score import replicates
from sveb.score.paper_rows import is_ref_row, ref_rows
from sveb.score.pool_checks import Allow
from sveb.score.pooling import load_view, merge, over_trainings_row, paired, pools, read_scores
from sveb.score.replicates import SEED, default_params

HEAD = ["model", "domain", "estimator", "params", "protocol", "kind", "seeds", "n_builds"]
# build_protocol: sveb | paper (sveb.core.config.protocol_of): never pooled together
TAIL = ["build_fp", "params_fp", "build_protocol", "caveats"]


def columns() -> list[str]:
    """The CSV's columns: identity, then the metric table's leaderboard columns (sveb.core.metrics), then the build."""
    return [*HEAD, *metrics.columns(metrics.LEADERBOARD), *TAIL]


def __getattr__(name: str):
    if name == "COLUMNS":
        return columns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


KINDS = ("build", "pooled", "seed")


def _proto(p: str) -> int:
    return PROTOCOLS.index(p) if p in PROTOCOLS else len(PROTOCOLS)


def row_order(name: str) -> tuple:
    """Baseline first, then the estimators, the scale rows (MCS@k) last, each in registry order; the authors'
    MCS@k rows (k of the reference draws, paper-protocol builds) after SVEB's."""
    return (len(ROLES), 0, name) if is_ref_row(name) else (*rank(name), name)


def build_protocol(view) -> str:
    """The protocol the view's builds were made under (a pool holds one: the pool key includes it)."""
    return protocol_of(view.build.manifest)


def _rows_of(view, kind: str, known: dict | None = None) -> list[dict]:
    cmp = {p: paired(view, p) for p in {r["protocol"] for r in view.scores}}
    bp = build_protocol(view)
    seeds = ",".join(str(s) for s in view.seeds)
    sc = scope.of_builds(view.builds or view.bdirs, known=known)  # not a CSV column: write_csv puts it in the sidecar
    out, cols, pair = [], columns(), metrics.paired_columns()
    for r in view.scores:
        c = cmp[r["protocol"]].get((r["estimator"], r["params_fp"]), {})
        row = {col: r.get(col) for col in cols}
        row.update({k: c.get(k) for k in pair}, kind=kind, n_builds=r.get("n_builds", 1), seeds=seeds,
                   build_protocol=bp, caveats=" | ".join(view.notes), scope=sc,
                   estimator=current_name(r["estimator"], r.get("params")))  # an old name: today's
        row.update(over_trainings_row(c))  # tested over its trainings: its MAE the mean over them, as its test
        out.append(row)
    if bp == "paper":  # the authors' MCS@k rows: k of the same reference draws, exact over subsets
        out += [{**{col: r.get(col) for col in cols}, "kind": kind, "seeds": seeds, "build_protocol": bp,
                 "caveats": " | ".join(view.notes), "scope": sc} for r in ref_rows(view, sorted(cmp))]
    return out


def rows(root: str | Path, builds: set | None = None, allow: Allow = Allow(), published: Path | None = None
         ) -> list[dict]:
    """Every score row under root (only the builds named in `builds` when given), pooled over seeds."""
    return rows_of_builds([store.Build(b) for b in store.list_builds(root) if builds is None or b.name in builds],
                          allow, published)


def rows_of_builds(bdirs: list[store.Build] | list[Path], allow: Allow = Allow(), published: Path | None = None
                   ) -> list[dict]:
    """The score rows of these builds (those with scores), pooled over seeds. A table that mixes seeds of
    different problem mixes or two compute dtypes is refused unless `allow` says so (sveb.score.pool_checks);
    then its rows' `caveats` say what it mixes. `published`: a committed table of per-state estimates (Table 4's)
    whose rows of these builds join them (sveb.score.compare.published_scores)."""
    from sveb.score.compare import published_scores
    views, builds = [], [store.Build.of(b) for b in bdirs]  # one handle per build: its manifest parsed once
    known = {b.path.resolve(): b for b in builds}  # ... for every reader, the scope captions' too
    for build in builds:
        scores = read_scores(build) if (build / "scores").exists() else []
        if scores or published is not None:
            view = load_view(build, scores)
            if published is not None:
                published_scores(view, published)
            views += [view] if view.scores else []
    out = []
    for group in pools(views, allow):
        if len(group) == 1:
            out += _rows_of(group[0], "build", known)
        else:
            out += _rows_of(merge(group), "pooled", known)
            for v in group:
                out += _rows_of(v, "seed", known)
    return sorted(out, key=lambda r: (r["model"], r["domain"], _proto(r["protocol"]), KINDS.index(r["kind"]),
                                      r["seeds"], row_order(r["estimator"]), r["params"] or ""))


def write_csv(rows_: list[dict], out: str | Path) -> Path:
    """The CSV, and beside it NAME.scope.txt: each table's scope (policy, budget, sources, dtype, ...), so the CSV
    stays one row per score."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns(), extrasaction="ignore")
        w.writeheader()
        for r in rows_:
            w.writerow({k: metrics.csv_cell(k, v) for k, v in r.items()})
    tables = {(r["model"], r["domain"], r["build_fp"]): r["scope"] for r in rows_
              if r.get("scope") and r.get("kind") != "seed"}
    if tables:
        out.with_name(f"{out.stem}.scope.txt").write_text("\n\n".join(
            f"{m} · {d} · build{'s' if '+' in fp else ''} {fp.replace('+', ', ')}\n{scope.caption(s)}"
            for (m, d, fp), s in tables.items()) + "\n", encoding="utf-8")
    return out


def _default_params(name: str) -> dict | None:
    """The estimator's default parameters, or None when it cannot be built here."""
    pj = default_params(name)
    return None if pj is None else json.loads(pj)


def labels(params: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """(estimator, params_fp) -> display name, from the params JSON of each; parameters are shown only
    where they differ from the default (or, when the default is unknown, where settings differ); a training-seed
    replicate (the default's settings but its `seed`) is "NAME (training seed K)"."""
    by_name: dict[str, dict[tuple[str, str], dict]] = {}  # today's name (current_name) -> settings
    for (name, pfp), pj in params.items():
        try:
            p = json.loads(pj or "{}")
        except json.JSONDecodeError:
            p = {}
        by_name.setdefault(current_name(name, pj), {})[(name, pfp)] = p  # pj None: settings unknown
    out = {}
    for name, sets in by_name.items():
        default = _default_params(name) if any(sets.values()) else {}
        varying = {k for p in sets.values() for k in p if len({json.dumps(q.get(k)) for q in sets.values()}) > 1}
        for key, p in sets.items():
            shown = {k: x for k, x in p.items() if (default.get(k) != x if default is not None else k in varying)}
            if default and SEED in default and set(shown) == {SEED}:
                out[key] = replicates.label(name, {"replicate_of": name, "training_seed": shown[SEED]})
                continue
            out[key] = name + (" (" + ", ".join(f"{k}={x}" for k, x in sorted(shown.items())) + ")"
                               if shown else "")
    for key, lab in list(out.items()):  # distinct settings must never share a name
        if sum(x == lab for x in out.values()) > 1:
            twin = sum(x == lab and k[1] == key[1] for k, x in out.items()) > 1  # one setting under two names
            out[key] = f"{lab} [{key[1][:6]}" + (f", stored as {key[0]}]" if twin else "]")
    return out


def _caveats(rs: list[dict]) -> str:
    """What the table mixes, let through by a flag (sveb.score.pool_checks), and the trained estimators whose
    verdict rests on one training (no training spread in its test: sveb.score.trainings)."""
    one = sorted({r["estimator"] for r in rs if r.get("trainings") == 1 and not r.get("replicate_of")})
    return "".join(f"\n{c}" for c in dict.fromkeys(x for r in rs for x in (r.get("caveats") or "").split(" | ") if x)) \
        + (f"\none training: {', '.join(one)} (its test has no training spread)" if one else "") \
        + "".join(f"\n{x}" for x in replicates.notes(rs))  # trained rows' captions


def _holm_ci(r: dict) -> str:
    lo, hi = r.get("delta_sq_holm_low"), r.get("delta_sq_holm_high")
    return f"[{metrics.fmt(lo, 'delta_sq_holm_low')}, {metrics.fmt(hi, 'delta_sq_holm_high')}]" \
        if metrics.ok(lo) and metrics.ok(hi) else metrics.MISSING


def _verdict(v: str | None, wide: bool) -> str:  # 80 columns: the CSV says it whole
    return metrics.fmt(v, "verdict") if wide or v != "no difference" else "no diff"


def _p(x) -> str:
    return metrics.fmt(x, "p_holm")


def _keq(r: dict) -> str:
    """k_eq, "worth k rollouts", at 80 columns: the value alone, or ">low" when no finite k matches (the
    debiased MSE is <= 0); --wide and the CSV give its interval."""
    if r.get("k_eq") == float("inf"):
        return metrics.fmt_ci(r, "k_eq", interval=True)
    return metrics.fmt(r.get("k_eq"), "k_eq")


def _table(title: str, caption: str | None, headers: list[str]) -> Table:
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left", show_edge=False)
    t.add_column(headers[0], overflow="fold", min_width=12)  # long names fold; numbers never wrap or cut
    for h in headers[1:]:
        t.add_column(h, justify="left" if h == "verdict" else "right", no_wrap=True)
    return t


def print_pivot(rows_: list[dict], console: Console, wide: bool = False) -> None:
    """One table per model, domain, build (or pool) and protocol, estimators as rows: MAE ± half-width of
    its 95% CI, the paired Δ of squared error against grpo ± half-width, the Holm-adjusted p and the verdict
    (fits 80 columns). `wide`: CIs as [low, high] and a second table with bias, calibration slope, ranking
    metrics and the own-outcome shift (about 110 columns). Pooled builds get a table of the paired Δ per seed."""
    shown = [r for r in rows_ if r.get("kind", "build") in ("build", "pooled")]
    names = labels({(r["estimator"], r["params_fp"]): r["params"] for r in rows_})
    tables: dict[tuple, list[dict]] = {}
    for r in sorted(shown, key=lambda r: (r["model"], r["domain"], r["build_fp"], _proto(r["protocol"]))):
        tables.setdefault((r["model"], r["domain"], r["build_fp"], r["protocol"]), []).append(r)
    scoped = set()
    for (model, domain, fp, proto), rs in tables.items():
        rs.sort(key=lambda r: (row_order(r["estimator"]), r["params"] or ""))
        if rs[0].get("scope") and (model, domain, fp) not in scoped:  # once per build or pool, one line
            scoped.add((model, domain, fp))
            console.print(scope.line(rs[0]["scope"], min(console.width, 80)), markup=False, highlight=False,
                          no_wrap=True, overflow="ellipsis")
        seeds = rs[0].get("seeds") or ""
        what = f"{rs[0].get('n_states')} states, {rs[0].get('n_problems')} problems" + (
            f", seeds {seeds}" if rs[0].get("kind") == "pooled" else "")
        title = f"{model} · {domain} · {proto}" + (" (paper)" if proto == "in-group" else "") + (
            " · paper's build protocol" if rs[0].get("build_protocol") == "paper" else "") + f"\n{what}"
        own = proto == "in-group" and not wide
        keq = not (own or wide)  # 80 columns: k_eq beside MAE under held-out (in-group shows own); --wide: below
        caption = (("k_eq: worth k rollouts (MCS@k of equal squared error); " if keq else "")
                   + f"Δ sq err: paired vs {BASELINE}, < 0 better; p: Holm-adjusted within the declared family; "
                   + ("[95% CI], Holm CI: the interval at Holm's level" if wide else "± 95% CI half-width")
                   + ("; own: own-outcome share" if own else "") + _caveats(rs))
        headers = ["estimator", "MAE", *(["k_eq"] if keq else []), f"Δ sq err vs {BASELINE}", "p", "verdict",
                   *(["own"] if own else []), *(["Holm CI", "family"] if wide else [])]
        cells = [[_label(names, r), metrics.fmt_ci(r, "mae", wide), *([_keq(r)] if keq else []),
                  metrics.fmt_ci(r, "delta_sq", wide), _p(r.get("p_holm")), _verdict(r.get("verdict"), wide),
                  *([metrics.fmt(r.get("own_share"), "own_share")] if own else []),
                  *([_holm_ci(r), r.get("family") or ""] if wide else [])] for r in rs]
        pad = [""] * (3 + keq + own + 2 * wide)
        cells += [["[dim]oracle floor[/]", f"[dim]{metrics.fmt(rs[0].get('oracle_floor'), 'oracle_floor')}[/]", *pad],
                  ["[dim]ref noise[/]", f"[dim]{metrics.fmt(rs[0].get('ref_noise'), 'ref_noise')}[/]", *pad]]
        if wide:  # CIs as [low, high] run past 80 columns: as many tables as the terminal needs
            _split_tables(title, caption, [c[0] for c in cells],
                          [(h, [c[i] for c in cells]) for i, h in enumerate(headers) if i], console)
        else:
            t = _table(title, caption, headers)
            for c in cells:
                t.add_row(*c)
            console.print(t)
        if wide:  # the metric table's terminal metrics (sveb.core.metrics), with their CIs as [low, high]
            metric_tables(f"{model} · {domain} · {proto}: bias, calibration, ranking, own-outcome shift",
                           "bias: estimate − reference; slope: reference on estimate (1: calibrated); concord: "
                           "within-problem pairs; sign: same-rollout step advantage (pairs); own: |Δ| when the "
                           "state's own reward flips", rs, names, metrics.shown(metrics.TERMINAL), console)
            metric_tables(f"{model} · {domain} · {proto}: rollout-equivalents and neighbouring benchmarks' metrics",
                           "k_eq: worth k rollouts [95% CI]; spearman: noise-corrected (in: within problem); ECE: "
                           "l2, noise-debiased; AUROC: of the own outcome (held-out); top-1: sibling choice (chance "
                           "beside); drop F1: value-drop localisation (docs/statistics.md)",
                           rs, names, metrics.shown(metrics.NEIGHBOURS), console)
        if rs[0].get("kind") == "pooled":
            _print_seeds(rows_, rs, names, console)
    _print_spread(rows_, console)


def _label(names: dict, r: dict) -> str:
    """A row's name in the MAE table: a default row tested over N trainings is "NAME (mean of N trainings)"."""
    name = names[(r["estimator"], r["params_fp"])]
    return name if r.get("replicate_of") else replicates.label(name, r)


def metric_tables(title: str, caption: str, rs: list[dict], names: dict, more: list, console: Console) -> None:
    """The metric columns `more` beside the estimator names (`_split_tables`)."""
    _split_tables(title, caption, [names[(r["estimator"], r["params_fp"])] for r in rs],
                  [(m.header, [metrics.cell(r, m, True) for r in rs]) for m in more], console)


def _split_tables(title: str, caption: str | None, label: list[str], cols: list[tuple[str, list[str]]],
                  console: Console) -> None:
    """Columns (header, cells) beside the row labels, in as many tables as the terminal's width needs: at 80
    columns one wide table would squeeze the labels out and cut the values."""
    from rich.measure import Measurement

    def table(group: list[int], title: str = "", caption: str | None = None, cut: int | None = 30) -> Table:
        t = _table(title, caption, ["estimator", *(cols[i][0] for i in group)])
        for j, name in enumerate(label):
            t.add_row(name[:cut], *(cols[i][1][j] for i in group))  # measured with labels up to 30: longer fold
        return t
    unbounded = console.options.update(width=10_000)  # the table's natural width, not the terminal's
    groups: list[list[int]] = [[]]
    for i in range(len(cols)):  # a column joins the group while the group's table still fits unsqueezed
        if groups[-1] and Measurement.get(console, unbounded, table(groups[-1] + [i])).maximum > console.width:
            groups.append([])
        groups[-1].append(i)
    for n, g in enumerate(groups):
        console.print(table(g, title + (f" ({n + 1}/{len(groups)})" if len(groups) > 1 else ""),
                            caption if n == len(groups) - 1 else None, cut=None))


def _print_spread(rows_: list[dict], console: Console) -> None:
    """Trained estimators scored with several training seeds (`-P seed=K`): mean ± sd over those seeds."""
    found = replicates.of_rows(rows_)
    if not found:
        return
    t = _table("Training seeds: spread of trained estimators", "mean ± sd over training seeds (ddof 1); verdict: "
               "the test over trainings (each replicate alone is not a verdict of the estimator)",
               ["estimator", "protocol", "seeds", "MAE", "Δ sq err", "verdict"])
    for r, c in zip(found, replicates.cells(found)):
        t.add_row(f"{c[2]} · {r['domain']}", c[1], c[3], c[4], c[5], _verdict(c[6], False))
    console.print(t)


def _print_seeds(rows_: list[dict], pooled: list[dict], names: dict, console: Console) -> None:
    """The paired Δ of each seed's build alone: the spread over seeds behind the pooled row."""
    key = {(r["model"], r["domain"], r["protocol"]) for r in pooled}
    fps = set(pooled[0]["build_fp"].split("+"))
    seed_rows = [r for r in rows_ if r.get("kind") == "seed" and r["build_fp"] in fps
                 and (r["model"], r["domain"], r["protocol"]) in key]
    seeds = sorted({r["seeds"] for r in seed_rows}, key=lambda s: (len(s), s))
    t = _table(f"Δ sq err vs {BASELINE} per seed", None, ["estimator", *(f"seed {s}" for s in seeds)])
    for r in pooled:
        if r["estimator"] == BASELINE:
            continue
        by = {x["seeds"]: x for x in seed_rows if (x["estimator"], x["params_fp"]) == (r["estimator"], r["params_fp"])}
        t.add_row(names[(r["estimator"], r["params_fp"])],
                  *(metrics.fmt(by.get(s, {}).get("delta_sq"), "delta_sq") for s in seeds))
    console.print(t)
