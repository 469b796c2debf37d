"""The `sveb` command. Argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from sveb.core.config import MAX_TOKENS, PAPER_MAX_TOKENS
from sveb.cli.common import (BUILD_DIR, DOMAIN, EXPECT, MODEL, RAY, ROOT, SEEDS, WORKERS, OptionalRayValue, _build_root, app,
                             announce_loads, console, out, parse_seeds)
from sveb.cli.common import ALLOW_MIXED_DTYPE, ALLOW_UNEQUAL_SEEDS

__all__ = ["app"]


@app.command(cls=OptionalRayValue)
def build(
    domain: Optional[str] = typer.Option(None, "--domain", help="A declared domain (`sveb ls domains`) "
                                         "(default: the named source's domain, else number)"),
    model: str = MODEL, root: Path = ROOT,
    source: str = typer.Option("builtin", help="builtin | hub | NAME | NAME=PATH | PATH (see `sveb ls sources`); "
                               "PATH: a .jsonl(.gz)/.json/.parquet/.csv file or a folder of them"),
    field: List[str] = typer.Option([], "--field", help="KEY=COLUMN for a PATH with its own columns; keys: question, "
                                    "answer, options, tests, id. Repeatable."),
    min_tests: int = typer.Option(-1, help="Code problems: fewest test cases kept (-1: 6 for verifiable-coding, "
                                  "1 otherwise; HumanEval counts its asserts)."),
    split: str = typer.Option("test", help="test (the benchmark) | train (a disjoint problem set, e.g. for ppo-1)"),
    exclude: List[str] = typer.Option([], "--exclude", help="Never draw these problems: a build or export folder, a "
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
                               "their own); a kept problem then gets G fresh rollouts. None with --min-acc 0 --max-acc 1."),
    min_novel_numbers: int = typer.Option(-1, help="number domain: a correct response must hold this many numbers "
                                          "absent from question and answer (-1: 4 for hub/file sources, 0 for builtin)."),
    temperature: float = typer.Option(0.7), top_p: float = typer.Option(1.0),
    max_tokens: int = typer.Option(MAX_TOKENS, help="Max new tokens per rollout/continuation."),
    seed: int = typer.Option(0),
    seeds: Optional[str] = SEEDS,
    dtype: str = typer.Option("auto", help="auto (bf16 on a GPU or a CPU with native bf16, else fp32) | bfloat16 | "
                              "float32. Changes samples, so it is part of the fingerprint."),
    engine: str = typer.Option("vllm", help="vllm | hf | scripted (a deterministic stand-in for tests, no model) | "
                               "the name of an installed plugin (entry points `sveb.engines`) | module:Class."),
    batch_size: int = typer.Option(64, help="hf engine batch size (speed only)."),
    workers: Optional[int] = WORKERS,
    eager: bool = typer.Option(False, help="vLLM without compilation: faster start, slower decoding; samples of the "
                               "same distribution, not the same tokens (not in the fingerprint, as threads are not)."),
    tp: int = typer.Option(1, "--tp", help="vLLM tensor parallel: GPUs one engine spans (speed only)."),
    gpu_memory_utilization: float = typer.Option(0.9, help="vLLM on a GPU: share of its memory the engine may take."),
    ray: Optional[str] = RAY,
    gpus_per_worker: float = typer.Option(-1, help="--ray: GPUs per actor (-1: --tp where the cluster has GPUs, "
                                          "else 0)."),
    cpus_per_worker: float = typer.Option(1, help="--ray: CPUs per actor (a CPU engine uses as many threads)."),
    preset: str = typer.Option("sveb", help="sveb: SVEB's protocol | paper: the Hista/Numca authors' protocol as "
                               "their scripts run it (G 32, one space cut per problem, full-budget continuations, "
                               f"--max-tokens {PAPER_MAX_TOKENS}, 20 screens, equal tiers; docs/data.md); flags given win."),
    cut: Optional[str] = typer.Option(None, help="token (SVEB's: a token-exact prefix) | space (the paper's: one "
                                      "state per problem, cut at a space of the first rollout, the prefix text "
                                      "re-tokenised). Default: the preset's."),
    continuation: Optional[str] = typer.Option(None, help="remaining (SVEB's: a continuation gets the budget its "
                                               "rollout had left) | full (the paper's: --max-tokens on top of the "
                                               "prefix). Default: the preset's."),
    tiers: Optional[str] = typer.Option(None, help="range (SVEB's: --min-acc..--max-acc) | paper (equal numbers of "
                                        "problems in the accuracy tiers (0.07, 0.17], (0.17, 0.37], (0.37, 0.77]; "
                                        "programming adds (0, 0.07], which needs --screen 15 or more; and the "
                                        "paper's number rule). Default: the preset's."),
    ctx: typer.Context = None,
) -> None:
    """Sample rollouts, cut states, compute Monte-Carlo reference values."""
    from dataclasses import replace
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.sample.distributed import ray_options
    from sveb.sample.rules import validate
    from sveb.store.builds import describe
    from sveb.sample.pipeline import build as run_build
    from sveb.data_builders.fields import parse as parse_fields
    from sveb.data_builders.look import resolve_domain
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
    cfg = _preset(cfg, preset, ctx)
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


def _preset(cfg, preset: str, ctx):
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


@app.command("eval", cls=OptionalRayValue)
def eval_(
    estimator: List[str] = typer.Option([], "--estimator", "-e", help="Estimator name (`sveb ls estimators`) or "
                                        "module:Class; repeat for several. Default: the baseline."),
    param: List[str] = typer.Option([], "--param", "-P", help="Estimator parameter key=value; repeatable."),
    protocol: List[str] = typer.Option(["held-out"], help="held-out (the headline: the state's own rollout is "
                                       "not in the group) | in-group (the paper's); repeat for both."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build", help="Build fingerprint (prefix), build or export folder "
                                           "(`sveb export`), or hub:ID (an export on the Hugging Face hub)."),
    expect: Optional[str] = EXPECT,
    seeds: Optional[str] = typer.Option(None, "--seeds", help="Build seeds, e.g. 0,1,2: score the newest complete "
                                        "build of each seed (`sveb build --seeds`); the leaderboard pools them."),
    force: bool = typer.Option(False, help="Recompute even if stored."),
    ray: Optional[str] = RAY,
    workers: Optional[int] = typer.Option(None, "--workers", help="--ray: actors, each extracting hidden states "
                                          "and running the estimator per problem group (default as for build)."),
    gpus_per_worker: float = typer.Option(-1, help="--ray: GPUs per actor (-1: 1 where the cluster has GPUs)."),
    cpus_per_worker: float = typer.Option(1, help="--ray: CPUs per actor."),
    allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS,
):
    """Run estimators on a build and print their scores (hidden layer: -P layer=N)."""
    from sveb.sample.distributed import ray_options
    from sveb.store.builds import find_build
    from sveb.evaluate import evaluate, params_dict, print_build_info
    from sveb.evaluate.protocols import check_protocol
    from sveb.core.errors import UsageError
    from sveb.estimators import BASELINE, make
    from sveb.present.leaderboard import print_pivot
    from sveb.core.models import check_model, model_slug
    estimator = estimator or [BASELINE]
    model = check_model(model, weights=False)  # a short name finds the build made with its hub id
    params = params_dict(param)
    for p in protocol:
        check_protocol(p)
    for e in estimator:  # a typo fails here, before any build is looked for
        make(e, params)
    if workers is not None and ray is None:
        raise UsageError("--workers: only with --ray for eval")
    opts = ray_options(ray, workers, gpus_per_worker, cpus_per_worker, 1)
    if seeds is not None:
        from sveb.store.builds import find_seed_builds
        bdirs = find_seed_builds(root, model_slug(model), domain, parse_seeds(seeds, 0), build_id)
    else:
        bdirs = [find_build(root, model_slug(model), domain, build_id, console)]
    from sveb.store.builds import check_expected
    check_expected(bdirs, expect)  # the data pinned by the user, not only the export's word for itself
    from sveb.store.builds import results_view
    bdirs = [results_view(b, console) for b in bdirs]  # a read-only build's scores go to a writable mirror
    for bdir in bdirs:
        print_build_info(bdir, console)
    announce_loads(estimator, model)
    if opts is not None:
        from sveb.sample.distributed import connect
        connect(opts)  # one cluster for every estimator; it stops with this process
    rows = [evaluate(bdir, e, params, p, force=force, console=console, ray=opts)
            for bdir in bdirs for e in estimator for p in protocol]
    if BASELINE not in estimator:  # every verdict is paired against it (instant: a group mean)
        for bdir in bdirs:
            for p in protocol:
                evaluate(bdir, BASELINE, {}, p, console=console)
    from sveb.present.leaderboard import rows_of_builds
    shown = {(r["estimator"], r["params_fp"]) for r in rows}
    from sveb.score.pool_checks import Allow
    board = [r for r in rows_of_builds(bdirs, Allow(allow_mixed_dtype, allow_unequal_seeds)) if r["protocol"] in protocol
             and ((r["estimator"], r["params_fp"]) in shown or r["estimator"] == BASELINE)]
    print_pivot(board, out)  # the paired Δ vs the baseline, Holm over every estimator stored on the build (as the leaderboard)


@app.command()
def ablate(
    estimator: str = typer.Option(..., "--estimator", "-e", help="Any estimator (`sveb ls estimators` shows which "
                                  "have a default grid)."),
    grid: List[str] = typer.Option([], "--grid", help="key=v1,v2,... (repeatable); default: the registry's grid."),
    full: bool = typer.Option(False, help="All combinations instead of one axis at a time."),
    protocol: str = typer.Option("held-out"), domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build"),
):
    """Sweep an estimator's parameters on a build and print MAE per setting."""
    from sveb.evaluate.ablate import ablate as run, default_grid, parse_grid, print_ablation
    from sveb.store.builds import find_build
    from sveb.core.models import model_slug
    g = parse_grid(grid) if grid else default_grid(estimator)
    from sveb.store.builds import results_view
    bdir = results_view(find_build(root, model_slug(model), domain, build_id, console), console)
    print_ablation(estimator, run(bdir, estimator, g, protocol, full, console), out)


