"""The board's paired verdicts per build view (filled with accepted bundles' estimates only), and the pooled
table of builds that differ only in their seed (as `sveb leaderboard` pools them)."""

from __future__ import annotations

import math

import numpy as np

from sveb.core import metrics
from sveb.estimators import BASELINE
from sveb.evaluate.protocols import PROTOCOLS


def clean(x):
    """NaN -> None for JSON (strict JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return clean(x.item())
    return x


def write_verdicts(view, rows: list[dict]) -> None:
    """Paired Δ vs the baseline (the registry's role "baseline": grpo) and Holm verdicts (pooling.paired: the
    leaderboard's own families) into `rows`; a trained estimator's default row tested over its trainings shows
    the mean over them of MAE and its CI (pooling.over_trainings_row), its replicates the verdict "replicate"."""
    from sveb.score.pooling import over_trainings_row, paired  # scipy
    for proto in PROTOCOLS:
        cmp = paired(view, proto)
        for r in rows:
            if r["protocol"] == proto:
                c = cmp.get((r["estimator"], r["params_fp"]), {})
                r.update({k: clean(c.get(k)) for k in metrics.paired_columns() if k != "verdict"},
                         verdict=c.get("verdict") or ("baseline" if r["estimator"] == BASELINE else "n/a"))
                r.update({k: clean(x) for k, x in over_trainings_row(c).items()})


def current_names(rows: list[dict]) -> list[dict]:
    """The rows under the names their readings have today (sveb.estimators.families.current_name: a bundle stored
    SVEB's earlier numca as `numca`, today's `numca-sveb`); the bundles and scored/ keep what was submitted."""
    from sveb.estimators.families import current_name
    for r in rows:
        r["estimator"] = current_name(r["estimator"], r.get("params"))
    return rows


def pooled_rows(views: dict[str, object]) -> list[dict]:
    """Builds of one config that differ only in their seed, pooled as the leaderboard pools them: states
    concatenated, clusters by problem identity, MAE and paired Δ recomputed on the pooled states, Holm per pooled
    table. An estimator is pooled over the seeds it was submitted on (`n_builds` says how many)."""
    from sveb.score.pooling import merge, pools  # scipy
    out = []
    hash_of = {id(v): h for h, v in views.items()}
    for group in pools(list(views.values())):
        if len(group) < 2:
            continue
        hashes = [hash_of[id(v)] for v in group]
        pooled = merge(group)
        rows = []
        for r in pooled.scores:
            ident = (r["estimator"], r["params_fp"], r["protocol"])
            mine = [x for v in group for x in v.scores if (x["estimator"], x["params_fp"], x["protocol"]) == ident]
            n = sum(x["n_states"] for x in mine)
            rows.append({**r, "kind": "pooled", "content_hash": "+".join(hashes),
                         "build_fp": "+".join(str(x["build_fp"]) for x in mine),
                         "seeds": ",".join(str(v.seeds[0]) for v in group),
                         "bundle": "+".join(x["bundle"] for x in mine),
                         **{k: sum((x.get(k) or 0.0) * x["n_states"] for x in mine) / n
                            for k in ("seconds_per_state", "forward_tokens_per_state", "extra_tokens_per_state")
                            if all(isinstance(x.get(k), (int, float)) for x in mine)}})
        write_verdicts(pooled, rows)
        out += [{k: clean(x) for k, x in r.items()} for r in rows]
    return out
