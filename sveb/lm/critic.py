"""PPO's critic on frozen rollouts: an LM body with a zero-initialised linear value head.

V(s_t) (prompt + t response tokens) is the head's output at the last token of s_t: the last prompt
token for s_0, response token t-1 for t >= 1. Reward only at the last response token, V(s_T) = 0,
targets stop_grad(V + A_GAE), MSE over response positions (token mean over an optimizer step).

Speed (the model: sveb.lm.value_model): only the top `train_layers` decoder layers, the final norm and the head are
trained; the frozen bottom of the body runs once per rollout and its output is kept in memory (up to a byte
budget; past it, it is recomputed per batch, or read again from the shared pass's cache, rollout by
rollout: docs/scaling.md), so an epoch costs the top layers only.

Targets are computed per micro-batch from the same forward pass that is trained (detached): free,
exactly the paper's L_V = (V - sg(V + A))^2 with one consistent set of values per rollout (a
micro-batch holds whole rollouts), and as fresh as the critic itself.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.signal import lfilter
from torch import nn

from sveb.core.config import derive_seed, fingerprint
from sveb.core.errors import UsageError
from sveb.lm.checkpoints import latest_epoch, load_epoch, save_epoch
from sveb.lm.hidden_pass import call_tokens, plan_batches
from sveb.lm.value_model import ValueModel, default_dtype, load_body
from sveb.store import atomic_write_bytes

BATCH_TOKENS = 8192          # padded tokens per no-grad forward
CACHE_BYTES = 4 << 30        # frozen-feature cache budget (on a GPU: at least a quarter of its free memory)
GPU_CACHE_SHARE = 0.25


def gae_targets(values: np.ndarray, final_reward: float, gamma: float, lam: float) -> np.ndarray:
    """V + GAE advantages for one rollout; values[t] = V(s_t), t < T; V(s_T) = 0; reward at t = T-1."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return v.copy()
    delta = np.append(v[1:], 0.0) * gamma - v
    delta[-1] += final_reward
    # A_t = delta_t + gamma*lam*A_{t+1}: a first-order filter run backwards
    adv = lfilter([1.0], [1.0, -gamma * lam], delta[::-1])[::-1]
    return v + adv


@dataclass(frozen=True)
class CriticConfig:
    model: str                  # alias, directory or hub id of the LM body
    lam: float = 1.0
    gamma: float = 1.0
    lr: float = 3e-4
    epochs: int = 2
    batch: int = 8              # rollouts per micro-batch
    grad_accum: int = 1         # micro-batches per optimizer step
    train_layers: int = 2
    seed: int = 0
    weight_decay: float = 0.01


@dataclass(frozen=True)
class Seq:
    """One rollout as the critic sees it: prompt + response[:-1], values V(s_0..s_{T-1}); V(s_T) is the terminal's
    and never trained. Made `through_end` (make_seq): prompt + response, one value more, V(s_T)."""
    key: tuple
    ids: tuple[int, ...]
    prompt_len: int
    T: int                      # values per rollout: its response tokens (+1 through the end)
    reward: float


def make_seq(key: tuple, prompt: Sequence[int], response: Sequence[int], reward: float,
             through_end: bool = False) -> Seq:
    """`through_end` for reading V(s_T) at the response's last token, the value of a state holding the whole
    response (the paper's cut of a response with no space); never for training (GAE targets s_0..s_{T-1})."""
    if len(prompt) == 0:
        raise ValueError(f"rollout {key}: empty prompt (V(s_0) is read at the last prompt token)")
    ids = tuple(prompt) + tuple(response if through_end else response[:-1])
    return Seq(key, ids, len(prompt), len(response) + int(through_end), float(reward))


def pad_right(rows: list[torch.Tensor]) -> torch.Tensor:
    return nn.utils.rnn.pad_sequence(rows, batch_first=True)  # right padding: causal => exact


def token_batches(seqs: Sequence[Seq], budget: int, device: str = "cpu") -> list[list[Seq]]:
    """Batches of similar length within `budget` padded tokens (a longer rollout alone), by the planner the
    hidden pass uses: it weighs padding against a call's cost on `device`."""
    lengths = [len(s.ids) for s in seqs]
    return [[seqs[i] for i in part] for part in plan_batches(lengths, 0, budget, call_tokens(device))]