@app.command()
def collapse(
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build"),
    out_dir: Path = typer.Option(Path("report/collapse"), "--out", help="Where the JSON and PNG files go."),
):
    """V_est - V_grpo per state for every evaluated estimator: mean, std, share within 0.05, histograms."""
    import json as _json
    from rich.table import Table
    from sveb.evaluate.collapse import collapse_report
    from sveb.store.builds import find_build
    from sveb.core.models import model_slug
    from sveb.store import check_writable
    check_writable(out_dir, "--out")
    from sveb.store.builds import results_view
    bdir = results_view(find_build(root, model_slug(model), domain, build_id, console), create=False)
    paths = collapse_report(bdir, out_dir)
    t = Table(title="V_est - V_grpo per state (collapse to the group mean: mean ~ 0, std ~ 0)")
    from sveb.present.leaderboard import labels
    for c in ("estimator", "protocol", "n", "mean", "std", "within +-0.05"):
        t.add_column(c, no_wrap=c != "estimator")  # at 80 columns the labels wrap, never the numbers
    stats = [_json.loads(p.read_text()) for p in sorted(x for x in paths if x.suffix == ".json")]
    names = labels({(st["estimator"], st["params_fp"]): _json.dumps(st["params"]) for st in stats})
    for st in stats:
        t.add_row(names[(st["estimator"], st["params_fp"])], st["protocol"], str(st["n"]), f"{st['mean']:+.3f}",
                  f"{st['std']:.3f}", f"{st['frac_within']:.0%}")
    out.print(t)
    out.print(f"histograms and JSON in {out_dir}")


