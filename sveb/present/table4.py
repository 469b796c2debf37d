"""Table 4 of the paper as SVEB writes it: estimators as rows, domains as columns, MAE [95% CI] against MCS@n_ref
and the paired verdict against the baseline; and the per-stage cost of a build.

The verdict comes from the per-state difference of squared errors (reference noise cancels in it), tested
by sveb.score.pooling / sveb.score.scoring (cluster-robust over problems) with Holm's correction over each estimator
family of one domain and protocol. Every cell publishes its Δ, CI, p, Holm p and, beside each "no difference", the
minimum detectable Δ (sveb.score.power); the domain x estimator interaction is Cochran's Q
(sveb.score.power.interaction).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sveb.core import metrics
from sveb.core.cost import BUILD_STAGES
from sveb.estimators import BASELINE
from sveb.estimators.families import ALONE, family_size
from sveb.present.report_format import md_table
from sveb.score import scoring
from sveb.score.pooling import View, paired
from sveb.score.power import mde
from sveb.score.replicates import default_params


def verdicts(est: dict[str, np.ndarray], base: str, ref: np.ndarray, groups: np.ndarray,
             trainings: dict[str, dict[int, np.ndarray]] | None = None) -> dict[str, dict]:
    """Each estimator against `base` on one domain and protocol, by the leaderboard's own code
    (sveb.score.pooling.paired, which calls sveb.score.scoring): paired Δ of squared error with its CR1 CI and p, Holm
    within the estimator's declared family (sveb.estimators.families: members not in the table count as p = 1,
    so a cell's verdict never depends on which others were scored), the Holm-adjusted interval, the verdict;
    plus the CR1 standard error of Δ, its G - 1 degrees of freedom, the family and its size m, and the minimum
    detectable Δ at 80% power (sveb.score.power.mde at alpha / m: see there why that level).
    `trainings`: a trained estimator's replicate trainings, estimator -> {training seed: per-state array}; its
    test is then the test over all its trainings (sveb.score.trainings via pooling.paired: the mean Δ, its SE
    with the between-training variance), and `trainings` and `training_sd` say how many and how far apart."""
    protocol = "table4"
    ref = np.asarray(ref, float)
    groups = np.asarray(groups, dtype=object)
    key = {n: (BASELINE if n == base else n) for n in est}  # pooling pairs against the registered baseline
    if base not in est or sum(k == BASELINE for k in key.values()) != 1:
        raise ValueError(f"verdicts: the baseline '{base}' must be among the estimates, once")
    view = View(Path("."), "", "", "table4", [], groups, ref, np.full(len(ref), np.nan),
                est={(key[n], "", protocol): np.asarray(v, float) for n, v in est.items()})
    for n, by_seed in (trainings or {}).items():  # replicates: pooling recognises them by their params' seed
        if n in est and n != base and default_params(n) is not None:
            for seed, arr in by_seed.items():
                view.est[(n, f"seed{seed}", protocol)] = np.asarray(arr, float)
                view.params[(n, f"seed{seed}")] = json.dumps({**json.loads(default_params(n)), "seed": seed},
                                                              sort_keys=True)
    res = paired(view, protocol)
    out = {}
    for n in est:
        if n == base:
            continue
        r = res[(key[n], "")]
        m = 1 if r["family"] == ALONE else family_size(r["family"])
        se, df = float(r["delta_sq_se"]), int(r["df"])
        out[n] = {"d_sq": r["delta_sq"], "d_lo": r["delta_sq_ci_low"], "d_hi": r["delta_sq_ci_high"],
                  "d_se": se, "df": df, "p": r["p_delta"], "p_holm": float(r["p_holm"]),
                  "h_lo": r["delta_sq_holm_low"], "h_hi": r["delta_sq_holm_high"], "family": r["family"],
                  "m": int(m), "verdict": r["verdict"], "mde": mde(se, df, scoring.ALPHA, int(m)),
                  "trainings": r.get("trainings"), "training_sd": r.get("training_sd")}
    return out


COLUMNS = ("domain", "estimator", "protocol", "n_states", "mae", "mae_ci_low", "mae_ci_high", "k_eq", "k_eq_ci_low",
           "k_eq_ci_high", "spearman", "delta_sq",
           "delta_sq_ci_low", "delta_sq_ci_high", "delta_sq_se", "df", "p", "family", "family_size", "p_holm",
           "delta_sq_holm_low", "delta_sq_holm_high", "verdict", "mde_80", "trainings", "training_sd", "estimates",
           "builds")


def cells(domain: str, est: dict[str, dict[str, np.ndarray]], base: str, ref: np.ndarray,
          groups: np.ndarray, builds: str = "", n_ref: int = 20, trainings: dict | None = None) -> list[dict]:
    """Every Table 4 cell of one domain from per-state arrays: est[protocol][estimator] (states in the order
    of ref and groups; NaN where a state has no estimate). One row per cell with COLUMNS: the MAE and its CI
    (sveb.score.scoring.mae_ci), the paired comparison with the baseline (`verdicts`) and, beside each "no
    difference", the minimum detectable Δ at 80% power (`mde_80`; blank elsewhere); beside MAE the rollout-
    equivalent k_eq [CI] (sveb.score.rollout_eq, from the `n_ref`-draw references) and the noise-corrected
    Spearman (sveb.score.ranks). The baseline's own row has no comparison. `builds`: the pooled builds'
    fingerprints ("+"-joined), stored with every row. `trainings`: trainings[protocol][estimator][seed], a
    trained estimator's replicate trainings (verdicts): its MAE is then the mean over its trainings (the default
    one and the replicates, on the states all of them scored) with the CI of the test over trainings applied to
    the absolute errors (sveb.score.trainings.mae_over_trainings); k_eq and Spearman stay the default training's."""
    from sveb.score.ranks import rank_metrics
    from sveb.score.rollout_eq import k_eq
    from sveb.score.trainings import mae_over_trainings
    ref = np.asarray(ref, float)
    groups = np.asarray(groups, dtype=object)
    rows = []
    for protocol, by in est.items():
        reps = (trainings or {}).get(protocol, {})
        v = verdicts(by, base, ref, groups, reps) if base in by else {}
        for name, arr in by.items():
            arr = np.asarray(arr, float)
            ok = np.isfinite(arr) & np.isfinite(ref)
            c = v.get(name)
            mae, lo, hi = scoring.mae_ci(arr[ok], ref[ok], groups[ok])
            if c is not None and (c["trainings"] or 0) > 1:  # the mean over trainings, as its test
                runs = [arr, *(np.asarray(a, float) for a in reps[name].values())]
                both = ok & np.logical_and.reduce([np.isfinite(a) for a in runs])
                # the CI of the test over trainings (its SE carries their spread), as the Δ beside it and the
                # leaderboard's row (sveb.score.pooling._trainings): a per-state CI would under-cover
                acc = mae_over_trainings([a[both] for a in runs], ref[both], groups[both])
                mae, lo, hi = acc["delta_sq"], acc["delta_sq_ci_low"], acc["delta_sq_ci_high"]
            row = {"domain": domain, "estimator": name, "protocol": protocol, "n_states": int(ok.sum()),
                   "mae": mae, "mae_ci_low": lo, "mae_ci_high": hi, **k_eq(arr[ok], ref[ok], n_ref, groups[ok]),
                   "spearman": rank_metrics(arr[ok], ref[ok], n_ref, groups[ok])["spearman"]}
            if c is None:
                row |= {k: "" for k in COLUMNS[COLUMNS.index("delta_sq"):-2]}
            else:
                row |= {"delta_sq": c["d_sq"], "delta_sq_ci_low": c["d_lo"], "delta_sq_ci_high": c["d_hi"],
                        "delta_sq_se": c["d_se"], "df": c["df"], "p": c["p"], "family": c["family"],
                        "family_size": c["m"], "p_holm": c["p_holm"], "delta_sq_holm_low": _blank(c["h_lo"]),
                        "delta_sq_holm_high": _blank(c["h_hi"]), "verdict": c["verdict"],
                        "mde_80": c["mde"] if c["verdict"] == "no difference" else "",
                        "trainings": _blank(c["trainings"]), "training_sd": _blank(c["training_sd"])}
            rows.append(row | {"estimates": "per state", "builds": builds})
    return rows


