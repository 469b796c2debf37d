"""Hidden states of rollouts, from the model that sampled them: one forward pass serves every consumer.

Computed per problem group with a transformers forward pass over prompt + response ids and cached per
problem in the compute dtype (bf16 as its exact bits, or fp32; never float16, whose 65504 limit Qwen's
large activations exceed), so memory stays bounded by one group and later consumers read the file:
- `<build>/hidden/<fp>/<pid>.npz`: one layer at the response positions (hista, shear, ...);
- `<build>/features/<fp>/<pid>.npz`: one layer at every position, the input of a critic's first trained
  layer (ppo-1, ppo-n). Whichever consumer runs first pays the pass and stores the shared taps too
  (the last layer's response positions, and `SHARED_FULL`: the default critic's input), so the critics
  no longer run a frozen-body pass of their own.
Layers index the model's `hidden_states` tuple: 0 = embeddings, -1 = the final (normed) output, and
-(k + 1) = the input of the top k layers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rich.progress import track

from sveb.core.config import fingerprint
from sveb.core.device import empty_cache
from sveb.core.records import GroupHidden
from sveb.lm.hidden_io import GroupWriter, read_members, save, to_host

if TYPE_CHECKING:
    from sveb.core.records import BuildData

MAX_BATCH_TOKENS = 16384
SHARED_RESP = -1      # last layer at the response positions: hista/shear defaults
SHARED_FULL = (-3,)   # the input of the top 2 layers: the critics' default `train_layers=2`

# the Hista authors' response start for ChatML models (theirs: "<think>" for R1)
START_PATTERN = "<|im_start|>assistant"


STORE_FORMAT = "bf16-bits"  # in the cache fingerprints: caches stored as float16 before are not read


def to_store(h) -> np.ndarray:
    """A torch activation as stored: bf16 as its bits (uint16, exact, 2 bytes), anything else as float32."""
    import torch
    if h.dtype == torch.bfloat16:
        return h.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    return h.float().cpu().numpy()


def from_store(a: np.ndarray) -> np.ndarray:
    """A stored array as float32 (bf16 bits are the top half of a float32's)."""
    if a.dtype == np.uint16:
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32, copy=False)


def write_group_file(path: Path, arrays: dict[int, np.ndarray]) -> None:
    # uncompressed: zlib kept 93% of the bytes and took 94% of the pass at Qwen2.5-3B's shape on an H200
    # (docs/scaling.md); np.load reads caches written compressed before as well
    save(path, arrays)


def read_group_file(path: Path, idxs=None) -> dict[int, np.ndarray]:
    """{rollout_idx: float32} of a group's file, only the rollouts `idxs` if given (each read on its own)."""
    return {k: from_store(v) for k, v in read_members(path, idxs).items()}


