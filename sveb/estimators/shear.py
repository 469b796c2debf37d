"""A value read from SHEAR's span-level Wasserstein signal (Sec. 3.2-3.3; SHEAR itself defines no V(s)).

The signal (sveb.estimators.shear_weights): spans of w tokens at stride s, W1 between two spans' empirical
distributions (uniform weights, Euclidean cost; Sinkhorn with `eps` a fraction of the group's mean
hidden-state norm, or exact), divided by that mean norm. The state (i, t) reads it under five rules:

- tail, the span grid: truncated (Eq. 2 as SVEB reads it): a start every s tokens, the last spans cut at the
  rollout's end; full (SVEB's earlier): full windows only, plus one ending at the last token.
- span, the state's query spans: covering (the paper's Step 3): the spans of its rollout's grid that contain
  the cut's token t - 1, distances pooled by their maximum. In-group the rollout's grid runs to its end (the
  paper's w_t, which looks past the cut); held-out the rollout stops at the cut, so its spans are those of
  the prefix, cut at t. trailing (SVEB's earlier): one window, the last w tokens before the cut.
- compare, the spans compared with: opposing (the paper's Eq. 4, as far as a value allows): every rollout
  but the state's own, the correct and the incorrect ones apart, each the opposing set O(i) under one
  hypothesis about the state's outcome (in-group, the one opposite its actual outcome is the paper's O(i)).
  all (SVEB's earlier): every rollout in one pool, in-group the own rollout's spans ending by t included.
- minimum: set (the paper's Step 1): one minimum over all spans of each outcome's rollouts; rollout (SVEB's
  earlier): one minimum per rollout.
- readout, how distances become a value (the paper defines none; every read-out is SVEB's). base (the
  default): the group's base rate b (the mean reward of the rollouts the protocol shows: held-out, not the
  state's own) moved by the distance contrast, V = b w+ / (b w+ + (1 - b) w-), w = 1 / max(d, d_min), i.e.
  logit V = logit b + log(d- / d+) (d clamped): each outcome's set weighted by its share of the group, as a
  1/d kNN over rollouts would; equal distances, no unit of one outcome, or b 0 or 1: b. contrast (the
  default before; no base rate, worse than grpo): V = d- / (d+ + d-),
  d+ / d- the smallest distance to a correct / an incorrect unit (set or rollout): near only correct spans
  gives 1, near only incorrect ones 0 (the 1/d weighting of the nearest correct and the nearest incorrect
  unit, unclamped); no unit of one outcome (SHEAR's empty O(i)) or both distances 0: the group mean (plain
  GRPO; in-group the only place the own outcome enters under compare=opposing). knn (SVEB's earlier):
  sum r_u / max(d_u, d_min) / sum 1 / max(d_u, d_min) over the k nearest units (k = 0: all).
Defaults: the paper's signal (tail=truncated, span=covering, compare=opposing, minimum=set) and SVEB's
readout=base (in-group it reads the own outcome through b, as grpo does; held-out never). SVEB's earlier
construction (the `shear-sveb` preset): tail=full, span=trailing, compare=all, minimum=rollout, readout=knn.

Speed: per unit a branch and bound (shear_weights.min_over_spans); besides the nearest-neighbour bounds, the
distance between two spans' mean rows bounds W1 from below (|E X - E Y| <= E|X - Y| under any coupling).
Covering spans run shortest first, and a unit stops once its minimum cannot raise the maximum found so far.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sveb.core.errors import UsageError
from sveb.estimators.base import Estimator, ProblemGroup, State, group_mean
from sveb.estimators.knn import as_float_tensor, norm_and_centre, pairwise_dist, weighted_knn
from sveb.estimators.shear_weights import covering, grid_spans, outcome, span_minima

RULES = {"span": ("covering", "trailing"), "compare": ("opposing", "all"), "minimum": ("set", "rollout"),
         "tail": ("truncated", "full"), "readout": ("base", "contrast", "knn")}


def span_starts(T: int, w: int, s: int) -> list[tuple[int, int]]:
    """SVEB's earlier span grid (tail=full)."""
    return grid_spans(T, w, s, "full")


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