def _blank(x):
    return "" if x is None or (isinstance(x, float) and not np.isfinite(x)) else x


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


MISSING = "-"  # Table 4 keeps the paper's ASCII mark (results/table4 is compared byte for byte)
MARK = {"better": " ▲", "worse": " ▼", "no difference": " ="}


def cell(row: dict) -> str:
    """MAE [CI] and the verdict's mark; † where no per-state estimates were stored (no test)."""
    mark = MARK.get(row.get("verdict") or "", "")
    dagger = "" if row.get("estimates", "per state") == "per state" else " †"
    return f"{_num(row['mae']):.3f} [{_num(row['mae_ci_low']):.3f}, {_num(row['mae_ci_high']):.3f}]{mark}{dagger}"


def keq_cell(row: dict, seconds: float | None = None) -> str:
    """k_eq [95% CI] (">low" when no finite k matches), and the estimator's seconds per state when known."""
    r = {k: _num(row.get(k)) for k in ("k_eq", "k_eq_ci_low", "k_eq_ci_high")}
    out = metrics.fmt_ci(r, "k_eq", interval=True).replace(metrics.MISSING, MISSING)
    return out if seconds is None else f"{out} · {seconds:.3g} s"


def keq_markdown(rows: list[dict], domains: list[str], protocol: str, order: list[str],
                 seconds: dict[tuple[str, str, str], float] | None = None) -> str:
    """One protocol's rollout-equivalents: estimators as rows, domains as columns, k_eq [95% CI] · seconds per
    state (`seconds`: (domain, estimator, protocol) -> s/state, where recorded)."""
    by = {(r["estimator"], r["domain"]): r for r in rows if r["protocol"] == protocol}
    sec = seconds or {}
    return md_table(["estimator", *domains],
                    [[name, *(keq_cell(by[(name, d)], sec.get((d, name, protocol))) if (name, d) in by else MISSING
                              for d in domains)] for name in order])


