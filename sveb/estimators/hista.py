"""Hista as its authors compute it (Hista/Numca paper Sec. 5.2; their code VOXXXX1874/Hista @ 6f4ae4e,
src/rl/utils/hista_utils.py and the in-group loop of src/sveb/hista/evaluate_sta_estim_from_existing.py).

Defaults are their scripts' (docs/estimators.md, "Hista"), each rule a parameter:
- history: the last layer (after the final norm) over prompt + response; an EMA from the prompt's first token
  (ema_0 = x_0, ema_k = alpha ema_{k-1} + (1 - alpha) x_k, divided by 1 - alpha^(k+1)), kept at absolute
  positions 0, mean_window, 2 mean_window, ... (float32, as theirs);
- nodes: at the start token (the token ending `<|im_start|>assistant`, a prompt-only history), at the absolute
  multiples of node_interval after it and at the last token; a node at token i holds the compressed history up
  to index i // mean_window and its rollout's binarized reward;
- distance: MinDistance, the mean over the longer history of each element's minimum L2 distance to the other;
  own nodes whose history is longer than the query's are masked; clamped below at `min_distance` (raw units);
  the k smallest, weights 1 / d^t, a total weight below 1e-8 gives 0.0;
- k follows the own rollout's nodes: k_i = max_k - ((max_k - min_k) // n) * i;
- read-out (`read="snap"`): the value at the node before the first node at or after the cut's last token.
Ties among equal clamped distances (torch.topk's order is documented as undefined; on CUDA it was measured to be
pool order, benchmarks/hista_topk_ties.py) are broken by pool order:
lower rollout index, then earlier node (a stable sort).

Held-out: the group has no own rollout and the own rollout stops at the cut, so the own nodes are the start
token, the grid nodes before the cut and the cut itself; nothing of the own rollout is a neighbour; the read-out
snaps as in-group (to the node before the one at the cut). `read="cut"` values the cut's own history instead.
`hista-sveb` is SVEB's earlier variant (sveb.estimators.hista_sveb).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from sveb.core.errors import UsageError
from sveb.estimators.base import Estimator, ProblemGroup, State, hidden_source
from sveb.estimators.knn import as_float_tensor, norm_and_centre

TINY_WEIGHT = 1e-8


def _ema_run(x: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The authors' exponential running average of x [S, H] (float32, their operation order): the bias-corrected
    value at every position, and the running (uncorrected) state after the last one."""
    x = x.float()
    out = torch.empty_like(x)
    powers = torch.pow(alpha, torch.arange(1, x.shape[0] + 1))
    ema = None
    for k in range(x.shape[0]):
        ema = x[k] if k == 0 else alpha * ema + (1 - alpha) * x[k]
        out[k] = ema / (1 - powers[k])
    return out, ema


