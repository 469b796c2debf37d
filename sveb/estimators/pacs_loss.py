"""PACS's kernels, model-free: the group's training loss (eq. 6-8 as the authors' code computes it), and a
state's RLOO-centred score psi and value V as `pacs` reads them out (SVEB's construction: PACS defines no V(s)).

The loss follows the PACS authors' public code (GitHub ritzz-ai/PACS @ bbe1dc6, src/pacs/pacs_core_algos.py:
`compute_reward` with reward_method "1", `compute_rloo_outcome_advantage`, `compute_weight` in "question" mode,
`compute_pacs_loss`), one group per call as their training script runs it (a micro-batch is one group):

  r_i = beta * log_ratio_sum_i,   psi_i = r_i - mean_{j != i} r_j,
  loss = 1/G sum_i w_i BCE-with-logits(psi_i, R_i)   (divided by G, not by the sum of the weights),

w = 1 unweighted; weighted (their default, USE_WEIGHT=True): scikit-learn's "balanced" class weights within the
group, w = G / (K n_c) for a rollout of class c (K distinct rewards; G / (2 n_c) for 0/1 rewards), cast to float32,
and 1 in a group with one outcome only. `run_case` computes one conformance case (tests/fixtures/conformance/pacs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import expit

from sveb.core.errors import UsageError

WEIGHTS = ("balanced", "none")          # `-P weight=`: the authors' class-balanced BCE, or the unweighted one
FINAL_BASELINES = ("full", "truncated")  # `-P final_baseline=`: the baseline of a state at its rollout's end
PSI_RTOL, LOSS_ATOL = 1e-9, 1e-6        # conformance: psi relative, loss and gradient absolute
VALUES = ("calibrated", "sigmoid")       # `-P value=`: how V is made of psi (SVEB's construction)


def base_rate(others: Sequence[float]) -> float:
    """The leave-one-out success rate of n other rollouts, clipped to [1/(2n), 1 - 1/(2n)] so its logit is
    finite (as if half a rollout had gone the other way); 1/2 without any."""
    n = len(others)
    if n == 0:
        return 0.5
    return float(np.clip(np.mean(others), 0.5 / n, 1 - 0.5 / n))


def pacs_value(psi: float, others: Sequence[float], how: str = "calibrated") -> float:
    """V of a state from its RLOO-centred score psi: sigma(logit p + psi) with p = base_rate(others)
    (calibrated), or sigma(psi) (sigmoid, PACS's training target)."""
    z = float(psi)
    if how == "calibrated":
        p = base_rate(others)
        z += float(np.log(p / (1 - p)))
    return float(1.0 / (1.0 + np.exp(-z)))


def logprob_temperature(param: float | None, manifest: dict, train_manifest: dict) -> tuple[float, str]:
    """The log-probabilities' temperature: `param`, else the benchmark build's sampling temperature (its rollouts
    are read out; the authors take log-probs at the rollout temperature), and a note when the train build was
    sampled at another one."""
    def sampled(m: dict):  # what the manifest recorded, not BuildConfig's default: a guessed T would mislead
        return (m.get("config") or {}).get("sampling", {}).get("temperature")
    T, note = param, ""
    if T is None:
        T = sampled(manifest)
        if T is None:
            raise UsageError("pacs: the build's manifest records no sampling temperature; "
                             "pass -P logprob_temperature=<T>")
        if sampled(train_manifest) not in (None, T):
            note = (f"the train build was sampled at temperature {sampled(train_manifest)}, the benchmark at {T}; "
                    f"log-probabilities at {T} (-P logprob_temperature= to choose)")
    if isinstance(T, bool) or not isinstance(T, (int, float)) or not T > 0:
        raise UsageError(f"-P logprob_temperature={T}: pacs needs a temperature > 0")
    return float(T), note


def balanced_weights(rewards: Sequence[float]) -> np.ndarray:
    """Per rollout, the authors' class-balanced weight (sklearn compute_class_weight("balanced") over the group's
    distinct rewards, stored in a float32 tensor): G / (K n_c) where the group has K > 1 outcomes, else 1.
    Returned as float64 holding the float32-rounded values."""
    R = np.asarray(rewards, dtype=np.float64)
    classes, idx, counts = np.unique(R, return_inverse=True, return_counts=True)
    if len(classes) < 2:
        return np.ones(len(R))
    w = (len(R) / (len(classes) * counts)).astype(np.float32)
    return w[idx].astype(np.float64)


def pacs_group(log_ratio_sum: Sequence[float], rewards: Sequence[float], beta: float,
               use_weight: bool) -> tuple[np.ndarray, float, np.ndarray]:
    """(psi per rollout, the group's loss, dLoss/d log_ratio_sum per rollout) of one group, float64."""
    x = np.asarray(log_ratio_sum, dtype=np.float64)
    R = np.asarray(rewards, dtype=np.float64)
    G = len(x)
    if G < 2 or len(R) != G:
        raise ValueError(f"pacs_group: {G} log-ratio sums and {len(R)} rewards (RLOO needs >= 2 of each, equal)")
    r = beta * x
    psi = r - (r.sum() - r) / (G - 1)
    w = balanced_weights(R) if use_weight else np.ones(G)
    loss = float(np.mean(w * (np.logaddexp(0.0, psi) - R * psi)))
    g = w * (expit(psi) - R) / G                       # dLoss/dpsi_i
    return psi, loss, beta * (g - (g.sum() - g) / (G - 1))  # through psi_j = r_j - mean_{k != j} r_k


def rloo_coefficients(r: np.ndarray, R: np.ndarray) -> tuple[np.ndarray, float]:
    """dLoss/dr_i of the unweighted loss (r = beta * log_ratio_sum) and the loss (SVEB's loss before `weight`)."""
    _, loss, grad = pacs_group(r, R, 1.0, False)
    return grad, loss


def prefix_psi(own: np.ndarray, others: Sequence[np.ndarray], t: int, final_baseline: str = "full") -> float:
    """psi of the state cut after t response tokens of a rollout whose prefix scores are own = [r(0), ..., r(T)]
    (r(t) = beta * the sum of its first t log-ratios), others the prefix scores of the group's other rollouts:
    psi(t) = r(t) - mean_j r_j(min(t, T_j)), the others' prefixes of the same length (SVEB's construction; PACS
    scores whole responses only). At the rollout's end (t >= T) `full` takes the others' full sums r_j(T_j): the
    authors' sequence-level psi; `truncated` keeps the same-length baseline. 0 baseline without others."""
    end = len(own) - 1
    if t >= end and final_baseline == "full":
        base = [float(v[-1]) for v in others]
    else:
        base = [float(v[min(t, len(v) - 1)]) for v in others]
    return float(own[min(t, end)]) - (float(np.mean(base)) if base else 0.0)


def read_lengths(lengths: dict[int, int], states: Sequence[tuple[int, int]],
                 final_baseline: str = "full") -> dict[int, int]:
    """How many response tokens of each rollout of a group (`lengths`: rollout -> T) the psi of its states
    (rollout, t) reads through prefix_psi: r_j up to min(T_j, the largest t); every token where a state sits at
    its rollout's end under `full` (the others' full sums). Positions past it need no log-probabilities."""
    if not states:
        return {i: 0 for i in lengths}
    if final_baseline == "full" and any(t >= lengths[i] for i, t in states):
        return dict(lengths)
    top = max(t for _, t in states)
    return {i: min(T, top) for i, T in lengths.items()}


def run_case(case: dict) -> dict:
    """One conformance case (a pacs.jsonl line) -> {"psi": [...], "loss": float, "grad_log_ratio_sum": [...]}."""
    psi, loss, grad = pacs_group(case["log_ratio_sum"], case["rewards"], float(case["beta"]), bool(case["use_weight"]))
    return {"psi": psi.tolist(), "loss": loss, "grad_log_ratio_sum": grad.tolist()}


def mismatches(case: dict, got: dict | None = None) -> list[str]:
    """What of `got` (run_case's answer by default) misses the case's `expected` beyond the tolerances; [] conforms."""
    got = run_case(case) if got is None else got
    exp, out = case["expected"], []
    psi, want = np.asarray(got["psi"], dtype=np.float64), np.asarray(exp["psi"], dtype=np.float64)
    if psi.shape != want.shape or np.any(np.abs(psi - want) > PSI_RTOL * np.abs(want)):
        out.append(f"psi {psi.tolist()} != {want.tolist()}")
    if not abs(float(got["loss"]) - float(exp["loss"])) <= LOSS_ATOL:
        out.append(f"loss {got['loss']} != {exp['loss']}")
    grad, gw = np.asarray(got["grad_log_ratio_sum"], dtype=np.float64), np.asarray(exp["grad_log_ratio_sum"])
    if grad.shape != gw.shape or np.any(np.abs(grad - gw) > LOSS_ATOL):
        out.append(f"grad_log_ratio_sum {grad.tolist()} != {gw.tolist()}")
    return out
