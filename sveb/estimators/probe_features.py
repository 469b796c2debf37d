"""What the value probe reads at a state: pure functions on one rollout's "track", and the track's I/O.

A rollout's track holds, for every state position u = 0..T (u response tokens in the prefix):
- H[u]: the hidden state of `layer` at the prefix's last token (the last prompt token for u = 0);
- ent[u]: the entropy of the policy's next-token distribution there (the LM head on the final layer).
Both come from the shared hidden-state pass (sveb.lm.hidden), one forward per group; causal attention makes
H[u] and ent[u] functions of the prompt and the first u response tokens only. A state at t reads its own
track cut to [:t + 1] (`prefix`), the other rollouts' tracks and rewards, and t: never its own outcome.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sveb.core.errors import UsageError
from sveb.core.models import resolve

N_SCALARS = 4          # entropy at t, mean entropy over the window, log(1 + t), t / max_tokens
LOGIT_CHUNK = 1024     # positions per LM-head product (their logits are positions x vocab floats)


@dataclass(frozen=True)
class Track:
    H: np.ndarray      # [T + 1, d] float32
    ent: np.ndarray    # [T + 1] float64

    def prefix(self, t: int) -> "Track":
        """What a state at t may read of its own rollout."""
        return Track(self.H[: t + 1], self.ent[: t + 1])


def pooled(H: np.ndarray, t: int, pool: str, window: int) -> np.ndarray:
    """The hidden feature at position t: the last token's ("last") or the mean of the last `window` ("mean")."""
    t = min(t, len(H) - 1)
    if pool == "last":
        return H[t]
    return H[max(0, t - window + 1): t + 1].mean(0)


def scalars(ent: np.ndarray, t: int, window: int, max_tokens: int) -> np.ndarray:
    t = min(t, len(ent) - 1)
    return np.array([ent[t], ent[max(0, t - window + 1): t + 1].mean(), np.log1p(t), t / max(max_tokens, 1)])


def loo_logit(others_rewards, a: float = 0.5) -> float:
    """Logit of the others' mean reward, smoothed (k + a) / (n + 2a) so it stays finite at 0/n and n/n."""
    r = np.asarray(others_rewards, dtype=np.float64)
    k, n = float(r.sum()), len(r)
    return float(np.log((k + a) / (n - k + a)))


def state_row(own: Track, t: int, others: list[Track], others_rewards, *, pool: str, window: int,
              max_tokens: int, relative: bool) -> tuple[np.ndarray, np.ndarray, float]:
    """(hidden block, scalar block, offset) of the state at t of the rollout whose prefix is `own`.

    plain: [h; ent, ent_w, log1p t, t/max, mean_others, logit(mean_others)].
    relative: h and the entropies centred on the others' at the same t (min(t, T_j)), no group mean.
    The third element is logit(mean_others), which the caller uses as the offset or not.
    """
    h, s = pooled(own.H, t, pool, window), scalars(own.ent, t, window, max_tokens)
    logit = loo_logit(others_rewards)
    if not relative:
        m = float(np.mean(others_rewards)) if len(others_rewards) else 0.5
        return h, np.concatenate([s, [m, logit]]), logit
    if others:
        h = h - np.mean([pooled(o.H, t, pool, window) for o in others], 0)
        s = s.copy()
        s[:2] -= np.mean([scalars(o.ent, t, window, max_tokens)[:2] for o in others], 0)
    return h, s, logit


def lm_head_weight(model_path: str) -> np.ndarray:
    """[vocab, d] output embedding of a safetensors checkpoint (the input embedding where they are tied)."""
    from safetensors import safe_open
    path = Path(model_path)
    files = sorted(path.glob("*.safetensors"))
    names = ("lm_head.weight", "model.embed_tokens.weight", "embed_tokens.weight")
    cfg = json.loads((path / "config.json").read_text()) if (path / "config.json").exists() else {}
    if cfg.get("tie_word_embeddings", False):
        names = names[1:]
    for name in names:
        for f in files:
            with safe_open(str(f), framework="pt") as st:  # numpy has no bf16, the dtype real checkpoints ship in
                if name in st.keys():
                    return st.get_tensor(name).float().numpy()
    raise UsageError(f"probe: no LM head ({' or '.join(names)}) in the safetensors files of {model_path}")


