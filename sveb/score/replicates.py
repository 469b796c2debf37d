"""Training-seed replicates of trained estimators: the spread of their scores, apart from the verdicts.

A trained estimator (ppo-1, ppo-n, pacs, probe, ...) scored again with `-P seed=K` differs from its default row
only in the seed of its training. Such replicate rows say how much a result moves with the training draw
(mean ± sd of MAE and of the paired Δ over the seeds); they are not new estimators, so each is tested alone
(family `alone`, unadjusted), never enters, or weakens, the headline families, and its verdict reads REPLICATE
rather than better / worse / no difference: the estimator's verdict is its default row's, tested over its
trainings (sveb.score.pooling), whose MAE is then the mean over them.
"""

from __future__ import annotations

import json

import numpy as np

from sveb.core import metrics
from sveb.core.errors import SvebError
from sveb.estimators import make, params_json
from sveb.estimators.families import defaults

SEED = "seed"
REPLICATE = "replicate"  # the verdict column of a replicate row: tested alone, not a verdict of the estimator
_defaults: dict[str, str | None] = {}


def default_params(name: str) -> str | None:
    """The estimator's default params JSON: a builtin's from the declared defaults (sveb.estimators.families,
    no import, so the same without torch), any other's by building it; None when it cannot be built here (not
    installed, or its import fails). Any other error is a bug and raises."""
    if name not in _defaults:
        if name in defaults():
            _defaults[name] = json.dumps(defaults()[name], sort_keys=True)
            return _defaults[name]
        try:
            _defaults[name] = params_json(make(name))
        except (SvebError, ImportError):
            _defaults[name] = None
    return _defaults[name]


def _params(pj) -> dict:
    try:
        return json.loads(pj or "{}") if isinstance(pj, str) else dict(pj or {})
    except json.JSONDecodeError:
        return {}


def _without_seed(p: dict) -> dict:
    return {k: v for k, v in p.items() if k != SEED}


def seed_of(params_json, default_json) -> int | None:
    """The training seed of a row whose settings are the default's but for `seed` (the default row itself
    included), else None: an ablation, or an estimator without a seed."""
    p, d = _params(params_json), _params(default_json)
    if SEED not in d or _without_seed(p) != _without_seed(d):
        return None
    return p.get(SEED, d[SEED])


def training_seed(params_json, default_json) -> int | None:
    """The training seed of a replicate row (its settings differ from the default only in a non-default
    `seed`), else None: default rows and other settings are not replicates."""
    seed = seed_of(params_json, default_json)
    return None if seed is None or seed == _params(default_json)[SEED] else seed


def label(name: str, r: dict) -> str:
    """How a table names a trained estimator's row: "NAME (training seed K)" for a replicate, "NAME (mean of N
    trainings)" for a default row tested over N trainings (its MAE, Δ and verdict), else NAME."""
    if r.get("replicate_of"):
        return f"{name} (training seed {r.get('training_seed')})"
    n = r.get("trainings")
    return f"{name} (mean of {n} trainings)" if isinstance(n, (int, float)) and n > 1 else name


MEAN_NOTE = ("NAME (mean of N trainings): a trained estimator scored at N training seeds (`-P seed=K`); its MAE "
             "[CI], Δ, p and verdict are the test over those trainings, the between-training spread in its SE "
             "(docs/statistics.md, Over trainings), as in Table 4; its other metrics are the default training's.")
REPLICATE_NOTE = ("NAME (training seed K): one of those trainings alone, a replicate, tested alone (p unadjusted); "
                  "its verdict says replicate, not better or worse: the estimator's verdict is its default row's.")


def notes(rows: list[dict]) -> list[str]:
    """The caption lines every surface (terminal, report, site) prints under a table with trained estimators
    tested over their trainings, or with replicate rows: one wording, kept here with `label`."""
    out = [MEAN_NOTE] if any(isinstance(r.get("trainings"), (int, float)) and r["trainings"] > 1
                             and not r.get("replicate_of") for r in rows) else []
    return out + ([REPLICATE_NOTE] if any(r.get("replicate_of") for r in rows) else [])


