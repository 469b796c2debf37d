"""`sveb eval`, `ablate`, `collapse`, `report` and `demo`: score builds and show the results (argument parsing
only)."""

from __future__ import annotations

from pathlib import Path

import typer

from sveb.cli.common import (
    ALLOW_MIXED_DTYPE,
    ALLOW_UNEQUAL_SEEDS,
    BUILD_DIR,
    DOMAIN,
    EXPECT,
    MODEL,
    RAY,
    ROOT,
    SEEDS,
    OptionalRayValue,
    announce_loads,
    app,
    build_root,
    console,
    out,
    parse_seeds,
)


@app.command("eval", cls=OptionalRayValue)
def eval_(
    estimator: list[str] = typer.Option([], "--estimator", "-e", help="Estimator name (`sveb ls estimators`) or "
                                        "module:Class; repeat for several. Default: the baseline."),
    param: list[str] = typer.Option([], "--param", "-P", help="Estimator parameter key=value; repeatable."),
    protocol: list[str] = typer.Option(["held-out"], help="held-out (the headline: the state's own rollout is "
                                       "not in the group) | in-group (the paper's); repeat for both."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: str | None = typer.Option(None, "--build", help="Build fingerprint (prefix), build or export folder "
                                           "(`sveb export`), or hub:ID (an export on the Hugging Face hub)."),
    expect: str | None = EXPECT,
    seeds: str | None = typer.Option(None, "--seeds", help="Build seeds, e.g. 0,1,2: score the newest complete "
                                        "build of each seed (`sveb build --seeds`); the leaderboard pools them."),
    force: bool = typer.Option(False, help="Recompute even if stored."),
    ray: str | None = RAY,
    workers: int | None = typer.Option(None, "--workers", help="--ray: actors, each extracting hidden states "
                                          "and running the estimator per problem group (default as for build)."),
    gpus_per_worker: float = typer.Option(-1, help="--ray: GPUs per actor (-1: 1 where the cluster has GPUs)."),
    cpus_per_worker: float = typer.Option(1, help="--ray: CPUs per actor."),
    allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS,
):
    """Run estimators on a build and print their scores (hidden layer: -P layer=N)."""
    from sveb.core.errors import UsageError
    from sveb.core.models import check_model, model_slug
    from sveb.estimators import BASELINE, make
    from sveb.evaluate import evaluate, params_dict, print_build_info
    from sveb.evaluate.protocols import check_protocol
    from sveb.present.leaderboard import print_pivot
    from sveb.sample.distributed import ray_options
    from sveb.store.builds import locate_build
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
        from sveb.store.builds import locate_seed_builds
        builds = locate_seed_builds(root, model_slug(model), domain, parse_seeds(seeds, 0), build_id)
    else:
        builds = [locate_build(root, model_slug(model), domain, build_id, console)]
    from sveb.store.builds import check_expected
    check_expected(builds, expect)  # the data pinned by the user, not only the export's word for itself
    from sveb.store.builds import results_view
    builds = [results_view(b, console) for b in builds]  # a read-only build's scores go to a writable mirror
    for build in builds:
        print_build_info(build, console)
    announce_loads(estimator, model)
    if opts is not None:
        from sveb.sample.distributed import connect
        connect(opts)  # one cluster for every estimator; it stops with this process
    rows = [evaluate(build, e, params, p, force=force, console=console, ray=opts)
            for build in builds for e in estimator for p in protocol]
    if BASELINE not in estimator:  # every verdict is paired against it (instant: a group mean)
        for build in builds:
            for p in protocol:
                evaluate(build, BASELINE, {}, p, console=console)
    from sveb.present.leaderboard import rows_of_builds
    shown = {(r["estimator"], r["params_fp"]) for r in rows}
    from sveb.score.pool_checks import Allow
    board = [r for r in rows_of_builds(builds, Allow(allow_mixed_dtype, allow_unequal_seeds))
             if r["protocol"] in protocol and ((r["estimator"], r["params_fp"]) in shown or r["estimator"] == BASELINE)]
    # the paired Δ vs the baseline, Holm over every estimator stored on the build (as the leaderboard)
    print_pivot(board, out)


@app.command()
def ablate(
    estimator: str = typer.Option(..., "--estimator", "-e", help="Any estimator (`sveb ls estimators` shows which "
                                  "have a default grid)."),
    grid: list[str] = typer.Option([], "--grid", help="key=v1,v2,... (repeatable); default: the registry's grid."),
    full: bool = typer.Option(False, help="All combinations instead of one axis at a time."),
    protocol: str = typer.Option("held-out"), domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: str | None = typer.Option(None, "--build"),
):
    """Sweep an estimator's parameters on a build and print MAE per setting."""
    from sveb.core.models import model_slug
    from sveb.evaluate.ablate import ablate as run
    from sveb.evaluate.ablate import default_grid, parse_grid, print_ablation
    from sveb.store.builds import find_build
    g = parse_grid(grid) if grid else default_grid(estimator)
    from sveb.store.builds import results_view
    bdir = results_view(find_build(root, model_slug(model), domain, build_id, console), console)
    print_ablation(estimator, run(bdir, estimator, g, protocol, full, console), out)


@app.command()
def collapse(
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: str | None = typer.Option(None, "--build"),
    out_dir: Path = typer.Option(Path("report/collapse"), "--out", help="Where the JSON and PNG files go."),
):
    """V_est - V_grpo per state for every evaluated estimator: mean, std, share within 0.05, histograms."""
    import json as _json

    from rich.table import Table

    from sveb.core.models import model_slug
    from sveb.evaluate.collapse import collapse_report
    from sveb.store import check_writable
    from sveb.store.builds import find_build
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
           by: list[str] = typer.Option([], "--by", help="Also break MAE down by this problem meta key (e.g. level, "
                                        "subject); repeatable. Writes by_KEY.csv and tables."),
           build_id: str | None = BUILD_DIR,
           force: bool = typer.Option(False, "--force", help="Write into a non-empty --out that is not an earlier "
                                      "report."),
           allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS):
    """Tables, plots and one static index.html from every build under ROOT."""
    from sveb.present.report import write_report
    from sveb.store import check_own_out, check_writable
    check_own_out(out_dir, "report", "SVEB report", force)
    check_writable(out_dir, "--out")
    root = build_root(root, build_id)
    from sveb.score.pool_checks import Allow
    index = write_report(root, out_dir, all_settings=all_settings, by=tuple(by),
                         allow=Allow(allow_mixed_dtype, allow_unequal_seeds))
    out.print(f"report: {index}")


