"""SHEAR's signal (Sec. 3.2-3.3, Eq. 2-4, Alg. 1): spans, the one W1 kernel, and the paper's token weights.

Spans (Eq. 2): windows of w tokens at stride s from the first token, the last ones truncated at the
rollout's end (`grid_spans`, tail="truncated"; SVEB's earlier grid, tail="full", stops at the last full
window and adds one full window ending at the last token). W1 (Eq. 3) between two spans' uniform empirical
distributions, Euclidean cost: `w1_batch`, the only kernel (the estimator, `wasserstein1` and
`shear_weights` all call it). eps is the Sinkhorn regularisation in the units of the cost; on hidden states
divided by the group's mean norm that is a fraction of the mean norm. eps=None: exact (`ot.emd2`).

`shear_weights` is Alg. 1 without the policy update: for rollout i, O(i) = the group's rollouts with the
other outcome (Eq. 4); each span's distance D_k = one minimum of W1 over all spans of all rollouts in O(i),
divided by the group's mean hidden-state norm (Step 2); token weight w_t = max of D_k over the spans
covering t (Step 3); O(i) empty: weights 1 (plain GRPO). The advantage would be A_i * w_t (Step 4).

Minima are exact branch and bounds: W1 >= the mean over rows of each row's nearest column (and the same by
columns), since every unit of mass moves at least that far; a span whose bound is not below its owner's best
so far cannot win and is never solved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import ot
import torch

from sveb.estimators.knn import pairwise_dist

_MAX_ITER = 2000
_TOL = 1e-5         # row-marginal error (sum 1); tests/test_shear_weights.py bounds the gap to ot.emd2
_EXP_RANGE = 500.0  # cost range / eps beyond which exp(-C/eps) underflows in float64: solved exactly
_EXP_RANGE_F32 = 50.0  # ... and below which float32 is safe (2.8x faster; the cost is summed in float64)
TAILS = ("truncated", "full")


def w1_batch(C: torch.Tensor, eps: float | None) -> np.ndarray:
    """W1 for a batch of cost matrices [B, n, m] under uniform weights: Sinkhorn's transport cost <P_eps, C>
    (POT `ot.solve_batch`, method "sinkhorn"), or exact (`ot.emd2`) when eps is None.

    An eps so small against the costs that exp(-C/eps) underflows is solved exactly: Sinkhorn would need
    very many log-domain iterations to approach that same limit. Sinkhorn's cost exceeds W1 by at most
    eps * log(min(n, m)) (entropy of a coupling lies between max and sum of its marginals' entropies).
    """
    C = torch.as_tensor(C).double()
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


def wasserstein1(a, b, eps: float | None = None) -> float:
    """W1 between the uniform empirical distributions on the rows of a [n, d] and b [m, d] (1-D: points on
    a line), through `w1_batch`; eps in the units of the cost."""
    a, b = (torch.as_tensor(np.ascontiguousarray(v, np.float64)) for v in (a, b))
    a, b = (v.reshape(-1, 1) if v.ndim == 1 else v for v in (a, b))
    return float(w1_batch(pairwise_dist(a, b)[None], eps)[0])


def grid_spans(T: int, w: int, s: int, tail: str = "truncated") -> list[tuple[int, int]]:
    """(start, length) of a T-token rollout's spans. truncated (Eq. 2): a start every s tokens from 0 while
    inside the rollout, each span cut at T. full (SVEB's earlier grid): the full windows at stride s, plus
    one ending at T if the last misses it; a rollout shorter than w is one span."""
    if T <= 0:
        return []
    if tail == "truncated":
        return [(a, min(w, T - a)) for a in range(0, T, s)]
    if tail != "full":
        raise ValueError(f"tail must be one of {TAILS}, not {tail!r}")
    if T <= w:
        return [(0, T)]
    starts = list(range(0, T - w + 1, s))
    if starts[-1] + w < T:
        starts.append(T - w)
    return [(a, w) for a in starts]


def covering(spans: Sequence[tuple[int, int]], t: int) -> list[tuple[int, int]]:
    """The spans that contain token index t."""
    return [(a, n) for a, n in spans if a <= t < a + n]


def lower_bounds(C: torch.Tensor) -> torch.Tensor:
    """A lower bound on W1 (and on any coupling's cost) per cost matrix [B, n, m]."""
    return torch.maximum(C.amin(dim=2).mean(dim=1), C.amin(dim=1).mean(dim=1))


def min_tables(D: torch.Tensor, longest: int) -> list[torch.Tensor]:
    """Sparse table of D's row-wise window minima: tables[k][:, c] = min D[:, c : c + 2**k], 2**k <= longest."""
    tables, step = [D], 1
    while 2 * step <= longest:
        M = tables[-1]
        tables.append(torch.minimum(M[:, :-step], M[:, step:]))
        step *= 2
    return tables


def range_min(D: torch.Tensor, starts: torch.Tensor, length: int, tables: list[torch.Tensor] | None = None
              ) -> torch.Tensor:
    """min of D[:, a : a + length] for every a in starts -> [n, len(starts)], from a sparse table (log2(length)
    passes over D, or none given `min_tables(D, >= length)`) instead of gathering every span's columns."""
    level = length.bit_length() - 1
    M = (tables or min_tables(D, length))[level]
    step = 1 << level
    return torch.minimum(M[:, starts], M[:, starts + length - step])


def span_lower_bounds(D: torch.Tensor, starts: torch.Tensor, length: int, tables: list[torch.Tensor] | None = None,
                      col_cumsum: torch.Tensor | None = None) -> torch.Tensor:
    """lower_bounds of the cost matrices D[:, a : a + length] for a in starts, without building them."""
    rows = range_min(D, starts, length, tables).double().mean(dim=0)
    cs = col_cumsum if col_cumsum is not None else torch.nn.functional.pad(torch.cumsum(D.amin(dim=0).double(), 0),
                                                                          (1, 0))
    return torch.maximum(rows, (cs[starts + length] - cs[starts]) / length)


def min_over_spans(lb: np.ndarray, owner: np.ndarray, n_owners: int, solve: Callable,
                   best: np.ndarray | None = None, floor: np.ndarray | None = None) -> np.ndarray:
    """min over each owner's spans of W1, by branch and bound; inf for an owner without spans.

    lb: [S] lower bounds, owner: [S], solve(indices) -> W1 of those spans; best: values already known to be
    reached (a span whose bound is not below its owner's is skipped); floor: an owner stops once its best is
    at or below its floor (then only max(floor, min) is exact: what a maximum over covering spans needs).
    """
    best = np.full(n_owners, np.inf) if best is None else np.array(best, np.float64)
    done = np.zeros(n_owners, dtype=bool) if floor is None else None
    queues = [list(np.flatnonzero(owner == g)[np.argsort(lb[owner == g], kind="stable")]) for g in range(n_owners)]
    width = 1
    while True:
        pick = []
        if floor is not None:
            done = best <= floor
        for g, q in enumerate(queues):
            if q and (lb[q[0]] >= best[g] or done[g]):
                q.clear()  # sorted: nothing left can beat best[g] (or matter: at or below the floor)
            pick += q[:width]
            del q[:width]
        if not pick:
            return best
        np.minimum.at(best, owner[pick], solve(np.array(pick)))
        width *= 2


def span_minima(D: torch.Tensor, first: np.ndarray, length: np.ndarray, owner: np.ndarray, n_owners: int,
                eps: float | None, lb_extra: np.ndarray | None = None, floor: np.ndarray | None = None
                ) -> np.ndarray:
    """For a query span whose distance rows to every candidate row are D [n, rows]: per owner, the minimum
    W1 over the candidate spans D[:, first : first + length] it owns ([n_owners], inf where it owns none).
    lb_extra: an optional further lower bound per candidate span (e.g. the span means' distance); floor: see
    min_over_spans. One batch per span length, longest first, each starting from the best values before it."""
    d = np.full(n_owners, np.inf)
    if not len(first):
        return d
    tables = min_tables(D, int(length.max()))
    col_cumsum = torch.nn.functional.pad(torch.cumsum(D.amin(dim=0).double(), 0), (1, 0))
    for ln in np.unique(length)[::-1]:
        sel = np.flatnonzero(length == ln)
        starts = torch.from_numpy(np.ascontiguousarray(first[sel]))
        lb = span_lower_bounds(D, starts, int(ln), tables, col_cumsum)
        lb = (lb if lb_extra is None else torch.maximum(lb, torch.from_numpy(lb_extra[sel]))).numpy()

        def solve(pick, starts=starts, ln=int(ln)):
            cols = starts[pick][:, None] + torch.arange(ln)[None, :]
            return w1_batch(D[:, cols].permute(1, 0, 2), eps)   # [picked, n, ln]
        d = min_over_spans(lb, owner[sel], n_owners, solve, d, floor)
    return d


def outcome(rewards) -> np.ndarray:
    """Correct (True) or incorrect per binary reward (a reward >= 0.5 counts as correct)."""
    return np.asarray(rewards, np.float64) >= 0.5


def shear_weights(hidden: Sequence[np.ndarray], rewards: Sequence[float], w: int = 100, s: int = 25,
                  eps: float | None = 0.05) -> list[np.ndarray]:
    """The paper's token weights w_t for every rollout of a group (Alg. 1, Steps 1-3).

    hidden: per rollout its hidden states [T_j, d]; rewards: binary; eps: Sinkhorn regularisation relative
    to the group's mean hidden-state norm, None = exact. Returns per rollout a float64 [T_j] array.
    """
    xs = [torch.as_tensor(np.ascontiguousarray(h, np.float64)) for h in hidden]
    xs = [x[:, None] if x.ndim == 1 else x for x in xs]
    if len(xs) != len(rewards):
        raise ValueError(f"{len(xs)} hidden-state arrays for {len(rewards)} rewards")
    rows = torch.cat(xs) if xs else torch.zeros(0, 1, dtype=torch.float64)
    if not len(rows):
        return [np.ones(0) for _ in xs]
    scale = float(rows.norm(dim=1).mean()) or 1.0               # Step 2: the group's mean hidden-state norm
    centre = rows.mean(0)                                       # distances do not depend on it (accuracy only)
    ys = [(x - centre) / scale for x in xs]
    spans = [grid_spans(len(x), w, s) for x in xs]
    good = outcome(rewards)
    out = []
    for i, x in enumerate(ys):
        opposing = [j for j in range(len(xs)) if good[j] != good[i] and len(xs[j])]
        if not opposing or not len(x):
            out.append(np.ones(len(x)))                          # O(i) empty: plain GRPO
            continue
        Y = torch.cat([ys[j] for j in opposing])
        offsets = np.cumsum([0] + [len(ys[j]) for j in opposing])
        cand = np.array([(offsets[k] + a, n) for k, j in enumerate(opposing) for a, n in spans[j]]).reshape(-1, 2)
        D_all = pairwise_dist(x, Y)                              # [T_i, rows of O(i)]
        omega = np.zeros(len(x))
        for a, n in spans[i]:                                    # Step 1: one minimum over all of O(i)'s spans
            d = span_minima(D_all[a : a + n], cand[:, 0], cand[:, 1], np.zeros(len(cand), np.int64), 1, eps)[0]
            omega[a : a + n] = np.maximum(omega[a : a + n], d)   # Step 3: max over the covering spans
        out.append(omega)
    return out
