"""References of an existing build's states under another policy (`sveb rereference`, issue 59): the problems,
rollouts and states are the source build's (or export's), copied as they are; the references are new, MCS@mc of the
other model continuing each state from its stored prompt and prefix token ids (never re-tokenised text).

The references stage is the build's own (sveb.sample.pipeline.stage_references): the same shards, resume and
console lines. Its seeds are the source's (each shard's seed fingerprint is the one the source's shard had), so
draw j of a state under the new policy shares its seed with the source's draw j (common random numbers): the same
policy and seed config give the source's references, and ΔV = V_new − V_old is paired draw by draw.

The manifest's `states_from` names the source (folder, fingerprint, content hash, model, weights) and the build's
own fingerprint holds the source's content and the new model's weights, so it is never taken for an ordinary build
of its model: `sveb.store.builds.pool_key` pools it only with re-references of the same source policy.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from rich.console import Console

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, fingerprint
from sveb.core.device import describe as cpu
from sveb.core.errors import BuildError, UsageError
from sveb.core.models import canonical, check_model, resolve
from sveb.engines import Engine, EngineError, model_context, uses_model
from sveb.sample import jobs
from sveb.sample.jobs import LazyEngine, dtype_of
from sveb.sample.paper import choice_parts
from sveb.sample.pipeline import stage_references, versions
from sveb.sample.rules import engine_key, model_identity
from sveb.store.builds import check_build, content_hash_of, load_rollouts, truncation
from sveb.store.handle import Build
from sveb.store.integrity import check_structure

FLAG = "--states-from"
COPIED = ("problems", "rollouts", "states")  # the source's tables, row for row


def open_source(path: str | Path) -> Build:
    """The source build or export, checked (complete; an export against its hashes); one line naming it if not."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise UsageError(f"{FLAG} {path}: {'is a file, not' if p.exists() else 'no such'} build or export folder")
    if not (p / "manifest.json").exists():
        raise UsageError(f"{FLAG} {path}: holds no manifest.json (not a build or an export folder)")
    build = Build(p)
    m = build.manifest
    if not m.is_export and not m.complete:
        raise UsageError(f"{FLAG} {path}: the build is not complete (status {m.status}); finish its `sveb build`")
    check_build(build)
    if m.export_format == "hista-json":
        raise UsageError(f"{FLAG} {path}: an imported hista-json file holds text, not token ids to continue")
    if "states_from" in m.raw:
        src = m.raw["states_from"].get("path") if isinstance(m.raw["states_from"], dict) else None
        raise UsageError(f"{FLAG} {path}: is itself a re-reference (of {src}); pass that source build instead")
    return build


def config_for(src: Build, model: str, **knobs) -> BuildConfig:
    """The source's config with the new model and the engine knobs given (None: the source's). The compute dtype
    defaults to the one the source sampled in, so that the policy is the only difference."""
    m = src.manifest
    cfg = m.config
    given = {k: v for k, v in knobs.items() if v is not None}
    given.setdefault("dtype", m.dtype or cfg.dtype)
    cfg = dataclasses.replace(cfg, model=model, **given)
    for ok, flag, value, need in [(cfg.mc >= 1, "--mc", cfg.mc, "at least 1"),
                                  (cfg.mc_extra >= 0, "--mc-extra", cfg.mc_extra, "at least 0"),
                                  (cfg.batch_size >= 1, "--batch-size", cfg.batch_size, "at least 1"),
                                  (cfg.workers >= 1, "--workers", cfg.workers, "at least 1"),
                                  (cfg.dtype in ("auto", "bfloat16", "float32"), "--dtype", cfg.dtype,
                                   "auto, bfloat16 or float32")]:
        if not ok:
            raise UsageError(f"{flag} {value}: must be {need}")
    try:
        engine_key(cfg)
    except EngineError as e:
        raise UsageError(str(e)) from None
    return cfg


def stage_fp(cfg: BuildConfig, source_id: str) -> str:
    """The new references' fingerprint: the source's content, the new model's weights and every sampling knob."""
    return fingerprint("references under another policy", source_id, model_identity(cfg.model), dtype_of(cfg),
                       engine_key(cfg), cfg.mc, cfg.mc_extra, cfg.sampling, cfg.seed, schema.SCHEMA_VERSION,
                       *choice_parts(cfg, "references"))


def check_tokenizer(tok, rollouts: dict[str, list[dict]], states: list[dict], model: str) -> None:
    """The new model must read the stored ids as the source's model wrote them: each cut rollout's response ids
    must decode to the text the source stored."""
    for s in states:
        r = rollouts[s["problem_id"]][s["rollout_idx"]]
        if tok.decode(r["response_token_ids"]) != r["response_text"]:
            raise UsageError(f"--model {model}: its tokenizer decodes rollout {r['rollout_idx']} of problem "
                             f"{s['problem_id']} to other text than the source stored; states are continued from "
                             f"their token ids, so the policy must share the source model's tokenizer")


