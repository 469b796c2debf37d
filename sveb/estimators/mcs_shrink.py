"""Monte Carlo at matched rollout counts: MCS@k with the group's outcomes brought in, spending the same k extra
continuations per state as `mcs-k` (issue 58.4).

- `mcs-eb-k`: empirical Bayes. A state's value is given a beta prior centred on its group's mean m (held-out: the
  other G-1 rollouts) with a concentration c fitted per build; the estimate is the posterior mean
  (x + c m) / (k + c), x the successes among its k draws. c is fitted by the method of moments:
  with S = E[(x/k - m)^2] and B = E[V(1 - V)], D = S - B/k is the values' spread around their group means and
  c = B / D (a beta with mean m and concentration c has variance m(1-m)/(c+1); B/D is that c when V's spread
  scales with m(1-m)). B is read without bias from two draws of one state: k >= 2, x(k-x)/(k(k-1)); k = 1 has one
  draw only, so its second draw is the state's own rollout (it continues the same prefix): (x/k)(1 - r_own).
- `mcs-cv-k`: the control-variate form x/k + b z, z = m - y, y the mean MCS@k of the problem's states on other
  rollouts. Both m and y estimate the problem's root value (a state's value averages to it over rollouts), so
  E[z] = 0 and the form is unbiased for any b. z is independent of the state's own draws, so no b lowers their
  noise: the risk-minimising b is 0 and b is fitted to it (b = -sum((x/k - r_own) z) / sum(z^2), mean 0 here,
  pulled to 0 within its own noise); the row measures what this control can buy next to `mcs-eb-k`.

Held-out by construction: a problem's prior (c or b) is fitted on the build's other problems only, so no estimate
reads its own rollout's outcome, and its group mean excludes the own rollout as `grpo`'s does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sveb.core.errors import EvalError
from sveb.core.records import BuildData
from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean

C_MAX = 1e6  # no spread measured around the group means: all weight on the group mean


def draws_moment(x: np.ndarray, k: int, own: np.ndarray | None = None) -> np.ndarray:
    """Per state, an unbiased reading of V(1 - V) from its k draws' successes x: x(k-x)/(k(k-1)) for k >= 2;
    for k = 1, (x)(1 - own) with `own` a second independent draw (the state's own rollout's reward)."""
    x = np.asarray(x, float)
    if k >= 2:
        return x * (k - x) / (k * (k - 1))
    if own is None:
        raise ValueError("k = 1: one draw per state reads no V(1-V); pass the own rollouts' rewards")
    return x * (1.0 - np.asarray(own, float))


def spread(x: np.ndarray, k: int, center: np.ndarray | float | None, q: np.ndarray) -> tuple[float, float]:
    """(D, B): the values' mean squared deviation from `center` (None: their own mean, with n-1) and their mean
    V(1-V), by moments from the successes x of k draws and q (draws_moment)."""
    xbar = np.asarray(x, float) / k
    if center is None:
        s = float(np.sum((xbar - xbar.mean()) ** 2) / max(len(xbar) - 1, 1))
    else:
        s = float(np.mean((xbar - center) ** 2))
    b = float(np.mean(q))
    return s - b / k, b


def concentration(d: float, b: float) -> float:
    """The beta prior's concentration c = B / D (C_MAX when no spread is measured)."""
    if not np.isfinite(d) or d <= 0:
        return C_MAX
    return float(min(max(b, 0.0) / d, C_MAX))


def fit_beta(x: np.ndarray, k: int, q: np.ndarray) -> tuple[float, float]:
    """One beta prior for the whole set of states (no group centre): its mean and variance by moments."""
    d, _ = spread(x, k, None, q)
    return float(np.mean(np.asarray(x, float) / k)), max(d, 0.0)


def posterior_mean(x: np.ndarray | float, k: int, m: np.ndarray | float, c: float) -> np.ndarray:
    """The beta-binomial posterior mean (x + c m) / (k + c)."""
    return (np.asarray(x, float) + c * np.asarray(m, float)) / (k + c)


def shrunk_coefficient(u: float, zz: float, uu: float) -> float:
    """b = u / zz with its (problem-clustered) variance uu / zz^2, pulled toward 0 by the positive-part James-Stein
    rule b (1 - se^2 / b^2)+: a coefficient within its own noise of 0 is 0 (a small build's fit adds no noise)."""
    if zz <= 0 or u == 0:
        return 0.0
    b, se2 = u / zz, uu / zz ** 2
    return float(b * max(0.0, 1.0 - se2 / b ** 2))


def cv_coefficient(xbar: np.ndarray, own: np.ndarray, z: np.ndarray, groups=None) -> float:
    """The control's risk-minimising coefficient -E[(x/k - V) z] / E[z^2], with the state's own outcome standing in
    for V (its noise is independent of z too), shrunk by its noise (shrunk_coefficient; clustered by `groups`)."""
    u = -(np.asarray(xbar, float) - np.asarray(own, float)) * np.asarray(z, float)
    g = np.arange(len(u)) if groups is None else np.asarray(groups)
    per = np.array([u[g == k].sum() for k in np.unique(g)]) if len(u) else np.zeros(0)
    return shrunk_coefficient(float(u.sum()), float(np.sum(np.asarray(z, float) ** 2)), float(np.sum(per ** 2)))