def ema_history(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """The authors' exponential running average of x [S, H] at every position (float32, their operation order)."""
    return _ema_run(x, alpha)[0]


@dataclass(frozen=True)
class PromptEMA:
    """The EMA over a group's shared prompt: its kept rows and its running state at the last prompt token."""
    rows: torch.Tensor          # [ceil(P / mean_window), H]
    state: torch.Tensor | None  # ema at token P - 1 (None for an empty prompt)
    length: int


def ema_prompt(prompt, alpha: float, mean_window: int, width: int) -> PromptEMA:
    x = torch.zeros((0, width)) if prompt is None else torch.as_tensor(np.asarray(prompt, np.float32))
    if len(x) == 0:
        return PromptEMA(torch.zeros((0, width)), None, 0)
    full, state = _ema_run(x, alpha)
    return PromptEMA(full[::mean_window].clone(), state, len(x))


def ema_histories(pre: PromptEMA, responses: list, alpha: float, mean_window: int) -> list[torch.Tensor]:
    """Each rollout's compressed history (prompt + response, kept at absolute multiples of mean_window),
    the responses run as one batch from the prompt's state: elementwise the authors' per-sequence loop."""
    xs = [torch.as_tensor(np.asarray(r, np.float32)) for r in responses]
    if not xs:
        return []
    P, T, B = pre.length, max(len(x) for x in xs), len(xs)
    H = xs[0].shape[1]
    batch = torch.zeros((B, T, H))
    for b, x in enumerate(xs):
        batch[b, : len(x)] = x
    powers = torch.pow(alpha, torch.arange(1, P + T + 1))
    ema = None if pre.state is None else pre.state.expand(B, H)
    kept = []
    for k in range(P, P + T):
        xk = batch[:, k - P]
        ema = xk if ema is None else alpha * ema + (1 - alpha) * xk
        if k % mean_window == 0:
            kept.append((k, ema / (1 - powers[k])))
    out = []
    for b, x in enumerate(xs):
        rows = [v[b] for k, v in kept if k < P + len(x)]
        out.append(torch.cat([pre.rows, torch.stack(rows)]) if rows else pre.rows)
    return out


def node_tokens(length: int, start: int, interval: int) -> list[int]:
    """Absolute token indices of a sequence's nodes (the authors' uniform selection, then the start snap)."""
    end = length - 1
    if end - 0 < interval:
        idx = [0, end]
    else:
        idx = [0] + [i * interval for i in range(1, end // interval + 1) if i * interval < end]
        if idx[-1] != end:
            idx.append(end)
    kept = [i for i in idx if i > start - interval]
    if not kept:
        return []
    kept[0] = start
    return kept


def k_schedule(max_k: int, min_k: int, n: int) -> list[int]:
    return [max_k - ((max_k - min_k) // n) * i for i in range(n)]


def node_distances(online: torch.Tensor, online_ends: list[int], block: torch.Tensor, ends: list[int],
                   mask_longer: bool) -> torch.Tensor:
    """MinDistance between the online histories online[:m] (m in online_ends) and block[:n] (n in ends),
    [len(online_ends), len(ends)], by the cummin/cumsum trick on one cdist, as the authors compute it."""
    m_max, n_max = max(online_ends), max(ends)
    sub = torch.cdist(online[:m_max].float(), block[:n_max].float(), p=2)
    rows = torch.cumsum(torch.cummin(sub, dim=1).values, dim=0)
    cols = torch.cumsum(torch.cummin(sub, dim=0).values, dim=1)
    r = torch.tensor([m - 1 for m in online_ends])
    c = torch.tensor([n - 1 for n in ends])
    m = torch.tensor(online_ends, dtype=torch.float32)[:, None]
    n = torch.tensor(ends, dtype=torch.float32)[None, :]
    d = torch.where(m >= n, rows[r[:, None], c[None, :]] / m, cols[r[:, None], c[None, :]] / n)
    if mask_longer:
        d = torch.where(m >= n, d, torch.full_like(d, float("inf")))
    return d


def knn_value(dist: torch.Tensor, rewards: torch.Tensor, k: int, clamp: float, t: float) -> float:
    """1/d^t-weighted mean reward of the k nearest after clamping; ties in pool order (a stable sort)."""
    d = torch.clamp_min(torch.nan_to_num(dist, nan=float("inf")), clamp)
    k = min(k, len(d))
    vals, idx = torch.sort(d, stable=True)
    vals, idx = vals[:k], idx[:k]
    w = 1.0 / (vals ** t)
    total = torch.sum(w)
    if total < TINY_WEIGHT:
        return 0.0
    return float(torch.sum(torch.nan_to_num(rewards[idx], nan=0.0) * w) / total)


def hista_values(hist: dict[int, torch.Tensor], lengths: dict[int, int], rewards: dict[int, float],
                 members: Sequence[int], queries: dict[int, list[int]], prompt_len: int, start: int, *,
                 mean_window=5, node_interval=50, max_k=66, min_k=6, min_distance=5.0, t=1.0,
                 read="snap") -> dict[tuple[int, int], float]:
    """{(rollout, cut_tokens): value} for the queried cuts, from each rollout's compressed history `hist`
    (`ema_histories`) and token count `lengths` (prompt + response); `members` are the neighbours' rollouts in
    pool order; a query rollout's history covers what the protocol lets it see."""
    nodes = {j: node_tokens(lengths[j], start, node_interval) for j in hist}
    # the neighbours' nodes, by rollout in pool order: each node's history length in kept rows
    blocks = {j: [q // mean_window + 1 for q in nodes[j]] for j in members if j in hist and nodes[j]}
    reward = torch.tensor([1.0 if rewards[j] > 0 else 0.0 for j, ends in blocks.items() for _ in ends])
    out: dict[tuple[int, int], float] = {}
    for i, cuts in queries.items():
        if i not in hist or not nodes[i]:
            continue
        if not blocks:
            out.update({(i, c): 0.0 for c in cuts})  # no neighbour: the authors' zero total weight
            continue
        q_nodes = nodes[i]
        ks = k_schedule(max_k, min_k, len(q_nodes))
        if read == "snap":
            on_ends = [q // mean_window + 1 for q in q_nodes]
        else:  # read="cut": the history at each cut's last token
            on_ends = [(prompt_len + c - 1) // mean_window + 1 for c in cuts]
        dist = torch.cat([node_distances(hist[i], on_ends, hist[j], ends, mask_longer=j == i)
                          for j, ends in blocks.items()], dim=1)
        for c_i, cut in enumerate(cuts):
            last = prompt_len + cut - 1
            at = next((n for n, q in enumerate(q_nodes) if q >= last), len(q_nodes) - 1)
            n = max(at - 1, 0)          # the authors' at - 1; at 0 (a cut at the start) -> the start node
            row = dist[n] if read == "snap" else dist[c_i]
            out[(i, cut)] = knn_value(row, reward, ks[n], min_distance, t)
    return out


@dataclass
class Hista(Estimator):
    """The authors' Hista; defaults are their scripts' (module docstring). `history`: "prompt" (the EMA runs
    from the prompt's first token; nodes at the start token and absolute multiples of node_interval) or
    "response" (the response alone, nodes from its first token); `read`: "snap" (the node before the first node
    at or after the cut) or "cut" (the cut's own history); `scale`: "raw" (min_distance in raw units) or "norm"
    (distances divided by the group's mean hidden-state norm before the clamp, SVEB's earlier unit)."""
    description = ("Hista as its authors' code computes it: 1/d-weighted kNN over EMA-compressed prompt + response "
                   "hidden-state histories, raw clamp 5.0, k schedule, node snap (VOXXXX1874/Hista hista_utils)")
    grid = {"history": ["prompt", "response"], "read": ["snap", "cut"], "min_distance": ["5.0", "1.0", "10.0"],
            "min_k": ["6", "66"], "alpha": ["0.7", "0"]}

    alpha: float = 0.7
    mean_window: int = 5
    node_interval: int = 50
    max_k: int = 66
    min_k: int = 6
    min_distance: float = 5.0
    t: float = 1.0
    history: str = "prompt"
    read: str = "snap"
    scale: str = "raw"
    layer: int = -1
    needs_hidden = True
    needs_prompt = True     # the hidden-state service also gives the prompt's states and the start token

    def __post_init__(self) -> None:
        checks = [(0.0 <= self.alpha < 1.0, "alpha", "in [0, 1)"), (self.mean_window >= 1, "mean_window", ">= 1"),
                  (self.node_interval >= 1, "node_interval", ">= 1"), (self.max_k >= 1, "max_k", ">= 1"),
                  (1 <= self.min_k <= self.max_k, "min_k", "in [1, max_k]"),
                  (self.min_distance > 0, "min_distance", "> 0"), (self.t > 0, "t", "> 0"),
                  (self.history in ("prompt", "response"), "history", "prompt or response"),
                  (self.read in ("snap", "cut"), "read", "snap or cut"), (self.scale in ("raw", "norm"), "scale",
                                                                         "raw or norm")]
        for ok, key, what in checks:
            if not ok:
                raise UsageError(f"hista: -P {key}={getattr(self, key)}: must be {what}")

    def _group_inputs(self, group: ProblemGroup) -> tuple[np.ndarray | None, int]:
        src = hidden_source(group.hidden_fn)
        if self.history == "response":
            return None, 0
        prompt = src.prompt() if hasattr(src, "prompt") else None
        start = src.start() if hasattr(src, "start") else None
        if prompt is None or start is None:
            raise UsageError("hista: the hidden-state source gives no prompt states (history=prompt needs them); "
                             "use -P history=response")
        return prompt, int(start)

    def _memo_for(self, group: ProblemGroup) -> dict:
        """Per-problem memo (held-out asks once per state): the prompt's EMA and each member's history."""
        src = hidden_source(group.hidden_fn)
        if getattr(self, "_memo_src", None) is not src:
            self._memo_src, self._memo = src, {"rollouts": {}}
        return self._memo

    def estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        return np.clip(self.raw_estimate(group, states), 0.0, 1.0)  # float32 sums can pass 1 by 1e-7

    def raw_estimate(self, group: ProblemGroup, states: Sequence[State]) -> np.ndarray:
        """The values as the authors' code gives them (float32 sums, unclipped): conformance compares these."""
        out = np.zeros(len(states))
        if not states:
            return out
        memo = self._memo_for(group)
        if "pre" not in memo:
            prompt, start = self._group_inputs(group)
            width = np.asarray(group.hidden(states[0].rollout_idx)).shape[1]
            memo["pre"] = ema_prompt(prompt, self.alpha, self.mean_window, width)
            memo["start"] = start
        pre, start = memo["pre"], memo["start"]
        members = sorted(r.rollout_idx for r in group.rollouts)
        queries: dict[int, list[int]] = {}
        for s in states:
            queries.setdefault(s.rollout_idx, []).append(s.t)
        hist, lengths, arrays = {}, {}, {}
        todo = []
        for j in dict.fromkeys([*members, *queries]):
            arr = group.hidden(j)
            hit = memo["rollouts"].get(j)
            if hit is not None and hit[0] is arr:
                hist[j] = hit[1]
            else:
                todo.append(j)
            arrays[j] = arr
            lengths[j] = pre.length + len(arr)
        for j, h in zip(todo, ema_histories(pre, [arrays[j] for j in todo], self.alpha, self.mean_window)):
            hist[j] = h
            memo["rollouts"][j] = (arrays[j], h)
        hist = {j: h for j, h in hist.items() if lengths[j] > 0}
        if self.scale == "norm":  # SVEB's earlier unit: distances / the group's mean hidden-state norm
            unit, _ = norm_and_centre(as_float_tensor(arrays[j]) for j in members)
            hist = {j: h / unit for j, h in hist.items()}
        rewards = {j: group.rollout(j).reward for j in hist}
        values = hista_values(hist, lengths, rewards, members, queries, pre.length, start,
                              mean_window=self.mean_window, node_interval=self.node_interval, max_k=self.max_k,
                              min_k=self.min_k, min_distance=self.min_distance, t=self.t, read=self.read)
        for n, s in enumerate(states):
            out[n] = values.get((s.rollout_idx, s.t), 0.0)
        return out