def entropies(hidden_final: np.ndarray, head, device: str = "cpu") -> np.ndarray:
    """Entropy (nats) of softmax(head @ h) for each row of the final (normed) hidden states."""
    import torch
    W = head if isinstance(head, torch.Tensor) else torch.from_numpy(head)
    out = []
    for a in range(0, len(hidden_final), LOGIT_CHUNK):
        h = torch.from_numpy(np.asarray(hidden_final[a:a + LOGIT_CHUNK], dtype=np.float32)).to(device)
        logp = torch.log_softmax(h @ W.T, dim=-1)
        out.append(-(logp.exp() * logp).sum(-1).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


class Tracks:
    """Tracks of one build's rollouts, a group at a time, from its shared hidden-state pass."""

    def __init__(self, hs, model: str, layer: int):
        """hs: the build's hidden-state extractor (the context's `hidden.states(bdir)`); model: the policy whose LM
        head gives the entropies."""
        import torch
        self.hs, self.layer = hs, layer
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self._head = torch.from_numpy(lm_head_weight(resolve(model))).to(self.device)

    @property
    def dtype(self) -> str:
        return self.hs.dtype  # the pass's dtype changes the features

    def group(self, pid: str, rows: list[dict]) -> dict[int, Track]:
        """Every rollout's track. The final layer comes from the build's shared pass (its response positions)
        and the prompt's own short pass (the last prompt token: the same for every rollout of the group, by
        causal attention), so a probe on the final layer runs no forward pass of its own; another layer
        still needs one pass at every position. The entropies are cached beside the pass: probe and probe-mc
        under both protocols read them, and the LM head over every position is the dear part."""
        final = self._final(pid, rows)
        H = final if self.layer == -1 else self._layer(pid, rows, self.layer)
        ent = self._entropies(pid, final)
        return {i: Track(H[i], ent[i]) for i in final}

    def _final(self, pid: str, rows: list[dict]) -> dict[int, np.ndarray]:
        """{rollout_idx: [T + 1, d]}: the final layer at the last prompt token and every response token."""
        if len({tuple(r["prompt_token_ids"]) for r in rows}) != 1:  # not one group's prompt: a pass of its own
            return self._layer(pid, rows, -1)
        resp = self.hs.group(pid, rows)  # the shared pass's tap (sveb.lm.hidden.SHARED_RESP)
        last = self.hs.prompt_states(pid, rows)[-1:].astype(np.float32)
        return {r["rollout_idx"]: np.concatenate([last, resp[r["rollout_idx"]].astype(np.float32)]) for r in rows}

    def _layer(self, pid: str, rows: list[dict], layer: int) -> dict[int, np.ndarray]:
        """{rollout_idx: [T + 1, d]}: `layer` from the last prompt token on, from a pass at every position."""
        full = self.hs.fulls(pid, rows, [layer])[layer]
        return {r["rollout_idx"]: full[r["rollout_idx"]][len(r["prompt_token_ids"]) - 1:].astype(np.float32)
                for r in rows}

    def _entropies(self, pid: str, final: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        def compute():  # the group's positions through the head together: one large product, not G small ones
            keys = list(final)
            ent = entropies(np.concatenate([final[i] for i in keys]), self._head, self.device)
            return dict(zip(keys, np.split(ent, np.cumsum([len(final[i]) for i in keys])[:-1])))
        got = self.hs.derived(pid, "entropy", compute)
        if set(got) == set(final) and all(len(got[i]) == len(final[i]) for i in final):
            return got
        return compute()  # a cache that does not fit the rollouts (never written by this code): not trusted
