"""The per-shard work of a build, and the runner that does it here, one shard at a time.

A job is a module-level function `fn(engine, *args)`, where `engine()` starts (once) and returns the
engine; jobs that need no samples never call it. The same jobs run on Ray actors (sveb.sample.distributed),
each writing its own shards with the store's atomic writer. Every sample's seed is derived from ids,
never from the order of work, so who runs a shard does not change what it holds.

The sampling jobs time themselves: `with stage_clock() as seconds:` collects the wall seconds of each stage
(BUILD_STAGES) that ran in this process while the block ran (Table 4's per-stage cost).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from sveb import store
from sveb.core import schema, signals
from sveb.core.config import BuildConfig, derive_seed
from sveb.core.cost import BUILD_STAGES
from sveb.core.models import resolve
from sveb.data_builders import domain_module
from sveb.engines import Engine, HFTokenizer, Request, make_engine, uses_model
from sveb.rewards import reward

_clocks: list[dict[str, float]] = []  # the open stage_clock blocks, innermost last


@contextmanager
def stage_clock(seconds: dict[str, float] | None = None):
    """Adds the wall seconds of each build stage run in this process to `seconds` while the block runs (jobs run on
    Ray actors are not seen). A stage that did not run gets no key."""
    seconds = {} if seconds is None else seconds
    _clocks.append(seconds)
    try:
        yield seconds
    finally:
        _clocks.remove(seconds)


def timed(stage: str):
    """A job's decorator: its wall seconds go to every open stage_clock under `stage`."""
    assert stage in BUILD_STAGES, stage

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                dt = time.perf_counter() - t0
                for clock in _clocks:
                    clock[stage] = clock.get(stage, 0.0) + dt
        return run
    return wrap


def dtype_of(cfg: BuildConfig) -> str:
    """The concrete compute dtype of a build: --dtype, or from the hardware."""
    from sveb.core.device import pick_dtype  # per call: tests patch sveb.core.device
    return pick_dtype(cfg.dtype)


@dataclass(frozen=True)
class EngineSpec:
    """What it takes to start a build's engine anywhere (picklable: Ray actors start their own)."""
    cfg: BuildConfig
    max_model_len: int = 4096

    def __call__(self) -> Engine:
        c = self.cfg
        model = resolve(c.model) if uses_model(c.engine) else ""  # a model-free engine (scripted) reads none
        return make_engine(c.engine, model, c.seed, c.batch_size, c.eager, self.max_model_len,
                           dtype_of(c), tensor_parallel_size=c.tensor_parallel_size,
                           gpu_memory_utilization=c.gpu_memory_utilization)


class LazyEngine:
    """Starts the engine only when a shard is actually missing."""

    def __init__(self, cfg: BuildConfig, engine: Engine | None):
        self.cfg, self._engine, self._tok = cfg, engine, None
        self.max_model_len = 4096

    def get(self) -> Engine:
        if self._engine is None:
            self._engine = EngineSpec(self.cfg, self.max_model_len)()
            signals.reinstall()  # vLLM may have set handlers of its own
        return self._engine

    def close(self) -> None:
        if self._engine is not None and hasattr(self._engine, "close"):
            self._engine.close()

    def tokenizer(self):
        """The tokenizer alone, without starting an engine."""
        if self._engine is not None:
            return self._engine.tokenizer
        if self._tok is None:
            self._tok = HFTokenizer(resolve(self.cfg.model))
        return self._tok


class LocalRunner:
    """Today's behaviour: jobs run in this process, in the order submitted, when a result is asked for."""
    slots = 1  # shards worked on at once

    def __init__(self, lazy: LazyEngine):
        self.lazy, self._todo, self._done, self._count = lazy, [], {}, 0

    def submit(self, fn: Callable, *args) -> int:
        self._todo.append((self._count, fn, args))
        self._count += 1
        return self._count - 1

    def result(self, handle: int):
        while handle not in self._done:
            h, fn, args = self._todo.pop(0)
            self._done[h] = fn(self.lazy.get, *args)
        return self._done.pop(handle)

    def close(self) -> None:
        self._todo.clear()


def rewards(texts: list[str], problems: list[dict], workers: int) -> list[float]:
    if any(p["answer_type"] == "code" for p in problems):  # sandboxed runs go in parallel
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(reward, texts, problems))
    return [reward(t, p) for t, p in zip(texts, problems)]


def group_seed(cfg: BuildConfig, fp: str, pid: str, j: int) -> int:
    """Seed of rollout j of a problem's group of G."""
    return derive_seed(cfg.seed, fp, pid, j)