def contrast(d: np.ndarray, good: np.ndarray) -> float | None:
    """d- / (d+ + d-) from unit distances d and their outcomes; None without a unit of each outcome (finite
    distance) or with both nearest distances 0."""
    d_pos = d[good & np.isfinite(d)].min(initial=np.inf)
    d_neg = d[~good & np.isfinite(d)].min(initial=np.inf)
    if not (np.isfinite(d_pos) and np.isfinite(d_neg)) or d_pos + d_neg <= 0:
        return None
    return float(d_neg / (d_pos + d_neg))


def base_rate(d: np.ndarray, good: np.ndarray, base: float, d_min: float) -> float:
    """The group's base rate b moved by the distance contrast: b w+ / (b w+ + (1 - b) w-), w = 1 / max(d, d_min)
    of the nearest correct / incorrect unit; b itself without a unit of each outcome (finite distance), with
    equal weights, or with b 0 or 1."""
    d_pos = d[good & np.isfinite(d)].min(initial=np.inf)
    d_neg = d[~good & np.isfinite(d)].min(initial=np.inf)
    if not (np.isfinite(d_pos) and np.isfinite(d_neg)) or base <= 0 or base >= 1:
        return base
    w_pos, w_neg = 1.0 / max(d_pos, d_min), 1.0 / max(d_neg, d_min)
    if w_pos == w_neg:
        return base
    return float(base * w_pos / (base * w_pos + (1 - base) * w_neg))