class HiddenStates:
    def __init__(self, bdir: Path, model: str, layer: int = -1, batch_tokens: int = MAX_BATCH_TOKENS,
                 dtype: str = "auto"):
        from sveb.core.device import pick_dtype  # per call: tests patch sveb.core.device
        self.bdir, self.model_spec, self.layer, self.batch_tokens = Path(bdir), model, layer, batch_tokens
        self.dtype = pick_dtype(dtype)  # bf16 where native (GPU, avx512_bf16/AMX), else fp32
        self.dir = self._resp_dir(layer)
        self._model = None

    def _resp_dir(self, layer: int) -> Path:
        return self.bdir / "hidden" / fingerprint("hidden", self.model_spec, layer, self.dtype, STORE_FORMAT)

    def _full_dir(self, layer: int) -> Path:
        return self.bdir / "features" / fingerprint("full", self.model_spec, layer, self.dtype, STORE_FORMAT)

    def _load_model(self):
        if self._model is None:
            import torch
            from transformers import AutoModelForCausalLM

            from sveb.core.device import (
                torch_device,  # per call: tests patch sveb.core.device, sveb.core.models.resolve
            )
            from sveb.core.models import resolve
            self.device = torch_device()
            # sdpa: PyTorch's fused attention (transformers' default now; named so a default change cannot slow the
            # pass)
            model = AutoModelForCausalLM.from_pretrained(resolve(self.model_spec), dtype=getattr(torch, self.dtype),
                                                         attn_implementation="sdpa")
            self._model = model.to(self.device).eval()
        return self._model

    def release(self) -> None:
        """Drop the model (a policy copy) once its outputs are cached; it is loaded again if one is missing."""
        if self._model is not None:
            self._model = None
            empty_cache()

    def _forward(self, rollouts: list[dict], resp: list[int], full: list[int],
                 sink=None) -> dict[tuple, dict[int, np.ndarray]]:
        """One pass: {("resp", layer) | ("full", layer): {rollout_idx: stored array (`to_store`)}}; rollouts that
        share a prompt pass it once (sveb.lm.hidden_pass). With `sink` (sink(tap, idx, device tensor)) the
        states go there as each batch ends and the dicts stay empty."""
        from sveb.lm.hidden_pass import group_pass
        model = self._load_model()
        taps = [("resp", k) for k in resp] + [("full", k) for k in full]
        out: dict[tuple, dict[int, np.ndarray]] = {tap: {} for tap in taps}
        by_prompt: dict[tuple, list[dict]] = {}
        for r in rollouts:
            by_prompt.setdefault(tuple(r["prompt_token_ids"]), []).append(r)
        for prompt, rows in by_prompt.items():
            for tap, arrays in group_pass(model, self.device, list(prompt), rows, taps, self.batch_tokens,
                                          to_store, sink).items():
                out[tap].update(arrays)
        return out

    def compute(self, rollouts: list[dict]) -> dict[int, np.ndarray]:
        """{rollout_idx: [T, d] float32} of this layer for one group (no cache)."""
        return {k: from_store(v) for k, v in self._forward(rollouts, [self.layer], [])[("resp", self.layer)].items()}

    def _fill(self, pid: str, rollouts: list[dict], want: tuple) -> Path:
        """Run one pass for `want` plus every shared tap not yet cached; stream them all to their files (a
        background thread writes each rollout as its batch ends: host memory holds a few rollouts, not the
        group); return `want`'s file."""
        path_of = lambda kind, k: (self._resp_dir(k) if kind == "resp" else self._full_dir(k)) / f"{pid}.npz"  # noqa: E731
        taps = [want] + [t for t in [("resp", SHARED_RESP)] + [("full", k) for k in SHARED_FULL]
                         if t != want and not path_of(*t).exists()]
        with GroupWriter({tap: path_of(*tap) for tap in taps}) as out:
            resp, full = [k for kind, k in taps if kind == "resp"], [k for kind, k in taps if kind == "full"]
            self._forward(rollouts, resp, full,
                          sink=lambda tap, idx, h: out.put(tap, idx, to_host(h, to_store)))
        return path_of(*want)

    def ensure(self, pid: str, rollouts: list[dict]) -> Path | None:
        """Compute and cache a group's hidden states unless cached; the file when computed now, else None."""
        if (self.dir / f"{pid}.npz").exists():
            return None
        return self._fill(pid, rollouts, ("resp", self.layer))

    def group(self, pid: str, rollouts: list[dict]) -> dict[int, np.ndarray]:
        self.ensure(pid, rollouts)
        return read_group_file(self.dir / f"{pid}.npz")

    def full_path(self, pid: str, rollouts: list[dict], layer: int) -> Path:
        """The file of `layer` at every position of prompt + response, computed now if missing."""
        path = self._full_dir(layer) / f"{pid}.npz"
        return path if path.exists() else self._fill(pid, rollouts, ("full", layer))

    def full(self, pid: str, rollouts: list[dict], layer: int) -> dict[int, np.ndarray]:
        """{rollout_idx: [P + T, d] float32}: `layer` at every position of prompt + response."""
        return read_group_file(self.full_path(pid, rollouts, layer))

    def _prompt_path(self, pid: str) -> Path:
        return self.bdir / "hidden" / fingerprint("prompt", self.model_spec, self.layer, self.dtype, STORE_FORMAT) / \
            f"{pid}.npz"

    def prompt_states(self, pid: str, rollouts: list[dict]) -> np.ndarray:
        """[P, d] float32: this layer at the positions of the prompt the group's rollouts share (a pass over the
        prompt alone: causal attention gives the prompt the same states whatever follows it)."""
        path = self._prompt_path(pid)
        if path.exists():
            return read_group_file(path)[0]
        row = {"rollout_idx": 0, "prompt_token_ids": rollouts[0]["prompt_token_ids"], "response_token_ids": []}
        res = self._forward([row], [], [self.layer])[("full", self.layer)]
        write_group_file(path, res)
        return from_store(res[0])

    def start_token(self, prompt_ids) -> int:
        """The index of the token that ends `<|im_start|>assistant` in the rendered prompt (the authors' response
        start: the first token whose text reaches the pattern's end); the last prompt token where the model has
        no tokenizer or its chat template no such header."""
        ids = list(prompt_ids)
        if not hasattr(self, "_tok"):
            try:
                from transformers import AutoTokenizer

                from sveb.core.models import resolve  # per call: tests patch sveb.core.models.resolve
                self._tok = AutoTokenizer.from_pretrained(resolve(self.model_spec))
            except Exception:  # noqa: BLE001 (a weights-only folder, e.g. a test's random model)
                self._tok = None
        text = self._tok.decode(ids) if self._tok is not None else ""
        if START_PATTERN not in text:
            return len(ids) - 1
        end = text.index(START_PATTERN) + len(START_PATTERN)
        return next(i for i in range(len(ids)) if len(self._tok.decode(ids[: i + 1])) >= end)

    def provider(self, console=None) -> Callable[[str, list[dict]], Callable[[int], np.ndarray]]:
        """pid, rollouts -> hidden_fn(rollout_idx) -> [T, d] float32 (a GroupHidden: also the prompt's states
        and the response start, computed on first use)."""

        def for_problem(pid: str, rollouts: list[dict]):
            # converted once per group: held-out asks for every rollout once per state, and the same
            # array each time lets estimators memoise work per rollout
            arrays = {k: v.astype(np.float32) for k, v in self.group(pid, rollouts).items()}
            return GroupHidden(arrays, lambda: self.prompt_states(pid, rollouts),
                               lambda: self.start_token(rollouts[0]["prompt_token_ids"]))
        return for_problem

    def derived_path(self, pid: str, what: str) -> Path:
        """Where a quantity derived from this build's pass (the probe's next-token entropies) is cached:
        `<build>/hidden/<fp of what, model, dtype>/<pid>.npz`."""
        return self.bdir / "hidden" / fingerprint(what, self.model_spec, self.dtype, STORE_FORMAT) / f"{pid}.npz"

    def read_derived(self, pid: str, what: str) -> dict[int, np.ndarray] | None:
        path = self.derived_path(pid, what)
        if not path.exists():
            return None
        with np.load(path) as z:
            return {int(k[1:]): z[k] for k in z.files}

    def write_derived(self, pid: str, what: str, arrays: dict[int, np.ndarray]) -> None:
        write_group_file(self.derived_path(pid, what), arrays)

    def fulls(self, pid: str, rollouts: list[dict], layers: list[int]) -> dict[int, dict[int, np.ndarray]]:
        """{layer: {rollout_idx: [P + T, d] float32}} for several layers, the uncached ones in one pass
        (the probe reads its layer and the last one, for the next-token entropy)."""
        path = lambda k: self._full_dir(k) / f"{pid}.npz"  # noqa: E731
        missing = [k for k in layers if not path(k).exists()]
        res = self._forward(rollouts, [], missing) if missing else {}
        for k in missing:
            write_group_file(path(k), res[("full", k)])
        # computed now: as stored (bf16 bits) -> float32, as read_group_file gives them from the cache
        return {k: {i: from_store(v) for i, v in res[("full", k)].items()} if k in missing else read_group_file(path(k))
                for k in layers}


