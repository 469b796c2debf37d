"""Calibration against the reference (the PRM calibration study's metric), with the reference's noise removed from
each bin. Pure numpy.

States are binned by their estimate (BINS equal-width bins on [0, 1]; w_b the share of states in bin b). A bin's
mean reference is its mean true value plus noise of variance s_b = sum_i V_i(1-V_i)/n / n_b^2, estimated without
bias by sum_i ref_i(1-ref_i)/(n-1) / n_b^2. So:
- reliability (squared calibration error) = sum_b w_b [(mean f - mean ref)^2 - s_b]: unbiased for
  sum_b w_b (mean f - mean V)^2; `ece` is its square root (an l2 ECE; 0 when the debiased square is <= 0),
  `ece_raw` the plain l2 ECE against the reference, biased upwards by the noise;
- resolution = sum_b w_b [(mean ref_b - mean ref)^2] - sum_b w_b (1 - w_b) s_b: unbiased for the spread of the
  bins' true means, sum_b w_b (mean V_b - mean V)^2;
- brier = mean [(f - ref)^2 + ref(1 - ref)] = the mean over states and draws of (f - y)^2, which is unbiased for
  the Brier score against a fresh continuation's outcome, E[(f - V)^2 + V(1 - V)]: no correction needed.
"""

from __future__ import annotations

import numpy as np

BINS = 10


def _bins(est: np.ndarray, bins: int) -> np.ndarray:
    return np.clip(np.floor(np.asarray(est, float) * bins).astype(int), 0, bins - 1)


def calibration(est: np.ndarray, ref: np.ndarray, n_ref: int, bins: int = BINS) -> dict:
    """ece, ece_raw, brier, brier_reliability, brier_resolution (see the module's docstring); NaN for no state."""
    est, ref = np.asarray(est, float), np.asarray(ref, float)
    keys = ("ece", "ece_raw", "brier", "brier_reliability", "brier_resolution")
    if len(est) == 0 or n_ref < 2:
        return dict.fromkeys(keys, float("nan"))
    noise = ref * (1 - ref) / (n_ref - 1)
    b = _bins(est, bins)
    rel_raw = rel = res_raw = res = 0.0
    n, mean_ref = len(est), float(ref.mean())
    for k in np.unique(b):
        i = b == k
        w, s = i.sum() / n, noise[i].sum() / i.sum() ** 2
        gap2 = (est[i].mean() - ref[i].mean()) ** 2
        spread2 = (ref[i].mean() - mean_ref) ** 2
        rel_raw, rel = rel_raw + w * gap2, rel + w * (gap2 - s)
        res_raw, res = res_raw + w * spread2, res + w * (spread2 - (1 - w) * s)
    return {"ece": float(np.sqrt(max(rel, 0.0))), "ece_raw": float(np.sqrt(rel_raw)),
            "brier": float(np.mean((est - ref) ** 2 + ref * (1 - ref))),
            "brier_reliability": float(rel), "brier_resolution": float(res)}


def truth(est: np.ndarray, v: np.ndarray, bins: int = BINS) -> dict:
    """The same quantities against known true values (simulations and tests): reliability and resolution of the
    bins' true means, the Brier score's expectation E[(f - V)^2 + V(1 - V)]."""
    est, v = np.asarray(est, float), np.asarray(v, float)
    b = _bins(est, bins)
    rel = res = 0.0
    for k in np.unique(b):
        i = b == k
        w = i.sum() / len(est)
        rel += w * (est[i].mean() - v[i].mean()) ** 2
        res += w * (v[i].mean() - v.mean()) ** 2
    return {"brier_reliability": rel, "brier_resolution": res, "ece": float(np.sqrt(rel)),
            "brier": float(np.mean((est - v) ** 2 + v * (1 - v)))}
