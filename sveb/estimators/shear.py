"""SHEAR's span-level Wasserstein distance (Sec. 3.2-3.3) turned into a value estimator.

Spans: windows of w tokens with stride s over each rollout's hidden states, plus one ending at the
rollout's end so every token is covered (a rollout shorter than w is one span). The state (i, t) is
its last w tokens. d_j = min over rollout j's spans of W1 between the two spans' empirical
distributions (uniform weights, Euclidean cost), with hidden states divided by the group's mean
hidden-state norm (SHEAR's global norm normalisation). Value = sum r_j / max(d_j, d_min) /
sum 1 / max(d_j, d_min) over the k nearest rollouts (k = 0: all).

eps is the Sinkhorn regularisation on those normalised costs, i.e. a fraction of the group's mean
hidden-state norm, so one eps means the same blur for every pair and every model. exact=True uses
the network simplex (ot.emd2). In-group, the state's own rollout offers only spans ending by t.

Speed: the min over spans is a branch and bound. W1 >= the mean over rows of each row's nearest
column (and the same by columns) since every unit of mass moves at least that far; the Sinkhorn
plan is a coupling too, so its cost is also >= that bound. Spans whose bound is not below the best
distance found so far for their rollout cannot win and are never solved (nor their cost matrices
built: the bounds come from range minima over the query's distance rows). A second bound, the
distance between the two spans' mean rows (|E X - E Y| <= E|X - Y| under any coupling), is used too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import ot
import torch
from scipy.spatial.distance import cdist

from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean
from sveb.estimators.knn import as_float_tensor, norm_and_centre, pairwise_dist, weighted_knn

_MAX_ITER = 2000
_TOL = 1e-5         # on the marginals (sum 1): relative change of W1 below 1e-6 in tests/test_shear.py
_EXP_RANGE = 500.0  # cost range / eps beyond which exp(-C/eps) underflows in float64
_EXP_RANGE_F32 = 50.0  # ... and below which float32 is safe (2.8x faster; the cost is summed in float64)


def wasserstein1(a: np.ndarray, b: np.ndarray, eps: float | None = None) -> float:
    """W1 between the uniform empirical distributions on the rows of a [n, d] and b [m, d].

    Exact when eps is None, else Sinkhorn's transport cost <P_eps, C> with regularisation eps in
    the units of the cost.
    """
    a, b = (np.asarray(v, np.float64) for v in (a, b))
    a, b = (v.reshape(-1, 1) if v.ndim == 1 else v for v in (a, b))  # 1-D: samples on a line
    C = cdist(a, b)  # from differences: exact zeros for identical rows
    wa, wb = np.full(len(a), 1.0 / len(a)), np.full(len(b), 1.0 / len(b))
    if eps is None:
        return float(ot.emd2(wa, wb, C))
    shifted = C - C.min(axis=1, keepdims=True)  # same plan; plain Sinkhorn stays in range longer
    method = "sinkhorn" if shifted.max() / eps < _EXP_RANGE else "sinkhorn_log"
    plan = ot.sinkhorn(wa, wb, shifted, reg=eps, method=method, numItermax=20_000, stopThr=1e-9)
    return float((plan * C).sum())


def w1_batch(C: torch.Tensor, eps: float | None) -> np.ndarray:
    """W1 for a batch of cost matrices [B, n, m] under uniform weights (exact or Sinkhorn).

    An eps so small against the costs that exp(-C/eps) underflows is solved exactly: Sinkhorn would
    need very many log-domain iterations to approach that same limit (its bias is <= eps log(nm)).
    """
    C = C.double()
    shifted = C - C.amin(dim=2, keepdim=True)  # leaves the Sinkhorn plan unchanged, avoids underflow
    spread = float(shifted.max()) / eps if eps is not None else np.inf
    if spread > _EXP_RANGE:
        n, m = C.shape[1:]
        wa, wb = np.full(n, 1.0 / n), np.full(m, 1.0 / m)
        return np.array([ot.emd2(wa, wb, c) for c in C.numpy()])
    if spread < _EXP_RANGE_F32:
        shifted = shifted.float()
    res = ot.solve_batch(shifted, reg=eps, method="sinkhorn", max_iter=_MAX_ITER, tol=_TOL, grad="detach")
    return (res.plan.double() * C).sum(dim=(1, 2)).numpy()


def span_starts(T: int, w: int, s: int) -> list[tuple[int, int]]:
    """(start, length) of the spans of a T-token rollout: stride s, plus one ending at T."""
    if T <= 0:
        return []
    if T <= w:
        return [(0, T)]
    starts = list(range(0, T - w + 1, s))
    if starts[-1] + w < T:
        starts.append(T - w)
    return [(st, w) for st in starts]


def lower_bounds(C: torch.Tensor) -> torch.Tensor:
    """A lower bound on W1 (and on any coupling's cost) per cost matrix [B, n, m]."""
    return torch.maximum(C.amin(dim=2).mean(dim=1), C.amin(dim=1).mean(dim=1))


def range_min(D: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    """min of D[:, a : a + length] for every a in starts -> [n, len(starts)], by a sparse table
    (log2(length) passes over D) instead of gathering every span's columns."""
    M, step = D, 1
    while 2 * step <= length:
        M = torch.minimum(M[:, :-step], M[:, step:])  # M[:, c] = min D[:, c : c + 2 * step]
        step *= 2
    return torch.minimum(M[:, starts], M[:, starts + length - step])


def span_lower_bounds(D: torch.Tensor, starts: torch.Tensor, length: int) -> torch.Tensor:
    """lower_bounds of the cost matrices D[:, a : a + length] for a in starts, without building them."""
    rows = range_min(D, starts, length).double().mean(dim=0)
    cs = torch.nn.functional.pad(torch.cumsum(D.amin(dim=0).double(), 0), (1, 0))
    return torch.maximum(rows, (cs[starts + length] - cs[starts]) / length)


def span_means(ys: torch.Tensor, first: np.ndarray, length: np.ndarray, offsets: np.ndarray) -> torch.Tensor:
    """Mean row of each span ys[first : first + length] -> [S, d], by cumulative sums per rollout
    (float64: a whole group's running sum in float32 would lose the small differences)."""
    out = torch.empty(len(first), ys.shape[1], dtype=torch.float64)
    for a, b in zip(offsets[:-1], offsets[1:]):
        sel = np.flatnonzero((first >= a) & (first < b))
        if len(sel):
            cs = torch.nn.functional.pad(torch.cumsum(ys[a:b].double(), 0), (0, 0, 1, 0))
            st = torch.from_numpy(first[sel] - a)
            out[sel] = (cs[st + torch.from_numpy(length[sel])] - cs[st]) / torch.from_numpy(length[sel])[:, None]
    return out


def min_over_spans(lb: np.ndarray, owner: np.ndarray, n_owners: int, solve) -> np.ndarray:
    """min over each owner's spans of W1, by branch and bound; inf for an owner without spans.

    lb: [S] lower bounds, owner: [S], solve(indices) -> W1 of those spans.
    """
    best = np.full(n_owners, np.inf)
    queues = [list(np.flatnonzero(owner == g)[np.argsort(lb[owner == g], kind="stable")]) for g in range(n_owners)]
    width = 1
    while True:
        pick = []
        for g, q in enumerate(queues):
            if q and lb[q[0]] >= best[g]:
                q.clear()  # sorted: nothing left can beat best[g]
            pick += q[:width]
            del q[:width]
        if not pick:
            return best
        np.minimum.at(best, owner[pick], solve(np.array(pick)))
        width *= 2


@dataclass
class Shear(Estimator):
    """w, s: span length and stride in tokens; eps: Sinkhorn blur (fraction of the mean norm); exact:
    network simplex instead; k nearest rollouts (0: all); d_min: clamp in units of the group's mean
    hidden-state norm (0.1, as Hista's: with 1e-3 the state's own overlapping span won in-group for
    every t >= w); layer: the hidden layer (-1 = last)."""
    w: int = 100
    s: int = 25
    eps: float = 0.05
    exact: bool = False
    k: int = 0
    d_min: float = 0.1
    layer: int = -1
    needs_hidden = True

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        out = np.full(len(states), group_mean(group))
        members = list(group.rollouts)
        if not states or not members:
            return out
        xs = [as_float_tensor(group.hidden(r.rollout_idx)) for r in members]
        scale, centre = norm_and_centre(xs)
        if centre is None:
            return out
        ys = torch.cat(xs).sub_(centre).div_(scale)
        ys_sq = (ys * ys).sum(1)
        offsets = np.cumsum([0] + [len(x) for x in xs])
        spans = np.array([(g, offsets[g] + st, ln, st + ln) for g, x in enumerate(xs)
                          for st, ln in span_starts(len(x), self.w, self.s)], dtype=np.int64).reshape(-1, 4)
        if not len(spans):
            return out
        s_owner, s_col, s_len, s_end = spans.T                 # rollout, first column in ys, length, end in rollout
        means = span_means(ys, s_col, s_len, offsets)            # W1 >= |mean(a) - mean(b)|: a second bound
        rewards = np.array([r.reward for r in members], dtype=np.float64)
        index = {r.rollout_idx: g for g, r in enumerate(members)}
        eps = None if self.exact else self.eps
        hidden_cache: dict[int, torch.Tensor] = {}
        for n_s, st in enumerate(states):
            if st.rollout_idx in index:
                x = xs[index[st.rollout_idx]]
            else:
                if st.rollout_idx not in hidden_cache:
                    hidden_cache[st.rollout_idx] = as_float_tensor(group.hidden(st.rollout_idx))
                x = hidden_cache[st.rollout_idx]
            t = min(st.t, len(x))
            if t <= 0:
                continue
            q = (x[max(0, t - self.w) : t] - centre) / scale
            q_mean = q.double().mean(0)
            D = pairwise_dist(q, ys, ys_sq)                            # [n, all rows]
            keep = np.ones(len(spans), dtype=bool)
            if st.rollout_idx in index:                                # in-group: own past spans only
                keep &= ~((s_owner == index[st.rollout_idx]) & (s_end > t))
            d = np.full(len(members), np.inf)
            for ln in np.unique(s_len[keep]):                          # one batch per span length
                sel = np.flatnonzero(keep & (s_len == ln))
                first = torch.from_numpy(s_col[sel])
                lb = span_lower_bounds(D, first, int(ln))
                lb = torch.maximum(lb, (means[sel] - q_mean).norm(dim=1)).numpy()

                def solve(pick, first=first, ln=int(ln)):
                    cols = first[pick][:, None] + torch.arange(ln)[None, :]
                    return w1_batch(D[:, cols].permute(1, 0, 2), eps)   # [picked, n, ln]
                d = np.minimum(d, min_over_spans(lb, s_owner[sel], len(members), solve))
            ok = np.isfinite(d)
            if ok.any():
                out[n_s] = weighted_knn(d[ok], rewards[ok], self.k, self.d_min)
        return out
