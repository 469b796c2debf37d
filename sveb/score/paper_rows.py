"""The Hista/Numca authors' MCS@k "noise" rows: k of the same n reference draws (`--preset paper`, issue 31).

Their `noise_maes` draws one k-subset of a state's reference draws at random; here each state's error is its exact
expectation over the k-subsets (`subset_errors`), so a row's MAE carries no subsampling noise. The rows are shown
as `mcs-K-ref`, beside SVEB's independent-draw `mcs-K` rows. The build side of the protocol is sveb.sample.paper.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from sveb.estimators import BASELINE

REF_KS = (1, 2, 3, 4)  # the authors' noise rows shown (k of the n reference draws)
REF_SUFFIX = "-ref"


def subset_errors(rewards: Sequence[float], k: int) -> tuple[float, float]:
    """(E|mean_S - mean|, E(mean_S - mean)^2) over every k-subset S of the n draws, exactly: their `noise_maes`
    draws one subset at random, whose expectation this is. 0/1 rewards: hypergeometric; others: every subset."""
    r = np.asarray(rewards, dtype=float)
    n = len(r)
    if not 1 <= k <= n:
        raise ValueError(f"k={k}: must be in [1, {n}]")
    target = float(r.mean())
    if np.all((r == 0) | (r == 1)):
        m, total = int(r.sum()), math.comb(n, k)
        a = s = 0.0
        for j in range(max(0, k - (n - m)), min(k, m) + 1):
            w = math.comb(m, j) * math.comb(n - m, k - j) / total
            a += w * abs(j / k - target)
            s += w * (j / k - target) ** 2
        return a, s
    if math.comb(n, k) > 2_000_000:
        raise ValueError(f"{math.comb(n, k)} subsets of {n} non-binary rewards: too many to enumerate")
    means = np.array([r[list(c)].mean() for c in itertools.combinations(range(n), k)])
    return float(np.abs(means - target).mean()), float(((means - target) ** 2).mean())


def ref_name(k: int) -> str:
    return f"mcs-{k}{REF_SUFFIX}"


def is_ref_row(name: str) -> bool:
    return name.startswith("mcs-") and name.endswith(REF_SUFFIX)


def reference_draws(view) -> list[list[float]]:
    """Each state's reference draws, in the view's state order (builds concatenated as in a pooled view)."""
    from sveb import store
    from sveb.core import schema  # pyarrow
    out = []
    for bdir in view.bdirs:
        ids = store.read_table(bdir / "states", schema.STATES).column("state_id").to_pylist()
        refs = store.read_table(bdir / "references", schema.REFERENCES)
        by = dict(zip(refs.column("state_id").to_pylist(), refs.column("mc_rewards").to_pylist()))
        out += [list(by.get(s) or []) for s in ids]
    return out


def ref_rows(view, protocols: Sequence[str], ks: Sequence[int] = REF_KS) -> list[dict]:
    """The authors' MCS@k rows of a paper-protocol view, per protocol present (they read no group, so their errors
    are the same under both; the paired Δ is against that protocol's grpo). Per state, the error is its exact
    expectation over the k-subsets of the reference draws, so the row's MAE is E|mean_k - mean_n| averaged over
    states with no subsampling noise; its CI and tests are every row's (cluster-robust t, clusters by problem). The
    reference is not independent of these estimates (they share draws): that is the authors' definition, shown as
    such."""
    from sveb.score import scoring  # scipy
    draws = reference_draws(view)
    if len(draws) != len(view.ref) or not draws or any(not d for d in draws):
        return []  # no stored draws (an imported build): nothing to compute from
    n = min(len(d) for d in draws)
    out = []
    for protocol in protocols:
        base = sorted(k for k in view.est if k[0] == BASELINE and k[2] == protocol)
        b = view.est[base[0]] if base else np.full(len(view.ref), np.nan)
        rows = []
        for k in (k for k in ks if k < n):
            err = np.array([subset_errors(d, k) for d in draws])
            mae, lo, hi = scoring.mean_ci(err[:, 0], view.problem)
            d = err[:, 1] - (b - view.ref) ** 2
            ok = np.isfinite(d)
            delta, dlo, dhi = scoring.mean_ci(d[ok], view.problem[ok])
            rows.append({"model": view.model, "domain": view.domain, "estimator": ref_name(k), "params": "{}",
                         "params_fp": "subsets", "protocol": protocol, "build_fp": view.fp,
                         "n_states": len(err), "n_problems": len(set(view.problem)), "mae": mae, "mae_ci_low": lo,
                         "mae_ci_high": hi, "rmse": float(np.sqrt(err[:, 1].mean())), "bias": 0.0,
                         "bias_ci_low": 0.0, "bias_ci_high": 0.0, "n_builds": len(view.bdirs),
                         "delta_sq": delta, "delta_sq_ci_low": dlo, "delta_sq_ci_high": dhi,
                         "p_delta": scoring.cluster_t_test(d[ok], view.problem[ok]) if ok.any() else float("nan")})
        for r, p in zip(rows, scoring.holm([r["p_delta"] for r in rows])):  # a Holm family of their own
            r["p_holm"] = float(p)
            r["verdict"] = scoring.verdict(r["delta_sq"], p)
        out += rows
    return out
