"""How much within-problem signal the probe's features hold at all: a feature ceiling for `probe`.

The probe's model (same features, offset, PCA and C chosen by grouped CV) fitted on the *benchmark's own*
Monte-Carlo-labelled states, cross-fitted by problem: each state is valued by a fit on the other folds'
problems only, so neither its own reference nor any state of its problem is seen. This is not an estimator
(it learns from benchmark references, which no estimator may read); it asks what the features give with the
best labels this budget has: 24 draws per state on the benchmark's own distribution. If this ceiling does not
beat grpo clearly, more train data of the outcome kind will not either: the features are the limit.
`--no-hidden` drops the hidden block (entropies, position and the group offset only), which says what the
hidden states add.

    python benchmarks/probe_ceiling.py --root ROOT --seeds 0,1,2 [--folds 5] [--no-hidden] [--layer -3]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from sveb.core.errors import UsageError
from sveb.estimators import make
from sveb.evaluate.context import prepare
from sveb.score import scoring
from sveb.score.compare import default_key
from sveb.score.pooling import load_view, read_scores
from sveb.store.builds import find_seed_builds, load_build


def design(data, est) -> dict[str, np.ndarray]:
    """The probe's row for every state of one build (in states-table order) and its MC label."""
    H, S, off, y, n = [], [], [], [], []
    for s in data.states:
        pid, i, t = s["problem_id"], s["rollout_idx"], s["t"]
        tr = est._group_tracks(pid, {t})
        others = [r for r in data.rollouts[pid] if r["rollout_idx"] != i]  # never the own outcome
        h, x, o = est._row(tr[i].prefix(t), t, [tr[r["rollout_idx"]] for r in others],
                           [float(r["reward"]) for r in others])
        ref = data.references[s["state_id"]]
        draws = list(ref["mc_rewards"]) + list(ref["extra_rewards"] or [])
        H.append(h), S.append(x), off.append(o), y.append(float(np.mean(draws))), n.append(float(len(draws)))
    return {k: np.array(v) for k, v in (("H", H), ("S", S), ("off", off), ("y", y), ("n", n))}


def cross_fit(d: dict, clusters: np.ndarray, folds: int, cs: list[float], pca: int, seed: int) -> np.ndarray:
    """Out-of-fold predictions: GroupKFold over problems, the probe's own CV for C inside each training part."""
    from sklearn.model_selection import GroupKFold

    from sveb.estimators.probe_fit import fit_cv
    out = np.full(len(d["y"]), np.nan)
    problems = len(set(clusters))
    if problems < 3:  # a training part must hold >= 2 problems, which the probe's own grouped CV needs
        raise SystemExit(f"probe_ceiling: {problems} problem(s) on these builds; cross-fitting needs 3")
    for tr, te in GroupKFold(min(folds, problems)).split(d["H"], d["y"], clusters):
        m = fit_cv(d["H"][tr], d["S"][tr], d["off"][tr], d["y"][tr], d["n"][tr], clusters[tr], cs, 5, pca, seed, True)
        out[te] = np.clip(m.predict(d["H"][te], d["S"][te], d["off"][te]), 0.0, 1.0)
    return out


def stored(view, name: str) -> np.ndarray:
    """The held-out estimates of `name` at its default settings (`sveb compare`'s choice), NaN if none."""
    try:
        return view.est[default_key(view, name, "held-out")]
    except UsageError:
        return np.full(len(view.ref), np.nan)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--domain", default="number")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--no-hidden", action="store_true")
    ap.add_argument("--layer", type=int, default=-1,
                    help="hidden layer (the probe's `layer`; -3 is cached by the critics)")
    a = ap.parse_args(argv)
    parts, views = [], []
    for bdir in find_seed_builds(a.root, a.model, a.domain, [int(s) for s in a.seeds.split(",")]):
        data = load_build(bdir)
        est = make("probe", {"layer": a.layer})
        prepare(est, data)
        d = design(data, est)
        if a.no_hidden:
            d["H"] = np.zeros((len(d["y"]), 1))
        parts.append(d)
        views.append(load_view(bdir, read_scores(bdir)))
    d = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    clusters = np.concatenate([np.array([f"{v.bdir.name}/{p}" for p in v.pid], dtype=object) for v in views])
    ref = np.concatenate([v.ref for v in views])
    cs = [float(c) for c in make("probe", {}).cs.split(",")]
    ceiling = cross_fit(d, clusters, a.folds, cs, 0 if a.no_hidden else make("probe", {}).pca, 0)
    out = {"states": int(len(ref)), "problems": int(len(set(clusters))), "hidden": not a.no_hidden, "layer": a.layer,
           "mae": {"ceiling": float(np.abs(ceiling - ref).mean())}, "vs": {}}
    for name in ("grpo", "probe", "mcs-2", "mcs-3"):
        other = np.concatenate([stored(v, name) for v in views])
        ok = np.isfinite(other)
        if not ok.all():
            continue
        out["mae"][name] = float(np.abs(other - ref).mean())
        r = scoring.paired_sq_diff(ceiling, other, ref, clusters)
        out["vs"][name] = {k: r[k] for k in ("delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p_delta")}
    for name, r in out["vs"].items():
        print(f"ceiling - {name}: {r['delta_sq']:+.4f} [{r['delta_sq_ci_low']:+.4f}, {r['delta_sq_ci_high']:+.4f}]"
              f" p {r['p_delta']:.3g}")
    print("MAE " + ", ".join(f"{k} {v:.4f}" for k, v in out["mae"].items()))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
