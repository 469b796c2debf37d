"""The protocol study's tables (sveb.experiment.protocols): scores.csv and protocols.md, from the settings' exports
(states, references) and the per-state estimates.

Within a setting every cell is Table 4's (sveb.present.table4.cells: MAE [CI]; the paired Δ of squared error vs
grpo on the same states, its CR1 t-test and Holm over the estimator's declared family); the authors' MCS@k rows
are sveb.score.paper_rows.ref_rows'. Against SVEB's preset, each row gets SVEB's verdict (flips: the verdicts
differ) and, on the problems both settings hold, the paired change of MAE and of the Δ vs grpo: per problem the
mean over its states in each setting, then a t-interval over problems (the same states where a setting shares
SVEB's, e.g. the continuation budget and the MCS@k definition)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sveb import store
from sveb.core import metrics
from sveb.estimators import BASELINE
from sveb.evaluate.protocols import PROTOCOLS
from sveb.experiment.table4_files import export_estimates, write_csv
from sveb.present import table4 as t4
from sveb.present.report_format import md_table
from sveb.score import paper_rows, scoring
from sveb.score.pooling import View

COLUMNS = ["setting", "domain", "choice", "estimator", "protocol", "n_states", "n_problems", "mae", "mae_ci_low",
           "mae_ci_high", "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p", "family", "p_holm", "verdict",
           "sveb_verdict", "flips_vs_sveb", "shared_problems", "d_mae_vs_sveb", "d_mae_ci_low", "d_mae_ci_high",
           "d_delta_sq_vs_sveb", "d_delta_sq_ci_low", "d_delta_sq_ci_high", "p_d_delta_sq", "p_d_delta_sq_holm",
           "reading"]
VERDICTS = ("better", "worse", "no difference")
POWER = "a change of power, not an effect"      # the verdict crossed the threshold, its Δ did not detectably move
EFFECT = "a change of the effect"              # the Δ of Δ is significant after Holm over the setting
KEPT = "the effect changed; the verdict did not"


def setting_cells(s, exports: Path, names: list[str], records: list[dict]) -> tuple[list[dict], dict]:
    """A setting's rows (COLUMNS up to `verdict`) and its per-state errors: (key, estimator, protocol) ->
    (problem, |error|, squared error minus grpo's). The MCS@k setting has the authors' rows alone (its other
    rows are SVEB's preset's); the paper's preset has them beside SVEB's independent-draw rows."""
    export = exports / (s.base if s.scored_as else s.key)
    ids, ref, groups, est = export_estimates(s.base if s.scored_as else s.key, export, names, records)
    ident = {"setting": s.key, "domain": s.domain, "choice": s.label}
    rows, errs = [], {}
    if not s.scored_as:
        for r in t4.cells(s.key, est, BASELINE, ref, groups):
            ok = np.isfinite(est[r["protocol"]][r["estimator"]]) & np.isfinite(ref)
            rows.append(ident | {k: r[k] for k in ("estimator", "protocol", "n_states", "mae", "mae_ci_low",
                                                    "mae_ci_high", "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high",
                                                    "p", "family", "p_holm", "verdict")}
                        | {"n_problems": len(set(groups[ok]))})
        for p, by in est.items():
            g = by.get(BASELINE, np.full(len(ref), np.nan))
            for n, v in by.items():
                errs[(s.key, n, p)] = (groups, np.abs(v - ref), (v - ref) ** 2 - (g - ref) ** 2)
    if s.scored_as == "ref" or s.group == "paper":
        r, e = _ref_cells(s, export, ref, groups, est)
        rows += [ident | x for x in r]
        errs |= e
    return rows, errs


def _ref_cells(s, export: Path, ref, groups, est) -> tuple[list[dict], dict]:
    """The authors' MCS@k rows (k of the same reference draws, exact over subsets: sveb.score.paper_rows.ref_rows,
    Holm over its four rows as over Table 4's MCS@k family) and their per-state errors."""
    base = {(BASELINE, "", p): est[p][BASELINE] for p in PROTOCOLS if BASELINE in est[p]}
    view = View(export, store.load_manifest(export).model, s.domain, "complete", [], groups, ref,
                np.full(len(ref), np.nan), est=base, bdirs=[export])
    rows, errs = [], {}
    for r in paper_rows.ref_rows(view, [k[2] for k in base]):
        rows.append({k: r[k] for k in ("estimator", "protocol", "n_states", "n_problems", "mae", "mae_ci_low",
                                       "mae_ci_high", "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p_holm",
                                       "verdict")} | {"p": r["p_delta"], "family": "their MCS@k"})
    draws = paper_rows.reference_draws(view)
    for k in sorted({int(r["estimator"].split("-")[1]) for r in rows}):
        e = np.array([paper_rows.subset_errors(d, k) for d in draws])
        for (_, _, p), g in base.items():
            errs[(s.key, paper_rows.ref_name(k), p)] = (groups, e[:, 0], e[:, 1] - (g - ref) ** 2)
    return rows, errs


def _per_problem(groups, x) -> dict:
    ok = np.isfinite(x)
    return {g: float(x[ok & (groups == g)].mean()) for g in set(groups[ok])}


def versus(mine, sveb) -> dict:
    """The paired change against SVEB's preset on the problems both hold: per problem, the mean over its states."""
    out = {}
    for name, i in (("d_mae", 1), ("d_delta_sq", 2)):
        a, b = _per_problem(mine[0], mine[i]), _per_problem(sveb[0], sveb[i])
        d = np.array([a[g] - b[g] for g in sorted(set(a) & set(b))])
        m, lo, hi = scoring.mean_ci(d) if len(d) else (float("nan"),) * 3
        out |= {f"{name}_vs_sveb": m, f"{name}_ci_low": lo, f"{name}_ci_high": hi, "shared_problems": len(d)}
        if name == "d_delta_sq":
            out["p_d_delta_sq"] = scoring.cluster_t_test(d) if len(d) else float("nan")
    return out


def compare(rows: list[dict], errs: dict, settings: list) -> list[dict]:
    """Each row with SVEB's verdict, whether it flips, and the paired change against SVEB's preset."""
    base_of = {s.key: s.base for s in settings}
    by = {(r["setting"], r["estimator"], r["protocol"]): r for r in rows}
    out = []
    for r in rows:
        mine = (r["setting"], r["estimator"], r["protocol"])
        theirs = (base_of[r["setting"]], r["estimator"].removesuffix(paper_rows.REF_SUFFIX), r["protocol"])
        sv = by.get(theirs, {}).get("verdict", "")
        new = {c: "" for c in COLUMNS} | r | {"sveb_verdict": sv}
        if r["estimator"] == BASELINE or mine == theirs:
            new["flips_vs_sveb"] = "-"
        else:
            new["flips_vs_sveb"] = "yes" if sv in VERDICTS and r["verdict"] in VERDICTS and sv != r["verdict"] \
                else "no" if sv in VERDICTS and r["verdict"] in VERDICTS else "n/a"
        if mine != theirs and mine in errs and theirs in errs:
            new |= versus(errs[mine], errs[theirs])
        out.append(new)
    readings(out)
    return out


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def readings(rows: list[dict]) -> None:
    """Holm over each setting's Δ of Δ (a family per setting: every estimator and protocol it compares with SVEB's
    preset; grpo's is 0 by construction and left out), and the reading each row allows: a flip whose Δ of Δ is
    significant after Holm is a change of the effect; any other flip is a change of power, not an effect (the
    verdict crossed the threshold while the Δ did not detectably move); a significant Δ of Δ without a flip says
    the effect changed and the verdict did not. A flip without shared problems has no Δ of Δ: untested."""
    fams: dict[str, list[dict]] = {}
    for r in rows:
        r["p_d_delta_sq_holm"], r["reading"] = "", ""
        if r["estimator"] != BASELINE and np.isfinite(_num(r.get("p_d_delta_sq"))):
            fams.setdefault(r["setting"], []).append(r)
    for fam in fams.values():
        for r, p in zip(fam, scoring.holm([_num(r["p_d_delta_sq"]) for r in fam])):
            r["p_d_delta_sq_holm"] = float(p)
    for r in rows:
        p = _num(r["p_d_delta_sq_holm"])
        sig = bool(np.isfinite(p) and p < scoring.ALPHA)
        if r["flips_vs_sveb"] == "yes":
            r["reading"] = (EFFECT if sig else POWER) if np.isfinite(p) else "untested: no problems shared"
        elif sig:
            r["reading"] = KEPT


def score(settings: list, exports: Path, names: list[str], records: list[dict], console) -> list[dict]:
    rows, errs = [], {}
    for s in settings:
        if not (exports / (s.base if s.scored_as else s.key) / "manifest.json").exists():
            console.print(f"[yellow]{s.key}: no export yet; not in the tables[/]")
            continue
        r, e = setting_cells(s, exports, names, records)
        rows += r
        errs |= e
    return compare(rows, errs, settings)


def _f(x, digits: int = 3, signed: bool = False) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "-"
    return metrics.fmt(x, "", digits, signed=signed, missing="-")


def _ci(r: dict, m: str, lo: str, hi: str, digits: int = 4, signed: bool = True) -> str:
    if r.get(m) in ("", None):
        return "-"
    return f"{_f(r[m], digits, signed)} [{_f(r[lo], digits, signed)}, {_f(r[hi], digits, signed)}]"


def _p(x) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return "-"
    return "-" if not np.isfinite(x) else ("<1e-4" if x < 1e-4 else f"{x:.4f}")


def markdown(rows: list[dict], settings: list, builds: list[dict], names: list[str]) -> str:
    md = ["# Protocol sensitivity: SVEB's preset, the paper's, and one of the paper's choices at a time", "",
          "Design and how to run it: docs/protocols.md. Cells: MAE against MCS@n_ref [95% CI] and the verdict of "
          f"the paired Δ of squared error vs {BASELINE} (▲ better, ▼ worse, = no difference; Holm over the "
          "estimator's family, as Table 4); ⇄ where the verdict differs from SVEB's preset on the same domain and "
          "protocol. scores.csv holds every number.", "", *lead(rows, settings), "## Settings", "",
          "build s: the wall time of the run that completed the build (the manifest's `seconds`); a build resumed "
          "over several runs counts its last run alone.", "",
          md_table(["setting", "departs from SVEB's preset by", "build", "problems", "states",
                    "problems shared with SVEB's", "build s"],
                   [[b["setting"], b["choice"], b["build"], b["problems"], b["states"], b["shared"], b["seconds"]]
                    for b in builds], right_from=3), ""]
    by = {(r["setting"], r["estimator"], r["protocol"]): r for r in rows}
    shown = names + sorted({r["estimator"] for r in rows if paper_rows.is_ref_row(r["estimator"])})
    for d in dict.fromkeys(s.domain for s in settings):
        cols = [s for s in settings if s.domain == d and any(r["setting"] == s.key for r in rows)]
        for p in PROTOCOLS:
            lines = []
            for n in shown:
                cells = ["-" if (r := by.get((s.key, n, p))) is None else t4.cell(r | {"estimates": "per state"})
                         + (" ⇄" if r["flips_vs_sveb"] == "yes" else "") for s in cols]
                if any(c != "-" for c in cells):
                    lines.append([n, *cells])
            md += [f"## {d}, {p}", "", md_table(["estimator", *(s.key for s in cols)], lines), ""]
    flips = [r for r in rows if r["flips_vs_sveb"] == "yes"]
    md += ["## Verdicts that flip against SVEB's preset", "",
           "Δ of Δ: the setting's Δ sq err vs grpo minus SVEB's, paired on the problems both hold; Holm p: over the "
           "setting's Δ of Δ (see the first table).", "",
           md_table(["setting", "estimator", "protocol", "SVEB's verdict", "verdict", "Δ sq err vs grpo [95% CI]",
                     "Δ of Δ vs SVEB [95% CI]", "p", "Holm p", "problems", "reading"],
                    [[r["setting"], r["estimator"], r["protocol"], r["sveb_verdict"], r["verdict"],
                      _ci(r, "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high"),
                      _ci(r, "d_delta_sq_vs_sveb", "d_delta_sq_ci_low", "d_delta_sq_ci_high"), _p(r["p_d_delta_sq"]),
                      _p(r["p_d_delta_sq_holm"]), r["shared_problems"], r["reading"]] for r in flips])
           if flips else "None.", "",
           "## The numbers behind each cell", "",
           md_table(["setting", "estimator", "protocol", "Δ sq err vs grpo [95% CI]", "p", "Holm p", "verdict",
                     "flips", "Δ MAE vs SVEB [95% CI]", "Δ of Δ vs SVEB [95% CI]", "p", "Holm p", "problems"],
                    [[r["setting"], r["estimator"], r["protocol"],
                      _ci(r, "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high"), _p(r["p"]), _p(r["p_holm"]),
                      r["verdict"] or "-", r["flips_vs_sveb"], _ci(r, "d_mae_vs_sveb", "d_mae_ci_low", "d_mae_ci_high"),
                      _ci(r, "d_delta_sq_vs_sveb", "d_delta_sq_ci_low", "d_delta_sq_ci_high"), _p(r["p_d_delta_sq"]),
                      _p(r["p_d_delta_sq_holm"]), r["shared_problems"]] for r in rows], right_from=3), ""]
    return "\n".join(md)


def lead(rows: list[dict], settings: list) -> list[str]:
    """The study's first table: per setting, its Δ of Δ family (how many comparisons, how many significant after
    Holm, its smallest Holm p) and its flips split by reading; then every significant Δ of Δ."""
    out = []
    for s in settings:
        fam = [r for r in rows if r["setting"] == s.key and r["p_d_delta_sq_holm"] != ""]
        if not fam:
            continue
        best = min(fam, key=lambda r: r["p_d_delta_sq_holm"])
        flips = [r for r in rows if r["setting"] == s.key and r["flips_vs_sveb"] == "yes"]
        out.append([s.key, str(len(fam)), str(sum(r["p_d_delta_sq_holm"] < scoring.ALPHA for r in fam)),
                    f"{best['estimator']} {best['protocol']}: "
                    f"{_ci(best, 'd_delta_sq_vs_sveb', 'd_delta_sq_ci_low', 'd_delta_sq_ci_high')}, "
                    f"Holm p {_p(best['p_d_delta_sq_holm'])}",
                    str(len(flips)), str(sum(r["reading"] == EFFECT for r in flips))])
    sig = [r for r in rows if r["p_d_delta_sq_holm"] != "" and r["p_d_delta_sq_holm"] < scoring.ALPHA]
    return ["## What each setting changes: its Δ of Δ, Holm over the setting", "",
            "Δ of Δ: an estimator's Δ sq err vs grpo in the setting minus on SVEB's preset, paired on the problems "
            "both hold (per problem the mean over its states, a t-interval over problems). A setting's family is "
            "every estimator and protocol it compares; Holm over it. A verdict that flips without a significant Δ of "
            f"Δ is **{POWER}**: it crossed the threshold while its Δ did not detectably move (more or fewer problems, "
            "another mix); only a significant Δ of Δ shows that the choice changed the effect. Any cause named for a "
            "flip beyond that is untested unless a row here tests it.", "",
            md_table(["setting", "Δ of Δ tested", "significant (Holm)", "smallest Holm p", "flips",
                      "flips with a significant Δ of Δ"], out, right_from=1) if out else "No setting shares problems "
            "with SVEB's preset yet.", "",
            "Significant after Holm over the setting:", "",
            md_table(["setting", "estimator", "protocol", "Δ of Δ vs SVEB [95% CI]", "p", "Holm p", "verdict",
                      "SVEB's verdict", "reading"],
                     [[r["setting"], r["estimator"], r["protocol"],
                       _ci(r, "d_delta_sq_vs_sveb", "d_delta_sq_ci_low", "d_delta_sq_ci_high"), _p(r["p_d_delta_sq"]),
                       _p(r["p_d_delta_sq_holm"]), r["verdict"], r["sveb_verdict"], r["reading"] or "-"]
                      for r in sig]) if sig else "None.", ""]


def build_rows(settings: list, exports: Path, rows: list[dict]) -> list[dict]:
    """One line per setting: its build, size and how many problems it shares with SVEB's preset."""
    out = []
    for s in settings:
        exp = exports / (s.base if s.scored_as else s.key)
        if not (exp / "manifest.json").exists():
            continue
        m = store.load_manifest(exp)
        shared = next((r["shared_problems"] for r in rows if r["setting"] == s.key and r["estimator"] != BASELINE
                       and r["shared_problems"] != ""), "-")
        out.append({"setting": s.key, "choice": s.label, "build": m.build_fp + (" (SVEB's)" if s.scored_as else ""),
                    "problems": m.n_problems, "states": m.n_states,
                    "shared": "-" if s.key == s.base else shared,
                    "seconds": "-" if s.scored_as else m.seconds})
    return out


def write_tables(out: Path, settings: list, exports: Path, names: list[str], records: list[dict], console) -> None:
    rows = score(settings, exports, names, records, console)
    if not rows:
        console.print("[yellow]no setting has an export yet: no tables written[/]")
        return
    write_csv(out / "scores.csv", rows)
    (out / "protocols.md").write_text(markdown(rows, settings, build_rows(settings, exports, rows), names))
    console.print(f"wrote {out / 'scores.csv'} and {out / 'protocols.md'}")