def context_of(cfg: BuildConfig, rollouts: dict[str, list[dict]]) -> int:
    """The longest stored prompt + the budget (the engine's max_model_len), within the model's context."""
    longest = max(len(r["prompt_token_ids"]) for rows in rollouts.values() for r in rows)
    need = longest + cfg.sampling.max_tokens * (2 if cfg.choice("continuation") == "full" else 1)
    need += 16 if cfg.choice("cut") == "space" else 0  # the prefix re-tokenised: a little slack
    limit = model_context(resolve(cfg.model))
    if limit is not None and need > limit:
        raise BuildError(f"--model {cfg.model}: its context of {limit} tokens cannot hold the source's longest prompt "
                         f"({longest} tokens) + --max-tokens {cfg.sampling.max_tokens}")
    return need


def _weights(cfg: BuildConfig) -> str | None:
    if not uses_model(cfg.engine):
        return None
    from sveb.store.export import cached_weights_hash, weight_files
    path = resolve(cfg.model)
    return cached_weights_hash(path) if weight_files(path) else None


def _check_out(out: Path, fp: str, source_id: str) -> store.Manifest | None:
    """The manifest of an earlier run into `out` of the same source and policy (a resume), or None for a new
    folder; anything else there is refused."""
    if (out / "manifest.json").exists():
        old = store.load_manifest(out)
        mine = isinstance(old.raw.get("states_from"), dict) and old.raw["states_from"].get("content_hash") == source_id
        if not mine or old.build_fp != fp:
            raise UsageError(f"--out {out}: holds another build (model {old.model}, fingerprint {old.build_fp}); "
                             f"rerun with the settings it was made with, or choose another --out")
        return old
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--out {out}: exists and is not an empty folder; pass a new folder")
    return None


def rereference(source: str | Path, model: str, out: str | Path, engine: Engine | None = None,
                console: Console | None = None, knobs: dict | None = None) -> Path:
    """Write to `out` a build whose problems, rollouts and states are the source's and whose references are
    `model`'s; rerun to resume. engine: a started engine (default: the config's, started when a shard is missing);
    knobs: BuildConfig fields: engine (its name), dtype, mc, mc_extra, batch_size, workers, eager,
    tensor_parallel_size, gpu_memory_utilization (absent or None: the source's)."""
    console = console or Console(stderr=True)
    src, out = open_source(source), Path(out)
    m = src.manifest
    states = src.table("states", schema.STATES).to_pylist()
    if not states:
        raise UsageError(f"{FLAG} {source}: holds no states; there is nothing to re-reference")
    cfg = config_for(src, model, **(knobs or {}))
    own = engine is None
    if own and not uses_model(cfg.engine):  # a model-free engine (scripted) starts at once, as in a build
        engine = jobs.EngineSpec(cfg)()
    cfg = dataclasses.replace(cfg, model=check_model(cfg.model) if engine is None else canonical(cfg.model))
    source_id = content_hash_of(src)
    fp = stage_fp(cfg, source_id)
    old = _check_out(out, fp, source_id)
    if old is not None and old.complete:
        console.print(f"[dim]{out}: complete; nothing to sample[/]")
        return out
    problems = src.table("problems", schema.PROBLEMS).to_pylist()
    lazy = LazyEngine(cfg, engine)
    rollouts = load_rollouts(src.path, {p["problem_id"] for p in problems})
    check_structure(src.path, problems, states, rollouts, None)  # every state's rollout and prefix present
    check_tokenizer(lazy.tokenizer(), rollouts, states, cfg.model)  # before anything is written
    if engine is None:
        lazy.max_model_len = context_of(cfg, rollouts)
    base = {"config": dataclasses.asdict(cfg), "fingerprints": {"references": fp}, "build_fp": fp,
            "model": cfg.model, "domain": m.domain, "versions": versions(), "dtype": dtype_of(cfg), "cpu_flags": cpu(),
            "model_weights_sha256": _weights(cfg),
            "states_from": {"path": str(src.path.resolve()), "build_fp": m.build_fp, "content_hash": source_id,
                            "model": m.model, "model_weights_sha256": m.weights_sha256, "dtype": m.dtype,
                            "engine": m.config.engine, "references_fp": m.fingerprints.get("references"),
                            "note": "problems, rollouts and states are the source's, sampled by its model; the "
                                    "references are this build's model's, draw j seeded as the source's draw j"}}
    console.print(f"references of {len(states)} states of {src.path} under {cfg.model} (compute dtype "
                  f"{dtype_of(cfg)}, {cfg.mc} + {cfg.mc_extra} continuations a state)")
    store.write_manifest(out, {**base, "status": "running"})
    for t in COPIED:  # written under a fingerprint of the source's content: a resume skips them
        path, tfp = store.shard_path(out / t, 0), fingerprint("copied from", source_id, t)
        if not store.shard_done(path, tfp):
            store.write_shard(path, src.table(t).replace_schema_metadata(None), tfp)
    runner = jobs.LocalRunner(lazy)
    t0 = time.time()
    try:
        stage_references(cfg, out, fp, problems, states, runner, console, lazy,
                          seed_fp=m.fingerprints.get("references") or m.build_fp)
    finally:
        runner.close()
        if own:
            lazy.close()
    store.write_manifest(out, {**base, "status": "complete", "n_problems": len(problems), "n_states": len(states),
                               "seconds": round(time.time() - t0, 3),
                               "truncated": truncation(out, {p["problem_id"] for p in problems})})
    return out