def spread(rows: list[dict], defaults: dict[str, str | None]) -> list[dict]:
    """One row per (model, domain, protocol, pool, estimator) with at least two training seeds scored: the
    seeds, mean ± sd (ddof=1) of MAE and of the paired Δ of squared error over them, and the verdict of the test
    over trainings. Where the default row was tested over its trainings (sveb.score.pooling: `trainings` > 1) the
    row is its numbers: MAE and Δ the means over trainings on the states all of them scored, `mae_training_sd`
    and `training_sd` their sds; else each seed's row's own MAE and Δ, and no verdict (none tests them together).
    `defaults`: estimator -> its default params JSON (None: unknown here, so no replicates are recognised)."""
    groups: dict[tuple, dict] = {}
    for r in rows:
        if r.get("kind", "build") not in ("build", "pooled"):
            continue
        seed = seed_of(r.get("params"), defaults.get(r["estimator"]))
        if seed is None:
            continue  # another setting (an ablation), or no training seed: not a replicate of the default
        key = (r["model"], r["domain"], r["protocol"], r.get("build_fp"), r["estimator"])
        groups.setdefault(key, {})[seed] = r
    out = []
    for (model, domain, protocol, fp, name), by_seed in groups.items():
        if len(by_seed) < 2:
            continue
        seeds = sorted(by_seed, key=str)
        row = {"model": model, "domain": domain, "protocol": protocol, "build_fp": fp, "estimator": name,
               "training_seeds": ",".join(map(str, seeds)), "n": len(seeds)}
        first = by_seed.get(_params(defaults.get(name)).get(SEED))
        if first is not None and (first.get("trainings") or 0) > 1:  # its numbers over trainings
            row.update(training_seeds=first.get("training_seeds") or row["training_seeds"], n=first["trainings"],
                       verdict=first.get("verdict") or metrics.MISSING)
            for col, sd in (("mae", "mae_training_sd"), ("delta_sq", "training_sd")):
                row[f"{col}_mean"], row[f"{col}_sd"] = (_num(first.get(c)) for c in (col, sd))
        else:
            for col in ("mae", "delta_sq"):
                x = np.array([_num(by_seed[s].get(col)) for s in seeds], float)
                x = x[np.isfinite(x)]
                row[f"{col}_mean"] = float(x.mean()) if len(x) else float("nan")
                row[f"{col}_sd"] = float(x.std(ddof=1)) if len(x) > 1 else float("nan")
            row["verdict"] = metrics.MISSING
        out.append(row)
    return out


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else float("nan")


HEADER = ["domain", "protocol", "estimator", "training seeds", "MAE mean ± sd", "Δ sq err mean ± sd",
          "verdict over trainings"]


def _pm(m: float, s: float, name: str) -> str:
    """mean ± sd, the mean as its metric shows it (sveb.core.metrics)."""
    v = metrics.fmt(m, name)
    return v if not (metrics.ok(m) and metrics.ok(s)) else f"{v} ± {s:.{metrics.metric(name).decimals}f}"


def cells(spread_rows: list[dict]) -> list[list[str]]:
    """The spread rows as table cells (HEADER's columns)."""
    return [[r["domain"], r["protocol"], r["estimator"], r["training_seeds"], _pm(r["mae_mean"], r["mae_sd"], "mae"),
             _pm(r["delta_sq_mean"], r["delta_sq_sd"], "delta_sq"), r["verdict"]] for r in spread_rows]


def of_rows(rows: list[dict]) -> list[dict]:
    """`spread` with each estimator's default settings looked up in the registry."""
    return spread(rows, {n: default_params(n) for n in {r["estimator"] for r in rows}})