@app.command()
def report(root: Path = ROOT, out_dir: Path = typer.Option(Path("report"), "--out", help="Output directory."),
           all_settings: bool = typer.Option(False, help="Also plot ablation settings next to the defaults."),
           by: List[str] = typer.Option([], "--by", help="Also break MAE down by this problem meta key (e.g. level, "
                                        "subject); repeatable. Writes by_KEY.csv and tables."),
           build_id: Optional[str] = BUILD_DIR,
           force: bool = typer.Option(False, "--force", help="Write into a non-empty --out that is not an earlier "
                                      "report."),
           allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS):
    """Tables, plots and one static index.html from every build under ROOT."""
    from sveb.present.report import write_report
    from sveb.store import check_own_out, check_writable
    check_own_out(out_dir, "report", "SVEB report", force)
    check_writable(out_dir, "--out")
    root = _build_root(root, build_id)
    from sveb.score.pool_checks import Allow
    index = write_report(root, out_dir, all_settings=all_settings, by=tuple(by),
                         allow=Allow(allow_mixed_dtype, allow_unequal_seeds))
    out.print(f"report: {index}")


@app.command()
def demo(
    root: Path = typer.Option(Path("sveb_data"), "--root"),
    results: Optional[Path] = typer.Option(None, help="Where leaderboard.csv, the report and made-by.txt go "
                                           "(default: ROOT/demo for the demo preset, git-ignored; results/PRESET/ "
                                           "for the others)."),
    domains: str = typer.Option("number", help="Space- or comma-separated domains."),
    engine: str = typer.Option("vllm"),
    estimators: str = typer.Option("", help="Comma-separated estimators (default: all)."),
    preset: str = typer.Option("demo", help="demo: 6 problems x 16 rollouts x 3 states, a 4-problem train build (~11 min on 2 AVX2 cores); quick: "
                               "6 x 16 x 2 per domain; powered: 50 x 16 x 4 in step pairs per seed (`make powered`: --seeds 0,1,2, 600 states, hours); "
                               "paper: the Hista/Numca authors' protocol (docs/data.md), 12 problems x 32 x 1."),
    quick: bool = typer.Option(False, help="Same as --preset quick."),
    seeds: Optional[str] = SEEDS,
    build_only: bool = typer.Option(False, "--build-only", help="Sample the builds and stop (score them later: rerun "
                                    "without it, or `sveb export` them to score elsewhere)."),
    eager: Optional[bool] = typer.Option(None, "--eager/--no-eager", help="vLLM without compilation (default: on for "
                                         "the demo and quick presets, whose first run would spend longer compiling "
                                         "than eager decoding costs; off for the others)."),
):
    """The embedded default end to end: build, evaluate every estimator, write the leaderboard."""
    from sveb.core import signals
    from sveb.experiment.demo import run_demo
    signals.install()
    names = [e.strip() for e in estimators.split(",") if e.strip()] or None
    from sveb.experiment.demo import PRESETS
    preset = "quick" if quick else preset
    if preset not in PRESETS:
        raise typer.BadParameter(f"unknown preset '{preset}'; known: {', '.join(PRESETS)}", param_hint="--preset")
    results = results or (root / "demo" if preset == "demo" else Path("results") / preset)
    run_demo(root, results, domains.replace(",", " ").split(), engine, console, out, names, preset,
             parse_seeds(seeds, 0), build_only, eager)


from sveb.cli import board as cli_board, conformance as cli_conformance, export as cli_export, inspect as cli_inspect  # noqa: E402,F401  (register `export`, `import`,
#   `ls`, `plan`, `submit`, `leaderboard`, `conformance`)
from sveb.cli import rl as cli_rl  # noqa: E402,F401  (register `rl`)

if __name__ == "__main__":
    app()
