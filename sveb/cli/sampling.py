"""`sveb build`: sample rollouts, cut states, compute Monte-Carlo reference values (argument parsing only)."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import MODEL, RAY, ROOT, SEEDS, WORKERS, OptionalRayValue, app, console, out, parse_seeds
from sveb.core.config import MAX_TOKENS, PAPER_MAX_TOKENS


@app.command(cls=OptionalRayValue)
def build(
    domain: str | None = typer.Option(None, "--domain", help="A declared domain (`sveb ls domains`) "
                                         "(default: the named source's domain, else number)"),
    model: str = MODEL, root: Path = ROOT,
    source: str = typer.Option("builtin", help="builtin | hub | NAME | NAME=PATH | PATH (see `sveb ls sources`); "
                               "PATH: a .jsonl(.gz)/.json/.parquet/.csv file or a folder of them"),
    field: list[str] = typer.Option([], "--field", help="KEY=COLUMN for a PATH with its own columns; keys: question, "
                                    "answer, options, tests, id. Repeatable."),
    min_tests: int = typer.Option(-1, help="Code problems: fewest test cases kept (-1: 6 for verifiable-coding, "
                                  "1 otherwise; HumanEval counts its asserts)."),
    split: str = typer.Option("test", help="test (the benchmark) | train (a disjoint problem set, e.g. for ppo-1)"),
    exclude: list[str] = typer.Option([], "--exclude", help="Never draw these problems: a build or export folder, a "
                                      "folder searched for them, or a file of problem ids (one a line). Applied "
                                      "within the seed's slot, so other seeds do not move; enters the problems "
                                      "fingerprint by content. Repeatable."),
    problems: int = typer.Option(8, help="Problems kept after the difficulty filter."),
    oversample: int = typer.Option(4, help="Candidates drawn per kept problem."),
    rollouts: int = typer.Option(40, help="G: rollouts per problem."),
    states_per_problem: int = typer.Option(2, help="S: states cut per problem."),
    step_pairs: bool = typer.Option(False, "--step-pairs", help="Cut states in pairs t1 < t2 of one rollout, so the "
                                    "scores include step-advantage sign agreement."),
    mc: int = typer.Option(20, help="n_ref: continuations per state for the reference value."),
    mc_extra: int = typer.Option(4, help="Independent continuations per state for the MCS@k baselines."),
    min_acc: float = typer.Option(0.1, help="Difficulty filter: lowest rollout accuracy kept."),
    max_acc: float = typer.Option(0.8, help="Difficulty filter: highest rollout accuracy kept."),
    screen: int = typer.Option(8, help="The filter decides on SCREEN screening rollouts per candidate (seeds of "
                               "their own); a kept problem then gets G fresh rollouts. None with --min-acc 0 "
                               "--max-acc 1."),
    min_novel_numbers: int = typer.Option(-1, help="number domain: a correct response must hold this many numbers "
                                          "absent from question and answer (-1: 4 for hub/file sources, 0 for "
                                          "builtin)."),
    temperature: float = typer.Option(0.7), top_p: float = typer.Option(1.0),
    max_tokens: int = typer.Option(MAX_TOKENS, help="Max new tokens per rollout/continuation."),
    seed: int = typer.Option(0),
    seeds: str | None = SEEDS,
    dtype: str = typer.Option("auto", help="auto (bf16 on a GPU or a CPU with native bf16, else fp32) | bfloat16 | "
                              "float32. Changes samples, so it is part of the fingerprint."),
    engine: str = typer.Option("vllm", help="vllm | hf | scripted (a deterministic stand-in for tests, no model) | "
                               "the name of an installed plugin (entry points `sveb.engines`) | module:Class."),
    batch_size: int = typer.Option(64, help="hf engine batch size (speed only)."),
    workers: int | None = WORKERS,
    eager: bool = typer.Option(False, help="vLLM without compilation: faster start, slower decoding; samples of the "
                               "same distribution, not the same tokens (not in the fingerprint, as threads are not)."),
    tp: int = typer.Option(1, "--tp", help="vLLM tensor parallel: GPUs one engine spans (speed only)."),
    gpu_memory_utilization: float = typer.Option(0.9, help="vLLM on a GPU: share of its memory the engine may take."),
    ray: str | None = RAY,
    gpus_per_worker: float = typer.Option(-1, help="--ray: GPUs per actor (-1: --tp where the cluster has GPUs, "
                                          "else 0)."),
    cpus_per_worker: float = typer.Option(1, help="--ray: CPUs per actor (a CPU engine uses as many threads)."),
    preset: str = typer.Option("sveb", help="sveb: SVEB's protocol | paper: the Hista/Numca authors' protocol as "
                               "their scripts run it (G 32, one space cut per problem, full-budget continuations, "
                               f"--max-tokens {PAPER_MAX_TOKENS}, 20 screens, equal tiers; docs/data.md); flags given "
                               "win."),
    cut: str | None = typer.Option(None, help="token (SVEB's: a token-exact prefix) | space (the paper's: one "
                                      "state per problem, cut at a space of the first rollout, the prefix text "
                                      "re-tokenised). Default: the preset's."),
    continuation: str | None = typer.Option(None, help="remaining (SVEB's: a continuation gets the budget its "
                                               "rollout had left) | full (the paper's: --max-tokens on top of the "
                                               "prefix). Default: the preset's."),
    tiers: str | None = typer.Option(None, help="range (SVEB's: --min-acc..--max-acc) | paper (equal numbers of "
                                        "problems in the accuracy tiers (0.07, 0.17], (0.17, 0.37], (0.37, 0.77]; "
                                        "programming adds (0, 0.07], which needs --screen 15 or more; and the "
                                        "paper's number rule). Default: the preset's."),
    ctx: typer.Context = None,
) -> None:
    """Sample rollouts, cut states, compute Monte-Carlo reference values."""
    from dataclasses import replace

    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.data_builders.fields import parse as parse_fields
    from sveb.data_builders.look import resolve_domain
    from sveb.sample.distributed import ray_options
    from sveb.sample.pipeline import build as run_build
    from sveb.sample.rules import validate
    from sveb.store.builds import describe
    domain, fields = resolve_domain(domain, source), parse_fields(field)
    cfg = BuildConfig(domain=domain, model=model, source=source, split=split, problems=problems, oversample=oversample,
                      rollouts=rollouts, states_per_problem=states_per_problem, step_pairs=step_pairs, mc=mc,
                      mc_extra=mc_extra,
                      min_acc=min_acc, max_acc=max_acc, screen=screen, min_novel_numbers=min_novel_numbers, seed=seed,
                      fields=fields, min_tests=min_tests, exclude=tuple(exclude),
                      sampling=SamplingConfig(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
                      dtype=dtype, engine=engine, batch_size=batch_size, eager=eager, tensor_parallel_size=tp,
                      gpu_memory_utilization=gpu_memory_utilization,
                      workers=workers if workers is not None and ray is None else 4)
    cfg = preset_config(cfg, preset, ctx)
    # each choice given departs from the preset alone (BuildConfig spells the result: docs/data.md)
    cfg = replace(cfg, **{k: v for k, v in (("cut", cut), ("continuation", continuation), ("tiers", tiers)) if v})
    from sveb.core import signals
    validate(cfg)  # every flag checked before a model or an engine is touched
    from sveb.sample.paper import validate as validate_protocol
    validate_protocol(cfg)
    opts = ray_options(ray, workers, gpus_per_worker, cpus_per_worker, tp)
    cfgs = [replace(cfg, seed=s) for s in parse_seeds(seeds, seed)]
    signals.install()  # Ctrl-C / SIGTERM stop within seconds; no engine process outlives this one
    bdirs = [run_build(c, root, console=console, ray=opts) for c in cfgs]  # independent builds, one per seed
    for bdir in bdirs:
        out.print(describe(bdir))
        out.print(str(bdir))


def preset_config(cfg, preset: str, ctx):
    """`--preset paper`: the authors' protocol's fields, except those whose flag was given on the command line."""
    if preset == "sveb":
        return cfg
    if preset != "paper":
        raise typer.BadParameter(f"unknown preset '{preset}'; known: sveb, paper", param_hint="--preset")
    from dataclasses import replace

    from sveb.sample.paper import preset_for

    def given(name: str) -> bool:
        src = ctx.get_parameter_source(name)
        return src is not None and src.name in ("COMMANDLINE", "ENVIRONMENT")
    fields = {k: v for k, v in preset_for(cfg.domain).items() if k == "protocol" or not given(k)}
    sampling = cfg.sampling if given("max_tokens") else replace(cfg.sampling, max_tokens=PAPER_MAX_TOKENS)
    return replace(cfg, **fields, sampling=sampling)


@app.command()
def rereference(
    states_from: Path = typer.Option(..., "--states-from", help="A complete build or export folder whose states "
                                     "are re-referenced."),
    model: str = typer.Option(..., "--model", help="The other policy: a local model directory (e.g. `sveb "
                              "rl-export`'s), builtin alias, hub id or short name. It must share the source model's "
                              "tokenizer."),
    out_dir: Path = typer.Option(..., "--out", help="A new folder for the build (rerun the same line to resume)."),
    mc: int | None = typer.Option(None, help="Continuations per state for the reference (default: the source's)."),
    mc_extra: int | None = typer.Option(None, help="Independent continuations for MCS@k (default: the source's)."),
    engine: str | None = typer.Option(None, help="vllm | hf | scripted | a plugin (default: the source's)."),
    dtype: str | None = typer.Option(None, help="auto | bfloat16 | float32 (default: the dtype the source sampled "
                                     "in, so that the policy is the only difference)."),
    batch_size: int | None = typer.Option(None, help="hf engine batch size (default: the source's; hf's samples "
                                          "depend on it)."),
    workers: int = typer.Option(4, help="Parallel reward workers."),
    tp: int = typer.Option(1, "--tp", help="vLLM tensor parallel: GPUs one engine spans (speed only)."),
    gpu_memory_utilization: float = typer.Option(0.9, help="vLLM on a GPU: share of its memory the engine may take."),
) -> None:
    """Monte-Carlo references of an existing build's states under another policy: a new build whose problems,
    rollouts and states are the source's (continued from their stored token ids) and whose references are MODEL's,
    each draw seeded as the source's (common random numbers). Its manifest names the source (`states_from`); it
    pools only with re-references of the same source policy. Score it with `sveb eval --build OUT`."""
    from sveb.core import signals
    from sveb.sample.rereference import rereference as run
    from sveb.store import check_writable
    from sveb.store.builds import describe
    check_writable(out_dir, "--out")
    signals.install()  # Ctrl-C / SIGTERM stop within seconds; finished shards are kept
    bdir = run(states_from, model, out_dir, console=console,
               knobs=dict(mc=mc, mc_extra=mc_extra, engine=engine, dtype=dtype, batch_size=batch_size, workers=workers,
                          tensor_parallel_size=tp, gpu_memory_utilization=gpu_memory_utilization))
    out.print(describe(bdir))
    out.print(str(bdir))
