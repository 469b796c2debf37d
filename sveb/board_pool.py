"""The board's per-state views: one per registered build (only accepted bundles' estimates), their paired
verdicts, and the pooled table of builds that differ only in their seed (as `sveb leaderboard` pools them)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

PROTOCOLS = ("held-out", "in-group")


def clean(x):
    """NaN -> None for JSON (strict JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return clean(x.item())
    return x


def view_of(bdir: Path, data, rows: list[dict]):
    """The board's per-state view of one build: references, clusters, and only the accepted bundles' estimates
    (never what the build folder may hold of its own)."""
    from sveb.pooling import View
    st = data.states
    pid = np.array([s["problem_id"] for s in st], dtype=object)
    t, T = (np.array([s[c] for s in st], dtype=float) for c in ("t", "T"))
    return View(bdir, str(data.manifest.get("model")), str(data.manifest.get("domain")), "", rows, pid,
                np.array([data.references[s["state_id"]]["value"] for s in st], dtype=float),
                np.divide(t, T, out=np.full(len(t), np.nan), where=T > 0), pid=pid,
                rollout=np.array([s["rollout_idx"] for s in st]), t=t, bdirs=[bdir], bidx=np.zeros(len(st), int),
                seeds=[(data.manifest.get("config") or {}).get("seed")],
                n_ref=int(data.references[st[0]["state_id"]]["n_ref"]) if st else 20)


def write_verdicts(view, rows: list[dict]) -> None:
    """Paired Δ vs grpo and Holm verdicts (pooling.paired: the leaderboard's own families) into `rows`."""
    from sveb.pooling import paired
    for proto in PROTOCOLS:
        cmp = paired(view, proto)
        for r in rows:
            if r["protocol"] == proto:
                c = cmp.get((r["estimator"], r["params_fp"]), {})
                r.update({k: clean(c.get(k)) for k in ("delta_sq", "delta_sq_ci_low", "delta_sq_ci_high",
                                                        "p_delta", "p_holm")},
                         verdict=c.get("verdict") or ("baseline" if r["estimator"] == "grpo" else "n/a"))


def pooled_rows(views: dict[str, object]) -> list[dict]:
    """Builds of one config that differ only in their seed, pooled as the leaderboard pools them: states
    concatenated, clusters (build, problem), MAE and paired Δ recomputed on the pooled states, Holm per pooled
    table. An estimator is pooled over the seeds it was submitted on (`n_builds` says how many)."""
    from sveb.pooling import merge, pools
    out = []
    for group in pools(list(views.values())):
        if len(group) < 2:
            continue
        hashes = [h for v in group for h, w in views.items() if w is v]
        pooled = merge(group)
        rows = []
        for r in pooled.scores:
            mine = [x for v in group for x in v.scores
                    if (x["estimator"], x["params_fp"], x["protocol"]) == (r["estimator"], r["params_fp"], r["protocol"])]
            n = sum(x["n_states"] for x in mine)
            rows.append({**r, "kind": "pooled", "content_hash": "+".join(hashes),
                         "build_fp": "+".join(str(x["build_fp"]) for x in mine),
                         "seeds": ",".join(str(v.seeds[0]) for v in group), "bundle": "+".join(x["bundle"] for x in mine),
                         **{k: sum((x.get(k) or 0.0) * x["n_states"] for x in mine) / n
                            for k in ("seconds_per_state", "forward_tokens_per_state", "extra_tokens_per_state")
                            if all(isinstance(x.get(k), (int, float)) for x in mine)}})
        write_verdicts(pooled, rows)
        out += [{k: clean(x) for k, x in r.items()} for r in rows]
    return out