def screen_seeds(cfg: BuildConfig, fp: str, pid: str, n: int) -> list[int]:
    """Seeds of a candidate's n screening rollouts: their own namespace, and never one of the group's G seeds
    (a clash is re-derived), so the G rollouts estimators see are fresh draws, not the ones the filter chose on."""
    group = {group_seed(cfg, fp, pid, j) for j in range(cfg.rollouts)}
    out = []
    for j in range(n):
        k, seed = 0, derive_seed(cfg.seed, fp, pid, "screen", j)
        while seed in group or seed in out:
            k += 1
            seed = derive_seed(cfg.seed, fp, pid, "screen", j, k)
        out.append(seed)
    return out


def rollout_rows(engine: Callable[[], Engine], cfg: BuildConfig, shard: list[tuple[dict, list[int]]]) -> list[dict]:
    """One rollout per (problem, seed) pair of the shard: rollout_idx is the seed's position in its list."""
    if not shard:
        return []
    eng = engine()
    mod = domain_module(cfg.domain)
    reqs, rows = [], []
    for p, seeds in shard:
        prompt = eng.tokenizer.encode_chat(mod.prompt(p))
        for j, seed in enumerate(seeds):
            reqs.append(Request(tuple(prompt), seed))
            rows.append((p, j, prompt, seed))
    outs = eng.generate(reqs, cfg.sampling, desc="rollouts")
    texts = [eng.tokenizer.decode(o.token_ids) for o in outs]
    rws = rewards(texts, [r[0] for r in rows], cfg.workers)
    return [{"problem_id": p["problem_id"], "rollout_idx": j, "prompt_token_ids": prompt,
             "response_token_ids": list(o.token_ids), "response_text": text, "reward": rw,
             "finish_reason": o.finish_reason, "seed": seed}
            for (p, j, prompt, seed), o, text, rw in zip(rows, outs, texts, rws)]


@timed("screening")
def screen_shard(engine, cfg: BuildConfig, path: Path, problems: list[dict], n: int, seed_fp: str,
                 fp: str) -> list[dict]:
    """The screening rollouts of a shard's candidates (the filter's evidence), to the `screens` table. Seeds come
    from the stage (`seed_fp`), never from the shard layout."""
    rows = rollout_rows(engine, cfg, [(p, screen_seeds(cfg, seed_fp, p["problem_id"], n)) for p in problems])
    store.write_shard(path, pa.Table.from_pylist(rows, schema=schema.ROLLOUTS), fp)
    return rows


@timed("rollouts")
def group_shard(engine, cfg: BuildConfig, path: Path, kept: list[dict], seed_fp: str, done_fp: str) -> None:
    """G fresh rollouts of each problem the filter kept, to the `rollouts` table (written even when empty: done)."""
    shard = [(p, [group_seed(cfg, seed_fp, p["problem_id"], j) for j in range(cfg.rollouts)]) for p in kept]
    rows = rollout_rows(engine, cfg, shard)
    store.write_shard(path, pa.Table.from_pylist(rows, schema=schema.ROLLOUTS), done_fp)


@timed("references")
def reference_shard(engine, cfg: BuildConfig, path: Path, states: list[dict], inputs: list[tuple[list, list]],
                    problems: dict[str, dict], fp: str, seed_fp: str | None = None) -> None:
    """mc + mc_extra continuations of each state (inputs: its prompt ids and prefix ids), to the store under fp.
    Seeds derive from seed_fp (default fp): a re-reference under another policy keeps its source's seeds."""
    eng = engine()
    n = cfg.mc + cfg.mc_extra
    reqs, meta = [], []
    for s, (prompt, prefix) in zip(states, inputs):
        # SVEB: ends where the rollout itself would have ended; the paper's protocol: the full budget on top
        budget = cfg.sampling.max_tokens - (0 if cfg.choice("continuation") == "full" else s["t"])
        for j in range(n):
            reqs.append(Request(tuple(prompt) + tuple(prefix), derive_seed(cfg.seed, seed_fp or fp, s["state_id"], j),
                                budget))
            meta.append((s, prefix))
    outs = eng.generate(reqs, cfg.sampling, desc="references")
    if cfg.choice("cut") == "space":  # the prefix text (no prefix ids: it was re-tokenised into the prompt)
        texts = [s["prefix_text"] + eng.tokenizer.decode(list(o.token_ids)) for (s, _), o in zip(meta, outs)]
    else:
        texts = [eng.tokenizer.decode(list(prefix) + list(o.token_ids)) for (s, prefix), o in zip(meta, outs)]
    rws = rewards(texts, [problems[s["problem_id"]] for s, _ in meta], cfg.workers)
    rows = []
    for i, s in enumerate(states):
        rw = rws[i * n:(i + 1) * n]
        fr = [o.finish_reason for o in outs[i * n:(i + 1) * n]]
        rows.append({"state_id": s["state_id"], "mc_rewards": rw[: cfg.mc], "value": sum(rw[: cfg.mc]) / cfg.mc,
                     "n_ref": cfg.mc, "extra_rewards": rw[cfg.mc:], "finish_reasons": fr})
    store.write_shard(path, pa.Table.from_pylist(rows, schema=schema.REFERENCES), fp)