class Critic:
    """A value model plus the cache of its frozen features; fit() trains (or resumes, or reloads)."""

    def __init__(self, cfg: CriticConfig, path: str, device: str | None = None, cache_bytes: int = CACHE_BYTES,
                 dtype: str | None = None):
        from sveb.core.device import torch_device  # per call: tests patch sveb.core.device
        self.cfg, self.cache_bytes = cfg, cache_bytes
        self.device = device or torch_device()
        if self.device == "cuda" and cache_bytes == CACHE_BYTES:  # an H200 holds 10x more features than 4 GiB
            self.cache_bytes = max(cache_bytes, int(GPU_CACHE_SHARE * torch.cuda.mem_get_info()[0]))
        self.dtype = dtype or default_dtype(self.device)   # the frozen body's; trained weights are fp32
        self.model = ValueModel(self._load_body(path), cfg.train_layers)
        self.vocab = self.model.body.config.vocab_size
        self._cache: dict[tuple, torch.Tensor] = {}
        self._cached_bytes, self._cache_full = 0, False
        # seqs -> {key: [len(ids), d] input of the first trained layer}: the shared hidden-state pass
        # (sveb.lm.hidden) when set, so the critic does not run the frozen body itself
        self.features_fn: Callable[[Sequence[Seq]], dict[tuple, torch.Tensor]] | None = None
        self._check_split()

    def _load_body(self, path: str) -> nn.Module:
        return load_body(path, self.device, self.dtype)

    def use_features(self, fn: Callable[[Sequence[Seq]], dict[tuple, torch.Tensor]] | None) -> None:
        """Set `features_fn`; cached features from the other source (own pass vs shared pass) are dropped."""
        if (fn is None) != (self.features_fn is None):
            self._cache.clear()
            self._cached_bytes, self._cache_full = 0, False
        self.features_fn = fn

    def _amp(self):
        """bf16 autocast over a bf16 body (its fp32 trained layers then run in bf16 too), on either device."""
        if self.dtype == "bfloat16":
            return torch.autocast(self.device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def release_features(self) -> None:
        """Drop the model behind `features_fn` (the shared pass's policy copy): its outputs are on disk."""
        release = getattr(self.features_fn, "release", None)
        if release is not None:
            release()

    def fingerprint(self, data_key: str) -> str:
        """A checkpoint's identity: the data, the config, where the frozen features come from and in which
        dtype, and the device and dtype it trains in (a CPU-fp32 critic is not a GPU-bf16 one)."""
        shared = self.features_fn is not None
        source = ("shared-pass", getattr(self.features_fn, "dtype", None)) if shared else "own-pass"
        return fingerprint("critic", data_key, self.cfg, source, self.device, self.dtype)

    @torch.no_grad()
    def _check_split(self) -> None:
        """The layer-slicing trick must reproduce the body's own forward (fails on e.g. scaled embeddings)."""
        ids = (torch.arange(1, 9, device=self.device) % self.vocab)[None]
        with self._amp():
            full = self.model.body(input_ids=ids, use_cache=False).last_hidden_state.float()
            split = self.model.top(self.model.lower(ids)).float()
        if not torch.allclose(full, split, atol=1e-2 * (1 + full.abs().max().item()), rtol=1e-2):
            raise UsageError(f"critic body {type(self.model.body).__name__}: split forward does not match the "
                             f"full forward")

    @torch.no_grad()
    def features(self, seqs: Sequence[Seq]) -> list[torch.Tensor]:
        """Each seq's input of the first trained layer. The shared pass's come as stored (bf16 bits, half an fp32
        copy's memory in the cache) and are handed on as float32, exactly what they were read as before."""
        from sveb.lm import timers
        missing = list({s.key: s for s in seqs if s.key not in self._cache}.values())
        fresh: dict[tuple, torch.Tensor] = {}
        if self.features_fn is not None and missing:
            read = self.features_fn(missing)
            with timers.timed("copy.h2d"):
                fresh = {k: v.to(self.device) for k, v in read.items()}
            for s in missing:
                self._remember(s.key, fresh[s.key])
            missing = []
        for batch in token_batches(missing, BATCH_TOKENS, self.device):
            bad = max(max(s.ids) for s in batch)
            if bad >= self.vocab:
                raise UsageError(f"token id {bad} >= critic vocab {self.vocab}: the critic must share the policy's "
                                 f"tokenizer")
            ids = pad_right([torch.tensor(s.ids, dtype=torch.long) for s in batch]).to(self.device)
            with self._amp():
                h = self.model.lower(ids)
            for i, s in enumerate(batch):
                f = h[i, : len(s.ids)].clone()
                fresh[s.key] = f
                self._remember(s.key, f)
        out = [self._cache.get(s.key, fresh.get(s.key)) for s in seqs]
        return [f.float() for f in out] if self.features_fn is not None else out

    def _remember(self, key: tuple, f: torch.Tensor) -> None:
        if self._cached_bytes + f.nbytes <= self.cache_bytes:
            self._cache[key] = f
            self._cached_bytes += f.nbytes
        else:
            self._cache_full = True

    def _values_batch(self, seqs: Sequence[Seq]) -> list[torch.Tensor]:
        """Each rollout's values, the micro-batch run in parts of similar length: a random micro-batch padded
        to its longest rollout computed 1.5-2.2x its real positions on Table 4's builds. Rollouts do not mix
        (causal, per-row), so the values and the summed loss's gradient are the whole batch's."""
        feats = dict(zip((s.key for s in seqs), self.features(seqs)))
        out = {}
        for part in token_batches(seqs, 1 << 62, self.device):
            with self._amp():
                o = self.model(pad_right([feats[s.key] for s in part]))
            for b, s in enumerate(part):
                out[s.key] = o[b, s.prompt_len - 1: s.prompt_len - 1 + s.T]
        return [out[s.key] for s in seqs]

    @torch.no_grad()
    def values(self, seqs: Sequence[Seq]) -> dict[tuple, np.ndarray]:
        """{key: [V(s_0), ..., V(s_{T-1})]} for each rollout."""
        out = {}
        for batch in token_batches(seqs, BATCH_TOKENS, self.device):
            for s, v in zip(batch, self._values_batch(batch)):
                out[s.key] = v.double().cpu().numpy()
        self.release_features()
        return out

    def _loss_sum(self, seqs: Sequence[Seq]) -> torch.Tensor:
        loss = torch.zeros((), device=self.device)
        for s, v in zip(seqs, self._values_batch(seqs)):
            tgt = gae_targets(v.detach().double().cpu().numpy(), s.reward, self.cfg.gamma, self.cfg.lam)
            loss = loss + ((v - torch.as_tensor(tgt, dtype=v.dtype, device=v.device)) ** 2).sum()
        return loss

    def _steps(self, seqs: Sequence[Seq], rng: np.random.Generator) -> list[list[Seq]]:
        """One epoch's optimizer steps: batch x grad_accum rollouts each, in a seeded random order."""
        order, per_step = rng.permutation(len(seqs)), self.cfg.batch * self.cfg.grad_accum
        return [[seqs[j] for j in order[a:a + per_step]] for a in range(0, len(seqs), per_step)]

    def _backward(self, step: Sequence[Seq]) -> tuple[float, int]:
        """Accumulate the gradient of one optimizer step (token-mean loss); its loss sum and token count."""
        n, tot = sum(s.T for s in step), 0.0
        for b in range(0, len(step), self.cfg.batch):
            loss = self._loss_sum(step[b:b + self.cfg.batch])
            (loss / n).backward()
            tot += loss.item()
        return tot, n

    def _before_training(self, seqs: Sequence[Seq]) -> None:
        """Hook: work on the untrained model before the first epoch that runs (PACS: reference log-probs)."""

    def fit(self, seqs: Sequence[Seq], critics_root: Path, data_key: str, console=None,
            on_epoch: Callable[[int, float], None] | None = None) -> Path:
        """Train on seqs, checkpointing each epoch under critics_root/<fp>/; resume or reuse what is there."""
        cfg = self.cfg
        fp = self.fingerprint(data_key)
        ckpt = Path(critics_root) / fp
        model, trainable = self.model, self.model.trainable()
        model.reset()
        opt = torch.optim.AdamW(trainable.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        start = latest_epoch(ckpt)
        if start:
            load_epoch(ckpt, start, trainable, None if start >= cfg.epochs else opt, self.device)
            if start >= cfg.epochs:
                return ckpt
        else:
            atomic_write_bytes(ckpt / "config.json", json.dumps({"config": asdict(cfg), "data_key": data_key,
                                                                 "n_rollouts": len(seqs), "device": self.device,
                                                                 "dtype": self.dtype}, indent=2).encode())
        seqs = [s for s in seqs if s.T > 0]
        if not seqs:
            raise UsageError("critic: no rollouts with response tokens to train on")
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
        console = console or Console(stderr=True)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("loss {task.fields[loss]:.4f}"), TimeRemainingColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task("critic: frozen layers", total=len(seqs), loss=float("nan"))
            for i in range(0, len(seqs), 64):
                full = self._cache_full and hasattr(self.features_fn, "prepare")
                # past the budget nothing read now would be kept: only make sure the pass has run
                self.features_fn.prepare(seqs[i:i + 64]) if full else self.features(seqs[i:i + 64])
                bar.advance(task, len(seqs[i:i + 64]))
            self.release_features()
            self._before_training(seqs)
            for epoch in range(start + 1, cfg.epochs + 1):
                torch.manual_seed(derive_seed(cfg.seed, fp, epoch))
                bar.reset(task, total=len(seqs), description=f"critic: epoch {epoch}/{cfg.epochs}")
                tot, ntok = 0.0, 0
                for step in self._steps(seqs, np.random.default_rng(derive_seed(cfg.seed, fp, "order", epoch))):
                    opt.zero_grad(set_to_none=True)
                    loss, n = self._backward(step)
                    opt.step()
                    tot, ntok = tot + loss, ntok + n
                    bar.update(task, advance=len(step), loss=tot / ntok)
                save_epoch(ckpt, epoch, trainable, opt, {"epoch": epoch, "loss": tot / ntok})
                console.print(f"critic {fp}: epoch {epoch}/{cfg.epochs} loss {tot / ntok:.4f}")
                if on_epoch:
                    on_epoch(epoch, tot / ntok)
        return ckpt

