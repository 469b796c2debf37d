"""The `sveb` command. Argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="SVEB: how accurately does a state-value estimator predict V(s), the expected final reward given the prefix s?")
console = Console(stderr=True)
out = Console()

ROOT = typer.Option("sveb_data", "--root", help="Where builds are stored.")
MODEL = typer.Option("smollm2-135m", "--model", help="Builtin alias, local model directory, or hub id.")
DOMAIN = typer.Option("number", "--domain", help="number | math | science | general | programming")


def _fail(e: Exception) -> None:
    console.print(f"[red]error:[/] {e}")
    raise typer.Exit(1)



def _known() -> tuple:
    from sveb.data_builders import SourceError
    from sveb.evaluate import EvalError
    from sveb.estimators import UnknownEstimator
    from sveb.models import ModelError
    from sveb.report import ReportError
    from sveb.store import StoreError
    return (SourceError, EvalError, UnknownEstimator, ModelError, StoreError, ReportError, ValueError,
            FileNotFoundError)


@app.command()
def build(
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    source: str = typer.Option("builtin", help="builtin | hub | path to a .parquet/.jsonl/.json file or directory"),
    split: str = typer.Option("test", help="test (the benchmark) | train (a disjoint problem set, e.g. for ppo-1)"),
    problems: int = typer.Option(8, help="Problems kept after the difficulty filter."),
    oversample: int = typer.Option(4, help="Candidates drawn per kept problem."),
    rollouts: int = typer.Option(40, help="G: rollouts per problem."),
    states_per_problem: int = typer.Option(2, help="S: states cut per problem."),
    mc: int = typer.Option(20, help="n_ref: continuations per state for the reference value."),
    mc_extra: int = typer.Option(4, help="Independent continuations per state for the MCS@k baselines."),
    min_acc: float = typer.Option(0.1, help="Difficulty filter: lowest rollout accuracy kept."),
    max_acc: float = typer.Option(0.8, help="Difficulty filter: highest rollout accuracy kept."),
    min_novel_numbers: int = typer.Option(-1, help="number domain: a correct response must hold this many numbers "
                                          "absent from question and answer (-1: 4 for hub/file sources, 0 for builtin)."),
    temperature: float = typer.Option(0.7), top_p: float = typer.Option(1.0),
    max_tokens: int = typer.Option(512, help="Max new tokens per rollout/continuation."),
    seed: int = typer.Option(0),
    engine: str = typer.Option("vllm", help="vllm | hf"),
    batch_size: int = typer.Option(64, help="hf engine batch size (speed only)."),
    workers: int = typer.Option(4, help="Parallel reward workers (speed only)."),
    eager: bool = typer.Option(False, help="vLLM without compilation: faster start, slower decoding (speed only)."),
):
    """Sample rollouts, cut states, compute Monte-Carlo reference values."""
    from sveb.config import BuildConfig, SamplingConfig
    from sveb.pipeline import build as run_build, describe
    if split not in ("test", "train"):
        _fail(ValueError(f"--split {split}: expected test or train"))
    if not 0 <= min_acc <= max_acc <= 1:
        _fail(ValueError(f"--min-acc {min_acc} / --max-acc {max_acc}: need 0 <= min <= max <= 1"))
    for flag, v in (("--problems", problems), ("--rollouts", rollouts), ("--mc", mc), ("--max-tokens", max_tokens)):
        if v < 1:
            _fail(ValueError(f"{flag} {v}: must be at least 1"))
    cfg = BuildConfig(domain=domain, model=model, source=source, split=split, problems=problems, oversample=oversample,
                      rollouts=rollouts, states_per_problem=states_per_problem, mc=mc, mc_extra=mc_extra,
                      min_acc=min_acc, max_acc=max_acc, min_novel_numbers=min_novel_numbers, seed=seed,
                      sampling=SamplingConfig(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
                      engine=engine, batch_size=batch_size, workers=workers, eager=eager)
    try:
        bdir = run_build(cfg, root, console=console)
    except _known() as e:
        _fail(e)
    out.print(describe(bdir))
    out.print(str(bdir))


@app.command("eval")
def eval_(
    estimator: List[str] = typer.Option(["grpo"], "--estimator", "-e", help="Estimator name; repeat for several."),
    param: List[str] = typer.Option([], "--param", "-P", help="Estimator parameter key=value; repeatable."),
    protocol: List[str] = typer.Option(["in-group"], help="in-group | held-out; repeat for both."),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build", help="Build fingerprint (prefix) to evaluate."),
    bootstrap: int = typer.Option(2000, help="Bootstrap resamples for the CI."),
    seed: int = typer.Option(0), force: bool = typer.Option(False, help="Recompute even if stored."),
    layer: int = typer.Option(-1, help="Hidden layer for hidden-state estimators (-1 = last)."),
):
    """Run estimators on a build and print their scores."""
    from sveb.evaluate import evaluate, find_build, params_dict
    from sveb.leaderboard import print_pivot
    from sveb.models import model_slug
    try:
        bdir = find_build(root, model_slug(model), domain, build_id, console)
        params = params_dict(param)
        rows = [evaluate(bdir, e, params, p, bootstrap, seed, force, console, {"layer": layer})
                for e in estimator for p in protocol]
    except _known() as e:
        _fail(e)
    print_pivot(rows, out)


@app.command()
def leaderboard(root: Path = ROOT, out_csv: Path = typer.Option(Path("leaderboard.csv"), "--out")):
    """Gather every score under ROOT into one CSV and print the pivot."""
    from sveb.leaderboard import print_pivot, rows, write_csv
    r = rows(root)
    if not r:
        _fail(FileNotFoundError(f"no scores under {root}; run `sveb eval` first"))
    write_csv(r, out_csv)
    print_pivot(r, out)
    out.print(f"wrote {out_csv} ({len(r)} rows)")


@app.command()
def ablate(
    estimator: str = typer.Option(..., "--estimator", "-e", help="hista, shear, or any estimator."),
    grid: List[str] = typer.Option([], "--grid", help="key=v1,v2,... (repeatable); default: a built-in grid."),
    full: bool = typer.Option(False, help="All combinations instead of one axis at a time."),
    protocol: str = typer.Option("in-group"), domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build"),
):
    """Sweep an estimator's parameters on a build and print MAE per setting."""
    from sveb.ablate import DEFAULT_GRIDS, ablate as run, parse_grid, print_ablation
    from sveb.evaluate import find_build
    from sveb.models import model_slug
    try:
        g = parse_grid(grid) if grid else DEFAULT_GRIDS.get(estimator)
        if not g:
            raise ValueError(f"--grid: no default grid for {estimator}; pass --grid key=v1,v2")
        bdir = find_build(root, model_slug(model), domain, build_id, console)
        print_ablation(estimator, run(bdir, estimator, g, protocol, full, console), out)
    except _known() as e:
        _fail(e)


