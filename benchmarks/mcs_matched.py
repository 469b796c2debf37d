"""Monte Carlo at matched rollout counts on committed exports (issue 58.4): MCS@k, its empirical-Bayes shrinkage
(`mcs-eb-k`) and its control-variate form (`mcs-cv-k`) on the same states, held-out, against each export's
MCS@n_ref reference. Prints MAE, rollout-equivalents (k_eq = E[V(1-V)] / E[(estimate - V)^2], both read without
bias from the reference's draws: the number of fresh continuations with the same expected squared error), and
the paired Δ of squared error of each form against plain MCS@k at the same k
(< 0: closer; CI clustered by problem; the reference's noise cancels in it). No model, no store writes:

    python benchmarks/mcs_matched.py results/table4/exports/number results/table4/exports/math ...
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sveb import estimators as reg
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import estimate_all
from sveb.score.scoring import debiased_mse, paired_sq_diff
from sveb.store.builds import load_build


def fitted(name: str, data):
    est = reg.make(name)
    prepare(est, data)
    return est, estimate_all(est, data, "held-out", progress=False)[0]


def k_eq(v: np.ndarray, ref: np.ndarray, n: int) -> float:
    return float(np.mean(n / (n - 1) * ref * (1 - ref)) / debiased_mse(v, ref, n))


def main(paths: list[str]) -> None:
    print(f"{'build':<22} {'k':>2} {'form':<5} {'MAE':>7} {'k_eq':>6} {'Δsq vs MCS@k':>13} {'95% CI':>20}  fit")
    for p in paths:
        data = load_build(Path(p))
        ref = np.array([data.references[s["state_id"]]["value"] for s in data.states])
        pid = np.array([s["problem_id"] for s in data.states], dtype=object)
        n = int(data.references[data.states[0]["state_id"]]["n_ref"])
        name = Path(p).name
        for k in (1, 2, 3, 4):
            plain = fitted(f"mcs-{k}", data)[1]
            print(f"{name:<22} {k:>2} {'mcs':<5} {np.abs(plain - ref).mean():7.4f} {k_eq(plain, ref, n):6.2f}")
            for form in ("eb", "cv"):
                est, v = fitted(f"mcs-{form}-{k}", data)
                d = paired_sq_diff(v, plain, ref, pid)
                fit = ", ".join(f"{a}={b:.3g}" for a, b in est.diagnostics().items())
                print(f"{name:<22} {k:>2} {form:<5} {np.abs(v - ref).mean():7.4f} {k_eq(v, ref, n):6.2f} "
                      f"{d['delta_sq']:+13.4f} [{d['delta_sq_ci_low']:+.4f}, {d['delta_sq_ci_high']:+.4f}]  {fit}")


if __name__ == "__main__":
    main(sys.argv[1:])