def leave_one_out(per: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per key, the sums of every other key's rows (the build's other problems)."""
    total = sum(per.values()) if per else np.zeros(0)
    return {p: total - v for p, v in per.items()}


@dataclass
class _Fitted(Estimator):
    """The shared part: the k draws of each state, the held-out group means, the own outcomes; one fit per build."""
    role = "scale"
    reads_references = True                 # the evaluated build's extra draws (no other estimator gets them)
    k: int = 2

    def __post_init__(self):
        self._per: dict[str, float] = {}
        self._all: float | None = None
        self._y: dict[str, list[tuple[int, float]]] = {}
        self._sums: np.ndarray | None = None

    def _x(self, s: State) -> float:
        if len(s.extra_rewards) < self.k:
            raise EvalError(f"{self.name} needs {self.k} extra continuations per state, the build has "
                            f"{len(s.extra_rewards)} (rebuild with --mc-extra {self.k})")
        return float(np.sum(s.extra_rewards[: self.k]))

    def _rows(self, build: BuildData) -> list[dict]:
        """Per state of the build: its problem, rollout, successes x, held-out group mean m, own outcome r."""
        rows = []
        for st in build.states:
            pid, own = st["problem_id"], st["rollout_idx"]
            rewards = {r["rollout_idx"]: float(r["reward"]) for r in build.rollouts.get(pid, [])}
            extra = build.extras.get(st["state_id"], ())
            if len(extra) < self.k:
                raise EvalError(f"{self.name} needs {self.k} extra continuations per state, state {st['state_id']} "
                                f"has {len(extra)} (rebuild with --mc-extra {self.k})")
            others = [v for i, v in rewards.items() if i != own]
            rows.append({"pid": pid, "roll": own, "x": float(np.sum(extra[: self.k])),
                         "m": float(np.mean(others)) if others else 0.5, "r": rewards.get(own, np.nan)})
        return rows

    def prepare(self, build: BuildData, ctx=None) -> None:
        rows = self._rows(build)
        per: dict[str, np.ndarray] = {}
        for r in rows:
            per[r["pid"]] = per.get(r["pid"], 0) + self._stats(r, rows)
        per = {p: self._cluster(v) for p, v in per.items()}
        loo = leave_one_out(per)
        self._per = {p: self._param(v) for p, v in loo.items()}
        self._sums = sum(per.values()) if per else None
        self._all = self._param(self._sums) if per else None

    def _cluster(self, v: np.ndarray) -> np.ndarray:
        """A problem's sums, extended with what a clustered variance needs (none here)."""
        return v

    def _param_for(self, pid: str) -> float:
        if pid in self._per:
            return self._per[pid]
        if self._all is None:
            raise EvalError(f"{self.name}: prepare() was not called with the build (its prior is fitted there)")
        return self._all

    def diagnostics(self) -> dict[str, object]:
        return {} if self._all is None else {self._diag: self._all}


@dataclass
class MonteCarloShrunk(_Fitted):
    description = ("MCS@k shrunk toward the group mean: beta-binomial posterior mean, the prior's concentration "
                   "fitted per build by moments on the other problems (reference scale; needs --mc-extra k)")
    _diag = "concentration"

    def _stats(self, r: dict, rows: list[dict]) -> np.ndarray:
        q = draws_moment(np.array([r["x"]]), self.k, np.array([r["r"]]) if self.k == 1 else None)[0]
        if not np.isfinite(q):  # k = 1 and no own outcome (an imported build): the state adds nothing
            return np.zeros(3)
        return np.array([1.0, (r["x"] / self.k - r["m"]) ** 2, q])

    def _param(self, v: np.ndarray) -> float:
        n, s, q = v
        if n == 0:  # nothing to fit on (a one-problem build): plain MCS@k
            return 0.0
        return concentration(s / n - q / n / self.k, q / n)

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        m = group_mean(group)  # held-out: the other G-1 rollouts
        return np.array([float(posterior_mean(self._x(s), self.k, m, self._param_for(s.problem_id)))
                         for s in states])


@dataclass
class MonteCarloCV(_Fitted):
    description = ("MCS@k plus a fitted multiple of a zero-mean control from the group (group mean minus the mean "
                   "MCS@k of the problem's states on other rollouts; reference scale; needs --mc-extra k)")
    _diag = "coefficient"

    def prepare(self, build: BuildData, ctx=None) -> None:
        # the control needs the other states' draws, which estimate() is not handed (held-out: one state at a time)
        self._y = {}
        for st in build.states:
            extra = build.extras.get(st["state_id"], ())
            if len(extra) >= self.k:
                self._y.setdefault(st["problem_id"], []).append((st["rollout_idx"], float(np.mean(extra[: self.k]))))
        super().prepare(build, ctx)

    def _z(self, pid: str, roll: int, m: float) -> float:
        ys = [y for i, y in self._y.get(pid, []) if i != roll]  # other rollouts only: never the own one's future
        return m - float(np.mean(ys)) if ys else 0.0

    def _stats(self, r: dict, rows: list[dict]) -> np.ndarray:
        if not np.isfinite(r["r"]):
            return np.zeros(2)
        z = self._z(r["pid"], r["roll"], r["m"])
        return np.array([-(r["x"] / self.k - r["r"]) * z, z * z])

    def _cluster(self, v: np.ndarray) -> np.ndarray:
        return np.append(v, v[0] ** 2)  # the problem's summed u, squared: its share of the clustered variance

    def diagnostics(self) -> dict[str, object]:
        if self._sums is None:
            return {}
        u, zz, uu = map(float, self._sums)
        raw = u / zz if zz > 0 else 0.0
        return {"coefficient": self._all, "coefficient_raw": raw, "coefficient_se": uu ** 0.5 / zz if zz > 0 else 0.0}

    def _param(self, v: np.ndarray) -> float:
        return shrunk_coefficient(*map(float, v))

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        m = group_mean(group)
        out = [self._x(s) / self.k + self._param_for(s.problem_id) * self._z(s.problem_id, s.rollout_idx, m)
               for s in states]
        return np.clip(np.array(out, float), 0.0, 1.0)  # the contract: a probability (clipping adds a little bias)
