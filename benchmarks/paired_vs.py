"""Paired Δ of squared error between any two estimators on the same states, seeds pooled (clusters: the problems,
a problem two seeds drew being one), held-out: e.g. the probe against MCS@2 and MCS@3, which the leaderboard compares only with grpo.

    python benchmarks/paired_vs.py --root ROOT --seeds 0,1,2 --a probe --b mcs-2 --b mcs-3
"""

from __future__ import annotations

import argparse

import numpy as np

from sveb.score import scoring
from sveb.store.builds import find_seed_builds
from sveb.score.pooling import load_view, merge, read_scores


def default_key(view, name: str, protocol: str):
    """The estimate of `name` with its default settings (its only key, or the one whose params are the default)."""
    from sveb.score.replicates import default_params
    keys = [k for k in view.est if k[0] == name and k[2] == protocol]
    want = default_params(name)
    best = [k for k in keys if view.params.get(k[:2]) == want] or keys
    if not best:
        raise SystemExit(f"{name}: no {protocol} estimates under these builds")
    return best[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--domain", default="number")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--protocol", default="held-out")
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", action="append", required=True)
    a = ap.parse_args(argv)
    bdirs = find_seed_builds(a.root, a.model, a.domain, [int(s) for s in a.seeds.split(",")])
    v = merge([load_view(b, read_scores(b)) for b in bdirs])
    x = v.est[default_key(v, a.a, a.protocol)]
    for name in a.b:
        y = v.est[default_key(v, name, a.protocol)]
        ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(v.ref)
        r = scoring.paired_sq_diff(x[ok], y[ok], v.ref[ok], v.problem[ok])
        print(f"{a.a} - {name} ({a.protocol}, {int(ok.sum())} states, seeds {a.seeds}): Δ sq err "
              f"{r['delta_sq']:+.4f} [{r['delta_sq_ci_low']:+.4f}, {r['delta_sq_ci_high']:+.4f}], "
              f"p {r['p_delta']:.3g} (unadjusted)")


if __name__ == "__main__":
    main()