@app.command()
def demo(
    root: Path = typer.Option(Path("sveb_data"), "--root"),
    results: Path | None = typer.Option(None, help="Where leaderboard.csv, the report and made-by.txt go "
                                           "(default: ROOT/demo for the demo preset, git-ignored; results/PRESET/ "
                                           "for the others)."),
    domains: str = typer.Option("number", help="Space- or comma-separated domains."),
    engine: str = typer.Option("vllm"),
    estimators: str = typer.Option("", help="Comma-separated estimators (default: all)."),
    preset: str = typer.Option("demo", help="demo: 6 problems x 16 rollouts x 3 states, a 4-problem train build (~11 "
                               "min on 2 AVX2 cores); quick: 6 x 16 x 2 per domain; powered: 50 x 16 x 4 in step pairs "
                               "per seed (`make powered`: --seeds 0,1,2, 600 states, hours); "
                               "paper: the Hista/Numca authors' protocol (docs/data.md), 12 problems x 32 x 1."),
    quick: bool = typer.Option(False, help="Same as --preset quick."),
    seeds: str | None = SEEDS,
    build_only: bool = typer.Option(False, "--build-only", help="Sample the builds and stop (score them later: rerun "
                                    "without it, or `sveb export` them to score elsewhere)."),
    eager: bool | None = typer.Option(None, "--eager/--no-eager", help="vLLM without compilation (default: on for "
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
