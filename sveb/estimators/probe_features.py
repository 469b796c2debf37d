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
LOGIT_BLOCK = 256      # positions per LM-head product, padded to it: a position's entropy is then the same
                       # whatever else is computed with it (its logits are positions x vocab floats)
ENTROPY_CACHE = "entropy-at"  # NaN where not computed: a state reads only its window's positions


@dataclass(frozen=True)
class Track:
    H: np.ndarray      # [T + 1, d] float32
    ent: np.ndarray    # [T + 1] float64

    def prefix(self, t: int) -> Track:
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
        return h, _finite(np.concatenate([s, [m, logit]])), logit
    if others:
        h = h - np.mean([pooled(o.H, t, pool, window) for o in others], 0)
        s = s.copy()
        s[:2] -= np.mean([scalars(o.ent, t, window, max_tokens)[:2] for o in others], 0)
    return h, _finite(s), logit


def _finite(s: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(s)):  # NaN: an entropy not computed (Tracks.group's ts missed this state's t)
        raise RuntimeError("probe: a state read an entropy that was not computed; pass its t to Tracks.group")
    return s


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
    """Entropy (nats) of softmax(head @ h) for each row of the final (normed) hidden states, in blocks of
    LOGIT_BLOCK rows (the last one zero-padded), so that a row's result does not depend on the batch's shape."""
    import torch
    W = head if isinstance(head, torch.Tensor) else torch.from_numpy(head)
    x = np.asarray(hidden_final, dtype=np.float32)
    out = []
    for a in range(0, len(x), LOGIT_BLOCK):
        block = np.zeros((LOGIT_BLOCK, x.shape[1]), dtype=np.float32)
        n = len(x[a:a + LOGIT_BLOCK])
        block[:n] = x[a:a + LOGIT_BLOCK]
        logp = torch.log_softmax(torch.from_numpy(block).to(device) @ W.T, dim=-1)
        out.append(-(logp.exp() * logp).sum(-1).double().cpu().numpy()[:n])
    return np.concatenate(out) if out else np.zeros(0)


def read_positions(lengths: dict[int, int], ts, window: int) -> dict[int, np.ndarray]:
    """{rollout_idx: sorted positions} whose entropies states at the positions `ts` read: for each t, the
    `window` positions up to min(t, len - 1) of every rollout of the group (its own, and the others' that
    relative features centre on), as `scalars` reads them."""
    out = {}
    for i, n in lengths.items():
        need: set[int] = set()
        for t in ts:
            c = min(int(t), n - 1)
            need.update(range(max(0, c - window + 1), c + 1))
        out[i] = np.array(sorted(need), dtype=np.int64)
    return out


class Tracks:
    """Tracks of one build's rollouts, a group at a time, from its shared hidden-state pass."""

    def __init__(self, hs, model: str, layer: int, window: int = 1):
        """hs: the build's hidden-state extractor (the context's `hidden.states(bdir)`); model: the policy whose LM
        head gives the entropies; window: how many positions up to a state's t its features read."""
        import torch
        self.hs, self.layer, self.window = hs, layer, window
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self._head = torch.from_numpy(lm_head_weight(resolve(model))).to(self.device)

    @property
    def dtype(self) -> str:
        return self.hs.dtype  # the pass's dtype changes the features

    def group(self, pid: str, rows: list[dict], ts=None) -> dict[int, Track]:
        """Every rollout's track. The final layer comes from the build's shared pass (its response positions)
        and the prompt's own short pass (the last prompt token: the same for every rollout of the group, by
        causal attention), so a probe on the final layer runs no forward pass of its own; another layer
        still needs one pass at every position. The entropies are cached beside the pass: probe and probe-mc
        under both protocols read them, and the LM head is the dear part: with `ts` (the positions of the states
        that will be read) only the positions those states read are computed, the others are NaN."""
        final = self._final(pid, rows)
        H = final if self.layer == -1 else self._layer(pid, rows, self.layer)
        lengths = {i: len(a) for i, a in final.items()}
        need = ({i: np.arange(n) for i, n in lengths.items()} if ts is None
                else read_positions(lengths, ts, self.window))
        ent = self._entropies(pid, final, need)
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

    def _entropies(self, pid: str, final: dict[int, np.ndarray], need: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """The entropies at `need` (NaN elsewhere): those cached read, the missing ones through the head in one
        product for the group, and the cache rewritten with them."""
        got = self.hs.read_derived(pid, ENTROPY_CACHE) or {}
        ent = {i: got[i].astype(np.float64) if i in got and len(got[i]) == len(final[i])
               else np.full(len(final[i]), np.nan) for i in final}  # a cache that does not fit: not trusted
        todo = {i: p[np.isnan(ent[i][p])] for i, p in need.items()}
        if sum(len(p) for p in todo.values()):
            keys = [i for i in todo if len(todo[i])]
            vals = entropies(np.concatenate([final[i][todo[i]] for i in keys]), self._head, self.device)
            for i, v in zip(keys, np.split(vals, np.cumsum([len(todo[i]) for i in keys])[:-1])):
                ent[i][todo[i]] = v
            self.hs.write_derived(pid, ENTROPY_CACHE, ent)
        return ent