@app.command()
def collapse(
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    build_id: Optional[str] = typer.Option(None, "--build"),
    out_dir: Path = typer.Option(Path("report/collapse"), "--out", help="Where the JSON and PNG files go."),
):
    """V_est - V_grpo per state for every evaluated estimator: mean, std, share within 0.05, histograms."""
    import json as _json
    from rich.table import Table
    from sveb.collapse import collapse_report
    from sveb.evaluate import find_build
    from sveb.models import model_slug
    try:
        bdir = find_build(root, model_slug(model), domain, build_id, console)
        paths = collapse_report(bdir, out_dir)
    except _known() as e:
        _fail(e)
    t = Table(title="V_est - V_grpo per state (collapse to the group mean: mean ~ 0, std ~ 0)")
    from sveb.leaderboard import labels
    for c in ("estimator", "protocol", "n", "mean", "std", "within +-0.05"):
        t.add_column(c)
    stats = [_json.loads(p.read_text()) for p in sorted(x for x in paths if x.suffix == ".json")]
    names = labels({(st["estimator"], st["params_fp"]): _json.dumps(st["params"]) for st in stats})
    for st in stats:
        t.add_row(names[(st["estimator"], st["params_fp"])], st["protocol"], str(st["n"]), f"{st['mean']:+.3f}",
                  f"{st['std']:.3f}", f"{st['frac_within']:.0%}")
    out.print(t)
    out.print(f"histograms and JSON in {out_dir}")


@app.command()
def report(root: Path = ROOT, out_dir: Path = typer.Option(Path("report"), "--out", help="Output directory."),
           all_settings: bool = typer.Option(False, help="Also plot ablation settings next to the defaults.")):
    """Tables, plots and one static index.html from every build under ROOT."""
    from sveb.report import write_report
    try:
        index = write_report(root, out_dir, all_settings=all_settings)
    except _known() as e:
        _fail(e)
    out.print(f"report: {index}")


@app.command()
def ls(what: str = typer.Argument(..., help="estimators | domains | models | builds"), root: Path = ROOT):
    """List what exists."""
    if what == "estimators":
        from sveb.estimators import DESCRIPTIONS
        for k, v in DESCRIPTIONS.items():
            out.print(f"{k:8s} {v}")
    elif what == "domains":
        from sveb.data_builders import DOMAINS
        out.print("\n".join(DOMAINS))
    elif what == "models":
        from sveb.models import BUILTIN, cache_dir
        for k, v in BUILTIN.items():
            cached = (cache_dir() / "models" / k / "config.json").exists()
            out.print(f"{k:14s} {v['description']} ({'cached' if cached else 'not cached yet'})")
        out.print("or any hub id (e.g. Qwen/Qwen2.5-3B-Instruct) or local model directory")
    elif what == "builds":
        from sveb import store
        for b in store.list_builds(root):
            m = store.read_manifest(b)
            out.print(f"{b}  {m.get('status')}  problems={m.get('n_problems')} states={m.get('n_states')}")
    else:
        _fail(ValueError(f"ls {what}: expected estimators, domains, models or builds"))


@app.command()
def demo(
    root: Path = typer.Option(Path("sveb_data"), "--root"),
    results: Path = typer.Option(Path("results"), help="Where leaderboard.csv (and the report) go."),
    domains: str = typer.Option("number", help="Space- or comma-separated domains."),
    engine: str = typer.Option("vllm"),
    estimators: str = typer.Option("", help="Comma-separated estimators (default: all)."),
    quick: bool = typer.Option(False, help="6 problems x 16 rollouts x 2 states per domain: a first look."),
):
    """The embedded default end to end: build, evaluate every estimator, write the leaderboard."""
    from sveb.demo import run_demo
    try:
        names = [e.strip() for e in estimators.split(",") if e.strip()] or None
        run_demo(root, results, domains.replace(",", " ").split(), engine, console, out, names, quick)
    except _known() as e:
        _fail(e)


if __name__ == "__main__":
    app()
