"""`hista-sveb`: SVEB's earlier reading of Hista (paper Sec. 5.2), kept as a named preset.

The authors' own algorithm is `sveb.estimators.hista` (the `hista` default); this module is what SVEB
measured as `hista` before 2026-11-25: 1/d-weighted kNN over EMA-compressed response-only prefixes.

Nodes: in every group rollout j, the prefixes ending at t = delta, 2*delta, ... < T_j and the
final state T_j (the public code's end node; it also gives rollouts shorter than delta a node).
A node's value is r_j. The query state (i, t) is its own compressed prefix; distance = MinDistance
(Def. 5.1) / the group's mean hidden-state norm, clamped below at d_min; value = weighted mean of r
over the k nearest nodes. Nodes of the state's own rollout (in-group only) that lie after t are not
used: a state must not see its own future (the public code masks them the same way).

Short prefixes: t < phi has no compressed vector; it is represented by the bias-corrected EMA at
t-1 (one vector); a rollout shorter than phi likewise. t = 0 or an empty group -> group mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sveb.core.errors import UsageError
from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean, hidden_source
from sveb.estimators.knn import as_float_tensor, norm_and_centre, pairwise_dist, weighted_knn

_CHUNK = 64  # EMA blocks per matmul: bounds the O(chunk^2) decay matrix


def _check_alpha(alpha: float) -> None:
    if not 0.0 <= alpha < 1.0:
        raise UsageError(f"EMA alpha must be in [0, 1), got {alpha}")


def _ema_compress_torch(x: torch.Tensor, alpha: float, interval: int) -> torch.Tensor:
    """Bias-corrected EMA kept at every interval-th position, by blocks: exact, no per-token loop."""
    _check_alpha(alpha)
    n = x.shape[0] // interval
    if n == 0:
        return x.new_zeros((0, x.shape[1]))
    blocks = x[: n * interval].reshape(n, interval, -1)
    a = torch.tensor(alpha, dtype=torch.float64)
    w = ((1 - a) * a ** torch.arange(interval - 1, -1, -1, dtype=torch.float64)).to(x.dtype)
    b = torch.matmul(w, blocks)                          # each block's contribution at its last token
    decay = float(alpha) ** interval
    out = torch.empty_like(b)
    carry = x.new_zeros(x.shape[1])
    for s in range(0, n, _CHUNK):
        c = min(_CHUNK, n - s)
        i = torch.arange(c, dtype=torch.float64)
        lag = i[:, None] - i[None, :]
        lower = torch.where(lag >= 0, torch.tensor(decay, dtype=torch.float64) ** lag.clamp(min=0), 0.0)
        carry_w = torch.tensor(decay, dtype=torch.float64) ** (i + 1)
        out[s : s + c] = lower.to(x.dtype) @ b[s : s + c] + carry_w.to(x.dtype)[:, None] * carry
        carry = out[s + c - 1]
    steps = torch.arange(1, n + 1, dtype=torch.float64) * interval
    return out / (1 - a**steps).to(x.dtype)[:, None]


def ema_compress(x, alpha: float, interval: int):
    """Bias-corrected EMA (m_0 = 0) of x [T, d] kept at positions interval-1, 2*interval-1, ...

    Returns [T // interval, d]; numpy in -> numpy (float64) out, torch in -> torch out.
    """
    if isinstance(x, torch.Tensor):
        return _ema_compress_torch(x, alpha, interval)
    return _ema_compress_torch(torch.as_tensor(np.asarray(x, dtype=np.float64)), alpha, interval).numpy()


def ema_last(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """The bias-corrected EMA at the last row of x [t, d] (t >= 1): a short prefix's one vector."""
    return _ema_compress_torch(x, alpha, x.shape[0])[0]


def min_distance(x1, x2, reduce: str = "sum") -> float:
    """Definition 5.1: for each row of the longer sequence (x1 on ties), its min L2 distance to the
    other; summed (paper) or averaged (public code)."""
    if isinstance(x1, torch.Tensor) or isinstance(x2, torch.Tensor):
        d = torch.cdist(torch.as_tensor(x1, dtype=torch.float64), torch.as_tensor(x2, dtype=torch.float64),
                        compute_mode="donot_use_mm_for_euclid_dist")
        d = d.numpy()
    else:
        x1, x2 = np.asarray(x1, dtype=np.float64), np.asarray(x2, dtype=np.float64)
        d = np.sqrt(np.maximum(((x1[:, None, :] - x2[None, :, :]) ** 2).sum(-1), 0.0))
    if reduce not in ("sum", "mean"):
        raise UsageError(f"reduce must be 'sum' or 'mean', got {reduce!r}")
    mins = d.min(axis=1) if d.shape[0] >= d.shape[1] else d.min(axis=0)
    return float(mins.sum() if reduce == "sum" else mins.mean())


def min_distance_table(q: torch.Tensor, e: torch.Tensor, reduce: str = "mean") -> torch.Tensor:
    """MD(q[:m], e[g, :n]) for every m, n at once (App. F's cummin/cumsum trick).

    q: [M, d]; e: [G, L, d] (rows past a rollout's length may be anything: they are never read
    for n up to that length). Returns [G, M, L] with entry [g, m-1, n-1].
    """
    G, L, d = e.shape
    M = q.shape[0]
    D = pairwise_dist(q, e.reshape(G * L, d)).reshape(M, G, L).permute(1, 0, 2)  # [G, M, L]
    # n <= m: sum over the query's first m rows of their min over the node's first n rows
    s1 = torch.cumsum(torch.cummin(D, dim=2).values, dim=1)
    # n > m: sum over the node's first n rows of their min over the query's first m rows
    s2 = torch.cumsum(torch.cummin(D, dim=1).values, dim=2)
    m = torch.arange(1, M + 1, dtype=D.dtype)[None, :, None]
    n = torch.arange(1, L + 1, dtype=D.dtype)[None, None, :]
    if reduce == "sum":
        return torch.where(n <= m, s1, s2)
    if reduce == "mean":
        return torch.where(n <= m, s1 / m, s2 / n)
    raise UsageError(f"reduce must be 'sum' or 'mean', got {reduce!r}")


def scheduled_k(k: int, k_min: int, t: int, T: int, delta: int) -> int:
    """The public code's schedule: k falls linearly along the query's rollout, by
    (k - k_min) // n per node, n = its node count (grid 0, delta, ... plus its end)."""
    n = -(-max(T, 1) // delta) + 1
    j = max(t - 1, 0) // delta  # the last grid position before the state
    return max(k_min, k - ((k - k_min) // n) * j)


@dataclass
class HistaSVEB(Estimator):
    """alpha: EMA factor (0 = none); phi: keep every phi-th EMA vector; delta: node spacing in tokens;
    k nearest nodes (<= 0: all); d_min: clamp on distances in units of the group's mean hidden-state
    norm (0.1: the public code's clamp of 5.0 raw units is about 0.1 of a mean norm; the earlier 1e-3
    let a state's own rollout take 92-97% of the weight in-group); reduce: MinDistance's 'mean' (public
    code) or 'sum' (paper); k_schedule: k falls from k to k_min along the state's rollout; layer: the
    hidden layer (-1 = last)."""
    description = ("SVEB's earlier Hista variant: response-only histories, distances in units of the group's mean "
                   "norm (clamp 0.1), nodes every 50 response tokens, the cut's own history, fixed k")
    grid = {"alpha": ["0", "0.5", "0.7", "0.9"], "phi": ["1", "5", "10"], "delta": ["25", "50", "100"],
            "k": ["6", "20", "66"]}

    alpha: float = 0.7
    phi: int = 5
    delta: int = 50
    k: int = 66
    d_min: float = 0.1
    reduce: str = "mean"
    k_schedule: bool = False
    k_min: int = 6          # end of the schedule (only with k_schedule)
    layer: int = -1
    needs_hidden = True

    def _compress(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] >= self.phi:
            return _ema_compress_torch(x, self.alpha, self.phi)
        return ema_last(x, self.alpha)[None] if x.shape[0] else x[:0]

    def _rollout(self, group: ProblemGroup, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(hidden states, their compression) of one rollout, memoised for the problem at hand: the
        held-out protocol values each state on its own subgroup, so the same rollouts come back once per
        state. The memo serves one hidden-state source (subgroups share it) and an entry only while the
        source returns the very same array. Compressing before centring is exact: the bias-corrected EMA
        of a constant is that constant."""
        arr = group.hidden(idx)
        source = hidden_source(group.hidden_fn)
        if getattr(self, "_memo_of", None) is not source:  # a new problem: one group in memory
            self._memo_of, self._memo = source, {}
        hit = self._memo.get(idx)
        if hit is None or hit[0] is not arr:
            x = as_float_tensor(arr)
            hit = self._memo[idx] = (arr, x, self._compress(x))
        return hit[1], hit[2]

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        out = np.full(len(states), group_mean(group))
        members = list(group.rollouts)
        if not states or not members:
            return out
        pairs = {r.rollout_idx: self._rollout(group, r.rollout_idx) for r in members}
        xs = {j: x for j, (x, _) in pairs.items()}
        scale, centre = norm_and_centre(xs.values())
        if centre is None:
            return out
        comp = {j: c - centre for j, (_, c) in pairs.items()}
        order = [r for r in members if len(comp[r.rollout_idx])]
        if not order:
            return out
        L = max(len(comp[r.rollout_idx]) for r in order)
        e = torch.zeros(len(order), L, len(centre))
        g_idx, n_idx, t_node, r_node, owner = [], [], [], [], []
        for g, r in enumerate(order):
            c, T = comp[r.rollout_idx], len(xs[r.rollout_idx])
            e[g, : len(c)] = c
            for t in [*range(self.delta, T, self.delta), T]:
                g_idx.append(g), n_idx.append(max(1, t // self.phi)), t_node.append(t)
                r_node.append(r.reward), owner.append(r.rollout_idx)
        g_idx, n_idx = torch.tensor(g_idx), torch.tensor(n_idx) - 1
        t_node, r_node, owner = np.array(t_node), np.array(r_node, dtype=np.float64), np.array(owner)

        by_rollout: dict[int, list[int]] = {}
        for s_i, s in enumerate(states):
            by_rollout.setdefault(s.rollout_idx, []).append(s_i)
        for i, s_ids in by_rollout.items():
            x, c = self._rollout(group, i)
            x = x - centre
            ts = {s: min(states[s].t, len(x)) for s in s_ids}
            M = max(ts.values()) // self.phi
            if M:  # one table serves every state of this rollout: prefixes of one compressed sequence
                table = min_distance_table(c[:M] - centre, e, self.reduce)
            for s, t in ts.items():
                if t <= 0:
                    continue
                if t >= self.phi:
                    d = table[g_idx, t // self.phi - 1, n_idx]
                else:
                    d = min_distance_table(ema_last(x[:t], self.alpha)[None], e, self.reduce)[g_idx, 0, n_idx]
                keep = ~((owner == i) & (t_node > t))
                if not keep.any():
                    continue
                k = scheduled_k(self.k, self.k_min, t, len(x), self.delta) if self.k_schedule else self.k
                out[s] = weighted_knn(d.double().numpy()[keep] / scale, r_node[keep], k, self.d_min)
        return out