def is_policy(path: str, model: str) -> bool:
    """Whether the model at `path` is the build's policy `model`, whose shared pass has a critic's
    frozen layers (False for a scripted build's stand-in model, which has no weights to pass)."""
    from sveb.core.models import ModelError, resolve  # per call: tests patch sveb.core.models.resolve
    try:
        return path == resolve(model)
    except ModelError:
        return False


class SharedFeatures:
    """A critic's `features_fn` over the builds' shared passes: seqs keyed (build_fp, pid, rollout_idx)
    -> {key: [len(ids), d] torch, bf16 or float32 as stored} of `layer` at every position (one extractor per build)."""

    def __init__(self, model: str, layer: int):
        from sveb.core.device import pick_dtype  # per call: tests patch sveb.core.device
        self.model, self.layer = model, layer
        self.dtype = pick_dtype("auto")  # the passes' dtype: part of a critic checkpoint's fingerprint
        self.builds: dict[str, tuple[Path, dict]] = {}  # build_fp -> (dir, rollouts by pid)
        self._passes: dict[str, HiddenStates] = {}

    def release(self) -> None:
        """Drop the passes' models (their outputs are on disk)."""
        for hs in self._passes.values():
            hs.release()

    def _path(self, bfp: str, pid: str) -> Path:
        bdir, rows = self.builds[bfp]
        if bfp not in self._passes:  # one extractor per build: it loads the model once
            self._passes[bfp] = HiddenStates(bdir, self.model, dtype=self.dtype)
        return self._passes[bfp].full_path(pid, rows[pid], self.layer)

    def add(self, build_fp: str, bdir: Path, rollouts: dict) -> None:
        self.builds[build_fp] = (Path(bdir), rollouts)

    def prepare(self, seqs) -> None:
        """Run the passes these seqs' groups still lack, reading nothing."""
        for bfp, pid in dict.fromkeys(s.key[:2] for s in seqs):
            self._path(bfp, pid)

    def __call__(self, seqs) -> dict:
        """{key: [len(ids), d] torch tensor in the stored dtype (bf16 or float32; exact)}. Only the asked
        rollouts are read, each on its own: reading a micro-batch's rollouts costs their bytes, not their
        groups' (a whole-group read per micro-batch grew as rollouts x group size, docs/scaling.md)."""
        import torch
        by_group: dict[tuple, list] = {}
        for s in seqs:
            by_group.setdefault(s.key[:2], []).append(s)
        out = {}
        for (bfp, pid), group in by_group.items():
            arrays = read_members(self._path(bfp, pid), dict.fromkeys(s.key[2] for s in group))
            for s in group:
                a = np.ascontiguousarray(arrays[s.key[2]][: len(s.ids)])
                out[s.key] = (torch.from_numpy(a.view(np.int16)).view(torch.bfloat16) if a.dtype == np.uint16
                              else torch.from_numpy(a.astype(np.float32, copy=False)))
        return out


def hidden_provider(est, data: BuildData, console=None, hidden_options: dict | None = None):
    """For an estimator that needs hidden states: every group's states extracted (or found cached) now,
    before the clock starts (`seconds` is the estimator's own cost), and the provider estimate_all takes."""
    if not est.needs_hidden:
        return None
    hs = HiddenStates(data.bdir, data.manifest.model, layer=est.layer, **(hidden_options or {}))
    prompts = getattr(est, "needs_prompt", False)  # Hista: the prompt's states too (one short pass per problem)
    for pid in track(sorted(data.problems), description="hidden states", console=console):
        hs.ensure(pid, data.rollouts[pid])  # cached groups are not loaded twice
        if prompts:
            hs.prompt_states(pid, data.rollouts[pid])
    hs.release()  # every group is on disk now: the policy copy is not kept through the estimator's run
    return hs.provider(console)