def eval_seconds_per_state(timing: dict[str, dict[str, float]], states: dict[str, int],
                           builds: dict[str, list[str]]) -> dict[tuple[str, str, str], float]:
    """(domain, estimator, protocol) -> the estimator's own seconds per state (its "eval NAME (PROTOCOL)" timing,
    training included, summed over the domain's builds that recorded it, over their states)."""
    out: dict[tuple[str, str, str], list[float]] = {}
    for d, bs in builds.items():
        for b in bs:
            for k, v in timing.get(b, {}).items():
                if k.startswith("eval ") and k.endswith(")") and states.get(b):
                    name, proto = k[5:-1].rsplit(" (", 1)
                    acc = out.setdefault((d, name, proto), [0.0, 0.0])
                    acc[0], acc[1] = acc[0] + v, acc[1] + states[b]
    return {k: s / n for k, (s, n) in out.items() if n}


def rollout_seconds(timing: dict[str, dict[str, float]], states: dict[str, int], builds: list[str],
                    draws: int) -> float | None:
    """Seconds of one Monte-Carlo continuation: the references stage over its continuations (states x draws,
    the n_ref reference draws and the extra ones), over the builds that recorded it; None when none did."""
    done = [b for b in builds if "references" in timing.get(b, {}) and states.get(b)]
    n = sum(states[b] for b in done) * draws
    return sum(timing[b]["references"] for b in done) / n if n else None


def markdown(rows: list[dict], domains: list[str], protocol: str, order: list[str]) -> str:
    """One protocol's table: estimators as rows, domains as columns, MAE [CI] with the verdict's mark."""
    by = {(r["estimator"], r["domain"]): r for r in rows if r["protocol"] == protocol}
    return md_table(["estimator", *domains],
                    [[name, *(cell(by[(name, d)]) if (name, d) in by else MISSING for d in domains)] for name in order])


def _signed(x, digits: int = 4) -> str:
    return metrics.fmt(_num(x), "", digits, signed=True, missing=MISSING)


def _p(x) -> str:  # the paper's style: 4 decimals, "<1e-4"
    x = _num(x)
    return MISSING if not np.isfinite(x) else ("<1e-4" if x < 1e-4 else f"{x:.4f}")


def details_markdown(rows: list[dict], domains: list[str], protocol: str, order: list[str]) -> str:
    """The numbers behind one protocol's marks, one line per cell: Δ of squared error vs the baseline [95% CI],
    the CR1 p, the Holm family and its size, the Holm p, the verdict, the minimum detectable Δ (80% power at
    alpha / m) beside each "no difference", and a trained estimator's trainings (with the sd of their Δ)."""
    by = {(r["estimator"], r["domain"]): r for r in rows if r["protocol"] == protocol}
    lines = []
    for name in order:
        for d in domains:
            r = by.get((name, d))
            if r is None or r.get("verdict") in (None, "") or r.get("delta_sq") in (None, ""):
                continue  # the baseline, or a cell without per-state estimates (untested)
            lines.append([name, d, f"{_signed(r['delta_sq'])} [{_signed(r['delta_sq_ci_low'])}, "
                                   f"{_signed(r['delta_sq_ci_high'])}]", f"{_num(r['delta_sq_se']):.4f}",
                          _p(r["p"]), f"{r['family']} ({r['family_size']})", _p(r["p_holm"]), r["verdict"],
                          f"{_num(r['mde_80']):.4f}" if r.get("mde_80") not in (None, "") else "", _trainings(r)])
    return md_table(["estimator", "domain", "Δ sq err [95% CI]", "se", "p", "Holm family (m)", "Holm p", "verdict",
                     "MDE 80%", "trainings (sd of Δ)"], lines, right_from=2)


