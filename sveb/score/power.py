"""Power and heterogeneity of the paired comparisons against the baseline. Pure numpy/scipy, no I/O.

- `mde`: the minimum detectable Δ at a given power of that t-test: the smallest true |Δ| that a two-sided
  test at level `alpha / m` on G - 1 degrees of freedom rejects with probability `power`.
- `power`: the other way round: the probability that the same test rejects when the true Δ has a given size
  (a pre-registered study's power, results/confirm-2/).
- `cochran_q` / `interaction`: is one estimator's Δ against the baseline the same in every domain? Cochran's Q
  on the per-domain Δ estimates weighted by 1 / se², chi-square on D - 1 degrees of freedom, with I²; the
  estimators of one protocol form a Holm family of their own.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2
from scipy.stats import t as student_t

from sveb.score import scoring

POWER = 0.80


def mde(se: float, df: int, alpha: float = scoring.ALPHA, m: int = 1, power: float = POWER) -> float:
    """Minimum detectable |Δ| of a two-sided t-test with standard error `se` on `df` degrees of freedom at
    level alpha / m with the given power: (t_{1 - alpha / (2 m), df} + t_{power, df}) * se (the usual
    normal-shift approximation of the noncentral t; within about 1% of it for df >= 20).

    Table 4 passes m = the Holm family's size: alpha / m is the level Holm's first (most stringent) step
    tests at, and no member of the family is ever tested at a stricter one, so a true Δ of this size is
    detected with at least the stated power whatever rank its p takes in the family: an upper bound on
    the detectable Δ, never an optimistic one. NaN without a finite positive se or with df < 1."""
    if not (np.isfinite(se) and se > 0) or df is None or df < 1 or m < 1:
        return float("nan")
    q = student_t.ppf(1 - alpha / (2 * m), df) + student_t.ppf(power, df)
    return float(q * se)


def power(delta: float, se: float, df: float, alpha: float = scoring.ALPHA, m: int = 1) -> float:
    """Probability that a two-sided t-test at level alpha / m on `df` degrees of freedom rejects when the true Δ is
    `delta` and its estimate has standard error `se`: the noncentral t with noncentrality |Δ| / se, both tails.
    power(mde(se, df), se, df) is about POWER; power(0, ...) is alpha / m. NaN without a finite positive se."""
    from scipy.stats import nct
    if not (np.isfinite(se) and se > 0) or not np.isfinite(delta) or df is None or df < 1 or m < 1:
        return float("nan")
    q, nc = student_t.ppf(1 - alpha / (2 * m), df), abs(delta) / se
    return float(nct.sf(q, df, nc) + nct.cdf(-q, df, nc))


def cochran_q(delta, se) -> dict:
    """Cochran's Q test of "every entry estimates the same Δ": weights w = 1 / se², pooled Δ = Σ w Δ / Σ w,
    Q = Σ w (Δ - pooled)², p = P(chi²_{k-1} > Q) over the k entries with a finite Δ and a finite positive se
    (others are left out), I² = max(0, (Q - (k - 1)) / Q) (0 when Q = 0): the share of the spread between
    entries beyond what their own noise explains. NaN below 2 usable entries."""
    d, s = np.asarray(delta, float), np.asarray(se, float)
    ok = np.isfinite(d) & np.isfinite(s) & (s > 0)
    k = int(ok.sum())
    if k < 2:
        return {"k": k, "pooled": float("nan"), "pooled_se": float("nan"), "q": float("nan"), "df": max(k - 1, 0),
                "p": float("nan"), "i2": float("nan")}
    w = 1.0 / s[ok] ** 2
    pooled = float((w * d[ok]).sum() / w.sum())
    q = float((w * (d[ok] - pooled) ** 2).sum())
    df = k - 1
    return {"k": k, "pooled": pooled, "pooled_se": float(np.sqrt(1.0 / w.sum())), "q": q, "df": df,
            "p": float(chi2.sf(q, df)), "i2": float(max(0.0, (q - df) / q)) if q > 0 else 0.0}


def interaction(cells: list[dict], alpha: float = scoring.ALPHA) -> list[dict]:
    """Domain x estimator interaction: per (protocol, estimator), `cochran_q` over its per-domain paired Δ
    (cells: dicts with protocol, estimator, domain, delta_sq, delta_sq_se), then Holm over the estimators of
    one protocol (a family of its own: the question differs from the per-cell comparisons). Rows in first-seen
    order: protocol, estimator, domains (k), pooled Δ and se, Q, df, p, I², Holm p, and `differs` (Holm p < alpha;
    None where fewer than 2 domains leave nothing to test)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for c in cells:
        groups.setdefault((c["protocol"], c["estimator"]), []).append(c)
    rows = []
    for (protocol, name), cs in groups.items():
        res = cochran_q([c["delta_sq"] for c in cs], [c["delta_sq_se"] for c in cs])
        rows.append({"protocol": protocol, "estimator": name, "domains": res["k"], "pooled_delta_sq": res["pooled"],
                     "pooled_se": res["pooled_se"], "q": res["q"], "df": res["df"], "p": res["p"], "i2": res["i2"]})
    for protocol in dict.fromkeys(r["protocol"] for r in rows):
        fam = [r for r in rows if r["protocol"] == protocol]
        for r, p in zip(fam, scoring.holm([r["p"] for r in fam])):
            r["p_holm"] = float(p)
            r["differs"] = bool(p < alpha) if np.isfinite(p) else None  # None: fewer than 2 domains
    return rows
