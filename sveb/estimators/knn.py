"""Helpers shared by the hidden-state estimators (Hista, SHEAR): group scale, distances, 1/d weights."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch


def as_float_tensor(x) -> torch.Tensor:
    """Hidden states as float32 torch (float16/bfloat16 stores are upcast once)."""
    return torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).float()


def norm_and_centre(xs: Iterable[torch.Tensor]) -> tuple[float, torch.Tensor | None]:
    """The group's mean hidden-state L2 norm (over every response position of every rollout), used to
    make distances comparable across models, and the mean vector, subtracted before distances only to
    keep float32 matrix-product distances accurate (distances do not depend on it)."""
    total, count, rsum = 0.0, 0, None
    for x in xs:
        if len(x):
            total += float(x.norm(dim=1).double().sum())
            count += len(x)
            s = x.double().sum(0)
            rsum = s if rsum is None else rsum + s
    if count == 0:
        return 1.0, None
    return (total / count) or 1.0, (rsum / count).float()


_NEAR = 1e-3      # |q-y|^2 below this fraction of |q|^2 + |y|^2 is recomputed directly
_REFINE_CHUNK = 1 << 16


def pairwise_dist(q: torch.Tensor, y: torch.Tensor, y_sq: torch.Tensor | None = None) -> torch.Tensor:
    """Euclidean distances [n, m] between rows, through one matrix product (y_sq = |y|^2 may be cached).

    |q|^2 + |y|^2 - 2 q.y cancels badly for near-identical rows (float32 noise of order 1e-3 of the
    norm, as large as the d_min clamp), so those few pairs are recomputed from differences in float64.
    """
    if y_sq is None:
        y_sq = (y * y).sum(1)
    q_sq = (q * q).sum(1)
    d2 = q_sq[:, None] + y_sq[None, :] - 2.0 * (q @ y.T)
    i, j = torch.nonzero(d2 < _NEAR * (q_sq[:, None] + y_sq[None, :]), as_tuple=True)
    for s in range(0, len(i), _REFINE_CHUNK):
        a, b = i[s : s + _REFINE_CHUNK], j[s : s + _REFINE_CHUNK]
        d2[a, b] = (q[a].double() - y[b].double()).pow(2).sum(1).to(d2.dtype)
    return d2.clamp_(min=0).sqrt_()


def weighted_knn(dist: np.ndarray, rewards: np.ndarray, k: int, d_min: float) -> float:
    """sum w r / sum w over the k nearest, w = 1 / max(d, d_min); k <= 0 uses all."""
    dist, rewards = np.asarray(dist, np.float64), np.asarray(rewards, np.float64)
    if len(dist) == 0:
        raise ValueError("weighted_knn needs at least one neighbour")
    if 0 < k < len(dist):
        idx = np.argpartition(dist, k - 1)[:k]
        dist, rewards = dist[idx], rewards[idx]
    w = 1.0 / np.maximum(dist, d_min)
    return float((w * rewards).sum() / w.sum())