def _trainings(r: dict) -> str:
    """A trained estimator's trainings and the sd of their Δ ("3 (0.0012)"); "1" for one; blank when untrained."""
    k = _num(r.get("trainings"))
    if not np.isfinite(k):
        return ""
    return f"{int(k)} ({_num(r.get('training_sd')):.4f})" if k > 1 else f"{int(k)}"


def _fixed(x, digits: int = 2) -> str:
    return metrics.fmt(_num(x), "", digits, missing=MISSING)


def interaction_markdown(rows: list[dict]) -> str:
    """sveb.score.power.interaction's rows: Cochran's Q per estimator and protocol ("-": fewer than 2 domains)."""
    return md_table(["protocol", "estimator", "domains", "pooled Δ sq err", "Q", "df", "p", "I²", "Holm p",
                     "Δ differs between domains"],
                    [[r["protocol"], r["estimator"], r["domains"], _signed(r["pooled_delta_sq"]),
                      _fixed(r["q"]), r["df"], _p(r["p"]), _fixed(r["i2"]), _p(r["p_holm"]),
                      {True: "yes", False: "no"}.get(r["differs"], "-")] for r in rows], right_from=2)


def cost_markdown(timing: dict[str, dict[str, float]], states: dict[str, int], domains: list[str]) -> str:
    """Seconds per state of each stage (rows) in each domain (columns); '-' where a domain has no record of it.
    Stages keep their first-seen order: the build's, then the hidden pass, then the estimators'."""
    stages = sorted(dict.fromkeys(k for d in domains for k in timing.get(d, {})),
                    key=lambda k: (k.startswith("eval "), k.startswith("hidden")))
    return md_table(["stage", *domains],
                    [[k, *(f"{timing[d][k] / states[d]:.3f}" if k in timing.get(d, {}) and states.get(d) else "-"
                           for d in domains)] for k in stages])


SAMPLING = BUILD_STAGES  # screening, rollouts, references (timed by the build: sveb.sample.jobs.stage_clock)


def hidden_seconds(timing: dict[str, float]) -> float | None:
    """The shared hidden-state pass: as recorded, else as estimated from its cache files' write times."""
    return timing.get("hidden pass", timing.get("hidden pass (from cache file times)"))


def scoring_seconds(timing: dict[str, float]) -> float:
    """Seconds of scoring: the hidden pass and every estimator under both protocols."""
    return (hidden_seconds(timing) or 0.0) + sum(v for k, v in timing.items() if k.startswith("eval "))


def scoring_vs_sampling(timing: dict[str, dict[str, float]], builds: list[str]) -> list[dict]:
    """Per build: the seconds its sampling took (screening + rollouts + references, as timed by the run that
    sampled it), the seconds its scoring took (scoring_seconds, as recorded by the run that computed each part;
    a build scored after the domain's first also reuses what was trained on the shared train build), and their
    ratio. None where either is not recorded."""
    rows = []
    for b in builds:
        t = timing.get(b, {})
        sampled = sum(t[k] for k in SAMPLING if k in t) if any(k in t for k in SAMPLING) else None
        evals = sorted(((v, k[5:]) for k, v in t.items() if k.startswith("eval ")), reverse=True)
        scored = scoring_seconds(t) if evals else None
        hidden = hidden_seconds(t)
        rows.append({"build": b, "sampling s": None if sampled is None else round(sampled, 1),
                     "scoring s": None if scored is None else round(scored, 1),
                     "hidden pass s": None if hidden is None else round(hidden, 1),
                     "ratio": round(scored / sampled, 3) if sampled and scored is not None else None,
                     "dearest": ", ".join(f"{k} {v:.0f} s" for v, k in evals[:3])})
    return rows
