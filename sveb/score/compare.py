"""Any two estimators on the same states (`sveb compare`): the paired Δ of squared error of A against each B,
seeds pooled, with the leaderboard's own procedure (sveb.score.scoring: cluster-robust t over problems). The
leaderboard pairs every estimator with grpo only; this answers "is A closer than B" for a chosen pair. The p is
unadjusted: whoever picks several pairs corrects for them (a pre-registered single comparison needs none)."""

from __future__ import annotations

import json

import numpy as np

from sveb.core import metrics
from sveb.core.errors import UsageError
from sveb.score import scoring
from sveb.estimators.families import defaults


def default_key(view, name: str, protocol: str) -> tuple:
    """The estimate of `name` at its default settings (its only key, or the one whose params are the declared
    default, sveb/estimators/defaults.json); UsageError naming what is there when it has none."""
    keys = [k for k in view.est if k[0] == name and k[2] == protocol]
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
