"""A read-out calibrated on the train build: a logistic map from an estimator's raw signal(s) at a state to the
state's Monte-Carlo value, fitted on the disjoint `--split train` build's states and their references (binomial
likelihood: a state with n draws, y of them correct, weighs n). Fitted once per build on problems the benchmark
does not hold, so the map never sees a benchmark state's own outcome (held-out safe).
With one signal the map is monotone by construction; its slope's sign is whatever the train build says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sveb.core.errors import UsageError
from sveb.estimators.probe_fit import binomial_rows


@dataclass
class Calibration:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        z = (np.atleast_2d(np.asarray(X, np.float64)) - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(z @ self.coef + self.intercept)))


def labels(reference: dict) -> tuple[float, float]:
    """(mean reward, draws) of a train state's references: its Monte-Carlo draws and its extra draws."""
    draws = list(reference.get("mc_rewards", [])) + list(reference.get("extra_rewards", []))
    return (float(np.mean(draws)), float(len(draws))) if draws else (0.5, 0.0)


def fit(X: np.ndarray, y: np.ndarray, n: np.ndarray, C: float = 1.0) -> Calibration:
    """Logistic regression of y (fractions, n trials each) on the standardised columns of X (L2 strength 1/C)."""
    from sklearn.linear_model import LogisticRegression
    X = np.atleast_2d(np.asarray(X, np.float64))
    y, n = np.asarray(y, np.float64), np.asarray(n, np.float64)
    if len(X) == 0 or n.sum() == 0:
        raise UsageError("calibrated read-out: the train build has no state with a reference to fit on")
    mean, scale = X.mean(0), X.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    Z = (X - mean) / scale
    i, lab, w = binomial_rows(y, n)
    if len(np.unique(lab)) < 2:  # every draw the same: the constant is the only fit
        p = float(np.clip(lab[0], 1e-3, 1 - 1e-3))
        return Calibration(mean, scale, np.zeros(X.shape[1]), float(np.log(p / (1 - p))))
    clf = LogisticRegression(C=C, max_iter=2000, tol=1e-8).fit(Z[i], lab, sample_weight=w)
    return Calibration(mean, scale, clf.coef_[0].astype(np.float64), float(clf.intercept_[0]))
