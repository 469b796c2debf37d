"""The value probe's fit: L2 logistic regression on binomial labels, its strength chosen by problem-grouped CV.

A training row has a hidden block (standardised, then PCA), a scalar block (standardised), an offset
(0, or the logit of the group's leave-one-out mean), a success fraction y and a trial count n (1 for an
outcome label; the continuations for a Monte-Carlo label). The binomial likelihood of (y, n) is a
logistic regression on two weighted rows, (1, n y) and (0, n (1 - y)), so sklearn fits it as is.
sklearn's LogisticRegression has no offset: `OffsetLogistic` is the same objective (C * weighted log-loss
+ ||w||^2 / 2, intercept free) with one, minimised by scipy's L-BFGS; it equals sklearn at offset 0 (test).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sveb.core.errors import UsageError


class OffsetLogistic:
    """P(y = 1) = sigmoid(X w + b + offset), L2-penalised as sklearn's LogisticRegression(C)."""

    def __init__(self, C: float = 1.0):
        self.C = C

    def fit(self, X: np.ndarray, y: np.ndarray, offset: np.ndarray, sample_weight: np.ndarray) -> OffsetLogistic:
        from scipy.optimize import minimize
        from scipy.special import expit

        X1 = np.hstack([X, np.ones((len(X), 1))])
        sw = sample_weight * self.C

        def f(beta):
            z = X1 @ beta + offset
            loss = float(sw @ (np.logaddexp(0, z) - y * z)) + 0.5 * float(beta[:-1] @ beta[:-1])
            grad = X1.T @ (sw * (expit(z) - y))
            grad[:-1] += beta[:-1]
            return loss, grad

        res = minimize(f, np.zeros(X1.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 2000, "gtol": 1e-8})
        self.coef_, self.intercept_ = res.x[:-1], float(res.x[-1])
        return self

    def decision(self, X: np.ndarray, offset: np.ndarray) -> np.ndarray:
        return X @ self.coef_ + self.intercept_ + offset


@dataclass
class ProbeModel:
    prep: object            # fitted sklearn ColumnTransformer
    clf: object             # LogisticRegression (no offset) or OffsetLogistic
    C: float
    cv_loss: dict           # C -> mean held-out binomial log-loss per trial

    def predict(self, H: np.ndarray, S: np.ndarray, offset: np.ndarray) -> np.ndarray:
        from scipy.special import expit
        Z = self.prep.transform(np.hstack([H, S]))
        if isinstance(self.clf, OffsetLogistic):
            return expit(self.clf.decision(Z, offset))
        return expit(self.clf.decision_function(Z))


def binomial_rows(y: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row index, 0/1 label, weight) of the two weighted rows per example; zero-weight rows dropped."""
    idx = np.concatenate([np.arange(len(y)), np.arange(len(y))])
    lab = np.concatenate([np.ones(len(y)), np.zeros(len(y))])
    w = np.concatenate([n * y, n * (1 - y)])
    keep = w > 0
    return idx[keep], lab[keep], w[keep]


def _fit_one(H, S, off, y, n, C: float, pca: int, seed: int, use_offset: bool) -> ProbeModel:
    from sklearn.compose import ColumnTransformer
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    dh = H.shape[1]
    hid = StandardScaler()
    if 0 < pca < min(dh, len(H)):
        hid = make_pipeline(StandardScaler(), PCA(pca, random_state=seed))
    prep = ColumnTransformer([("h", hid, slice(0, dh)), ("s", StandardScaler(), slice(dh, dh + S.shape[1]))])
    Z = prep.fit_transform(np.hstack([H, S]))
    i, lab, w = binomial_rows(y, n)
    if use_offset:
        clf = OffsetLogistic(C).fit(Z[i], lab, off[i], w)
    else:
        if len(np.unique(lab)) < 2:
            raise UsageError("probe: every training label is the same; the train build has no contrast to learn")
        clf = LogisticRegression(C=C, max_iter=2000, tol=1e-6).fit(Z[i], lab, sample_weight=w)
    return ProbeModel(prep, clf, C, {})


def log_loss(p: np.ndarray, y: np.ndarray, n: np.ndarray) -> float:
    """Binomial negative log-likelihood per trial."""
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return float(-(n * (y * np.log(p) + (1 - y) * np.log1p(-p))).sum() / n.sum())


def fit_cv(H, S, off, y, n, groups, Cs, folds: int, pca: int, seed: int, use_offset: bool) -> ProbeModel:
    """Choose C by GroupKFold over problems (held-out log-loss per trial), refit on every row."""
    from sklearn.model_selection import GroupKFold

    H, S = np.asarray(H, np.float64), np.asarray(S, np.float64)
    off, y, n, groups = (np.asarray(a) for a in (off, y, n, groups))
    k = min(folds, len(np.unique(groups)))
    if k < 2:
        raise UsageError(f"probe: the train build has {len(np.unique(groups))} problem(s); "
                         "grouped cross-validation needs at least 2")
    splits = list(GroupKFold(k).split(H, y, groups))
    cv = {}
    for C in Cs:
        tot, nt = 0.0, 0.0
        for tr, va in splits:
            if not use_offset and len(np.unique(np.round(y[tr]))) < 2 and np.all((y[tr] == 0) | (y[tr] == 1)):
                continue  # a fold whose training labels are constant cannot be fitted: skipped for every C
            m = _fit_one(H[tr], S[tr], off[tr], y[tr], n[tr], C, pca, seed, use_offset)
            tot += log_loss(m.predict(H[va], S[va], off[va]), y[va], n[va]) * n[va].sum()
            nt += n[va].sum()
        cv[float(C)] = tot / nt if nt else float("inf")
    best = min(cv, key=lambda c: (cv[c], c))
    model = _fit_one(H, S, off, y, n, best, pca, seed, use_offset)
    model.cv_loss = cv
    return model
