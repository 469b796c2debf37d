"""Any two estimators on the same states (`sveb compare`): the paired Δ of squared error of A against each B,
seeds pooled, with the leaderboard's own procedure (sveb.score.scoring: cluster-robust t over problems). The
leaderboard pairs every estimator with grpo only; this answers "is A closer than B" for a chosen pair. The p is
unadjusted: whoever picks several pairs corrects for them (a pre-registered single comparison needs none)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from sveb.core import metrics
from sveb.core.errors import UsageError
from sveb.estimators.families import current_name, defaults
from sveb.score import scoring


def default_key(view, name: str, protocol: str) -> tuple:
    """The estimate of `name` at its default settings (its only key, or the one whose params are the declared
    default, sveb/estimators/defaults.json); UsageError naming what is there when it has none."""
    keys = [k for k in view.est if k[2] == protocol  # a row stored under an old name is found by today's
            and current_name(k[0], view.params.get(k[:2])) == name]
    want = defaults().get(name)

    def params(k):
        try:
            return json.loads(view.params.get(k[:2]) or "{}")
        except json.JSONDecodeError:
            return None
    best = [k for k in keys if want is not None and params(k) == want] or keys
    if not best:
        have = sorted({k[0] for k in view.est if k[2] == protocol})
        raise UsageError(f"{name}: no {protocol} estimates on these builds (scored: {', '.join(have) or 'none'}; "
                         f"run `sveb eval -e {name}` first)")
    return best[0]


PUBLISHED = Path("results") / "table4" / "estimates.parquet"  # Table 4's per-state estimates, in a clone


def published_for(root: Path) -> Path:
    """The committed Table 4 estimates that go with builds under `root`: the clone's results/table4/estimates.parquet
    found from the root upwards (`--root results/table4/exports` run from any folder), else the working folder's."""
    for d in (Path(root).resolve(), *Path(root).resolve().parents):
        for p in (d / "estimates.parquet", d / PUBLISHED):
            if p.is_file() and p.parent.name == "table4":
                return p
    return PUBLISHED


def with_published(view, path: Path = PUBLISHED) -> list[str]:
    """Adds to a one-build view the per-state estimates a committed table holds for the same build (by its
    build_fp; columns build_fp, state_id, estimator, params_fp, protocol, value), for each (estimator, protocol)
    the view has none of: an estimator scored here on an export sits beside the published ones on the same
    states, and the one scored here wins. Returns the estimators added."""
    import pyarrow.parquet as pq

    from sveb.core import schema
    if not Path(path).exists():
        return []
    build = view.build
    fp = build.manifest.build_fp
    rows = pq.read_table(path, filters=[("build_fp", "=", fp)]).to_pylist() if fp else []
    index = {s: i for i, s in enumerate(build.table("states", schema.STATES).column("state_id").to_pylist())}
    have = {(k[0], k[2]) for k in view.est}
    added = set()
    for r in rows:
        if (r["estimator"], r["protocol"]) in have or r["state_id"] not in index:
            continue
        key = (r["estimator"], r["params_fp"], r["protocol"])
        arr = view.est.setdefault(key, np.full(len(view.ref), np.nan))
        view.shift.setdefault(key, np.full(len(view.ref), np.nan))  # not published: no own-outcome shift
        arr[index[r["state_id"]]] = np.nan if r["value"] is None else r["value"]
        added.add(r["estimator"])
    return sorted(added)


def published_scores(view, path: Path = PUBLISHED) -> list[dict]:
    """`with_published`, then a score row (today's procedure, sveb.score.pooling.rescore) for each estimate it
    added, appended to view.scores: the leaderboard shows the published estimators beside one's own. Their
    settings are not in the table: each row's params are None (unknown, not "{}", which names a setting: numca
    with "{}" is SVEB's earlier numca-sveb) under its published params_fp, and its name is already today's."""
    from sveb.score.pooling import rescore
    added = set(with_published(view, path))
    have = {(r["estimator"], r["params_fp"], r["protocol"]) for r in view.scores}
    fp = view.build.manifest.build_fp
    stored = {k: [{"model": view.model, "domain": view.domain, "build_fp": fp, "estimator": k[0], "params": None,
                   "params_fp": k[1], "protocol": k[2]}] for k in view.est if k[0] in added and k not in have}
    rows = rescore(view, stored)
    view.scores = view.scores + rows
    return rows


def compare(view, a: str, others: list[str], protocol: str = "held-out") -> list[dict]:
    """One row per B: states, Δ sq err of A minus B, its 95% CR1 interval and the unadjusted p."""
    x = view.est[default_key(view, a, protocol)]
    out = []
    for b in others:
        y = view.est[default_key(view, b, protocol)]
        ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(view.ref)
        r = scoring.paired_sq_diff(x[ok], y[ok], view.ref[ok], view.problem[ok])
        out.append({"a": a, "b": b, "protocol": protocol, "n_states": int(ok.sum()),
                    "n_problems": len(set(view.problem[ok])), **r})
    return out


def line(r: dict, seeds: str) -> str:
    return (f"{r['a']} - {r['b']} ({r['protocol']}, {r['n_states']} states, seeds {seeds}): Δ sq err "
            f"{metrics.fmt_ci(r, 'delta_sq', interval=True)}, "
            f"p {r['p_delta']:.3g} (unadjusted)")