@dataclass
class Shear(Estimator):
    """w, s: span length and stride in tokens; eps: Sinkhorn regularisation (a fraction of the group's mean
    hidden-state norm); exact: network simplex instead; span, compare, minimum, tail, readout: the rules above;
    k nearest units (0: all) for readout=knn; d_min (clamp in units of the mean norm; 0.1, as hista-sveb: with
    1e-3 the state's own overlapping span won in-group for every t >= w) for readout=knn and base; layer:
    hidden layer (-1 = last)."""
    description = ("SVEB's construction from SHEAR's signal (SHEAR defines no V(s)): d+ / d- = the paper's span "
                   "Wasserstein distance (one minimum over the set, covering spans) to the correct / incorrect "
                   "rollouts; SVEB's read-out from the group's base rate b: logit V = logit b + log(d- / d+)")
    grid = {"span": ["covering", "trailing"], "compare": ["opposing", "all"], "minimum": ["set", "rollout"],
            "readout": ["base", "contrast", "knn"], "tail": ["truncated", "full"]}
    constructed = True
    w: int = 100
    s: int = 25
    eps: float = 0.05
    exact: bool = False
    span: str = "covering"
    compare: str = "opposing"
    minimum: str = "set"
    tail: str = "truncated"
    readout: str = "base"
    k: int = 0
    d_min: float = 0.1
    layer: int = -1
    needs_hidden = True

    def __post_init__(self) -> None:
        for key, allowed in RULES.items():
            if getattr(self, key) not in allowed:
                raise UsageError(f"shear: -P {key}={getattr(self, key)}: must be one of {', '.join(allowed)}")
        if self.w < 1 or self.s < 1:
            raise UsageError(f"shear: -P w={self.w} s={self.s}: both must be >= 1")

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        base = group_mean(group)
        out = np.full(len(states), base)
        for n, (d, unit_reward) in enumerate(self.distances(group, states)):
            ok = np.isfinite(d)
            if not ok.any():
                continue
            if self.readout == "knn":
                out[n] = weighted_knn(d[ok], unit_reward[ok], self.k, self.d_min)
            elif self.readout == "base":
                out[n] = base_rate(d, unit_reward >= 0.5, base, self.d_min)
            else:
                v = contrast(d, unit_reward >= 0.5)
                out[n] = base if v is None else v
        return out

    def distances(self, group: ProblemGroup, states: Sequence[State]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per state, the distance to each unit (a rollout, or the incorrect and the correct set: minimum=set)
        in units of the group's mean hidden-state norm (inf: nothing of that unit compared), and each unit's
        reward (a set's: the mean reward of its compared rollouts)."""
        empty = (np.zeros(0), np.zeros(0))
        members = list(group.rollouts)
        if not states or not members:
            return [empty for _ in states]
        xs = [as_float_tensor(group.hidden(r.rollout_idx)) for r in members]
        scale, centre = norm_and_centre(xs)
        if centre is None:
            return [empty for _ in states]
        ys = torch.cat(xs).sub_(centre).div_(scale)
        ys_sq = (ys * ys).sum(1)
        offsets = np.cumsum([0] + [len(x) for x in xs])
        spans = np.array([(g, offsets[g] + st, ln, st + ln) for g, x in enumerate(xs)
                          for st, ln in grid_spans(len(x), self.w, self.s, self.tail)], dtype=np.int64)
        spans = spans.reshape(-1, 4)
        if not len(spans):
            return [empty for _ in states]
        s_owner, s_col, s_len, s_end = spans.T                 # rollout, first column in ys, length, end in rollout
        means = span_means(ys, s_col, s_len, offsets)            # W1 >= |mean(a) - mean(b)|: a second bound
        rewards = np.array([r.reward for r in members], dtype=np.float64)
        good = outcome(rewards)
        by_set = self.minimum == "set"
        unit_of = good[s_owner].astype(np.int64) if by_set else s_owner
        n_units = 2 if by_set else len(members)
        index = {r.rollout_idx: g for g, r in enumerate(members)}
        eps = None if self.exact else self.eps
        hidden_cache: dict[int, torch.Tensor] = {}
        result = []
        for st in states:
            own = index.get(st.rollout_idx)
            if own is not None:
                x = xs[own]
            else:
                if st.rollout_idx not in hidden_cache:
                    hidden_cache[st.rollout_idx] = as_float_tensor(group.hidden(st.rollout_idx))
                x = hidden_cache[st.rollout_idx]
            t = min(st.t, len(x))
            if own is None:
                x = x[:t]                                           # held-out: the rollout stops at the cut
            if t <= 0:
                result.append(empty)
                continue
            if self.span == "trailing":
                queries = [(max(0, t - self.w), t - max(0, t - self.w))]
            else:                                                   # the own grid, to its end where visible
                queries = covering(grid_spans(len(x), self.w, self.s, self.tail), t - 1)
            keep = np.ones(len(spans), dtype=bool)
            if own is not None:                                     # in-group
                keep &= (s_owner != own) if self.compare == "opposing" else ~((s_owner == own) & (s_end > t))
            compared = np.zeros(len(members), dtype=bool)
            compared[s_owner[keep]] = True
            if by_set:
                unit_reward = np.array([rewards[compared & (good == c)].mean() if (compared & (good == c)).any()
                                        else np.nan for c in (False, True)])
            else:
                unit_reward = rewards
            lo, hi = min(a for a, _ in queries), max(a + ln for a, ln in queries)
            q_all = (x[lo:hi] - centre) / scale
            D_all = pairwise_dist(q_all, ys, ys_sq)                 # [rows lo..hi, all rows]
            d = np.full(n_units, -np.inf)
            for a, ln in sorted(queries, key=lambda q: q[1]):       # short spans first: their distances are larger
                q_mean = q_all[a - lo : a - lo + ln].double().mean(0)
                mean_lb = (means[keep] - q_mean).norm(dim=1).numpy()
                dk = span_minima(D_all[a - lo : a - lo + ln], s_col[keep], s_len[keep], unit_of[keep], n_units,
                                 eps, mean_lb, floor=d if len(queries) > 1 else None)
                d = np.maximum(d, dk)                               # covering: the maximum over the spans
            result.append((d, unit_reward))
        return result
