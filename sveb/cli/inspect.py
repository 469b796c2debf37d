"""`sveb ls` and `sveb plan`: look at what exists and what a build would take, without sampling."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from sveb.cli.common import ALLOW_MIXED_DTYPE, ALLOW_UNEQUAL_SEEDS, DOMAIN, MODEL, ROOT, app, console, out, parse_seeds
from sveb.core.config import MAX_TOKENS, PAPER_MAX_TOKENS, BuildConfig


def _table(first: str, *rest: str):
    """A borderless table for `ls`: the first column never wraps (names people type), the others wrap to fit the
    terminal (80 columns included) instead of running past its edge."""
    from rich import box
    from rich.table import Table
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    t.add_column(first, no_wrap=True)
    for c in rest:
        t.add_column(c)
    return t


@app.command()
def ls(what: str = typer.Argument(..., help="estimators | engines | domains | models | builds | sources | problems"),
       root: Path = ROOT,
       domain: str | None = typer.Option(None, "--domain", help="problems: the domain (default: the source's)"),
       source: str = typer.Option("builtin", help="problems: builtin | hub | NAME | NAME=PATH | PATH"),
       field: list[str] = typer.Option([], "--field", help="problems: KEY=COLUMN, as for `sveb build`"),
       min_tests: int = typer.Option(-1, help="problems: as for `sveb build`"),
       split: str = typer.Option("test", help="problems: test | train | all"),
       n: int | None = typer.Option(None, "-n", help="problems: how many to show (default 5; --json: all)"),
       as_json: bool = typer.Option(False, "--json", help="problems: one JSON object per loaded problem")):
    """List what exists; `ls problems` loads a source without sampling and shows what a build would get."""
    if what == "sources":
        from sveb.data_builders.look import SOURCE_NOTES, source_rows
        t = _table("--source", "domain; licence / hub id (config, split) / the file")
        for name, about in source_rows():
            t.add_row(name, escape(about))
        out.print(t)
        out.print(SOURCE_NOTES, highlight=False)
    elif what == "problems":
        from sveb.data_builders.fields import parse as parse_fields
        from sveb.data_builders.look import problem_lines, resolve_domain
        d = resolve_domain(domain, source)
        lines, warnings = problem_lines(d, source, split, parse_fields(field), min_tests, n, as_json)
        for w in warnings:
            console.print(f"warning: {w}", style="yellow", markup=False, highlight=False, soft_wrap=True)
        typer.echo("\n".join(lines))
    elif what == "estimators":
        from sveb.cli.common import loads_model
        from sveb.estimators import entries, entry
        t = _table("estimator", "what it computes")
        for e in [entry(n) for n in entries()]:
            flags = [e.role] + ["loads the model"] * loads_model(e) + \
                ["SVEB's V(s), not the paper's"] * e.constructed + ["hidden states"] * e.needs_hidden + \
                ["trains"] * e.needs_training + ["reads the build's extra draws"] * bool(e.reads_references) + \
                ["token ids"] * bool(e.reads_tokens and not (e.needs_hidden or e.needs_training)) + \
                ["train build"] * e.train_split + [f"grid: {','.join(e.grid)}"] * bool(e.grid) + \
                [f"from {e.origin}"] * (e.origin != "sveb")
            t.add_row(e.name, f"{escape(e.description)} [dim]({escape('; '.join(flags))})[/]")
        out.print(t)
    elif what == "engines":
        from sveb.engines.registry import entries, entry
        t = _table("--engine", "what it is")
        for e in [entry(n) for n in entries()]:
            flags = [f"fingerprint {e.fingerprint}"] + ["no model"] * (not e.uses_model) + \
                [f"from {e.origin}"] * (e.origin != "sveb")
            t.add_row(e.name, f"{escape(e.description)} [dim]({escape('; '.join(flags))})[/]")
        out.print(t)
        out.print("or --engine module:Class (docs/development.md, \"Add an engine\")", highlight=False)
    elif what == "domains":
        from sveb.data_builders import DOMAINS
        out.print("\n".join(DOMAINS))
    elif what == "models":
        from sveb.core.models import listing
        t = _table("--model", "hub id / about", "cached")
        for r in listing():
            t.add_row(r["name"], f"{escape(r['hub_id'])}\n[dim]{escape(r['description'])}[/]",
                      "yes" if r["cached"] else "no")
        out.print(t)
        out.print("Short names are case-insensitive; any hub id or local model directory works too.")
    elif what == "builds":
        from sveb import store
        from sveb.store.builds import check_root
        check_root(root)
        out.print(f"builds under {escape(str(root))}:", soft_wrap=True)
        t = _table("build", "status", "problems", "states", "cut off")
        for b in store.list_builds(root):
            m = store.load_manifest(b)
            tr = m.truncated
            cut = " ".join(f"{k} {tr[k]:.1%}" for k in ("rollouts", "references") if isinstance(tr.get(k), float))
            t.add_row(escape(str(b.relative_to(root))), str(m.status), str(m.n_problems),
                      str(m.n_states), cut)
        out.print(t)
    else:
        from sveb.core.errors import UsageError
        raise UsageError(f"ls {what}: expected estimators, engines, domains, models, builds, sources or problems")


_BUILD = BuildConfig()  # `sveb plan` plans what `sveb build` makes by default


@app.command()
def plan(
    model: str = MODEL, root: Path = ROOT,
    domains: str = typer.Option("all", help="all, or space- or comma-separated domains."),
    problems: int = typer.Option(_BUILD.problems, help="Problems kept per domain (defaults: `sveb build`'s)."),
    oversample: int = typer.Option(_BUILD.oversample, help="Candidates per kept problem."),
    screen: int = typer.Option(_BUILD.screen, help="Rollouts a discarded candidate gets before the filter drops it."),
    rollouts: int = typer.Option(_BUILD.rollouts), states_per_problem: int = typer.Option(_BUILD.states_per_problem),
    mc: int = typer.Option(_BUILD.mc), mc_extra: int = typer.Option(_BUILD.mc_extra),
    max_tokens: int = typer.Option(MAX_TOKENS, help=f"Max new tokens (the paper's: {PAPER_MAX_TOKENS})."),
    gpus: int = typer.Option(1, help="GPUs working in parallel."),
    tok_per_s: float | None = typer.Option(None, help="Generated tokens/s of one GPU (default: an assumption "
                                              "by model size)."),
    scorer: list[str] = typer.Option([], "--scorer", help="Also price scoring every state with this model (a "
                                     "process reward model for `prm`, a judge for `judge`): a hub id or directory; "
                                     "repeat for several."),
    json_out: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
):
    """The work, storage and time a build (and its hidden states) will take, before running it, and the `sveb build`
    command that makes it; with --scorer, what scoring its states with a PRM or judge adds."""
    import json as _json

    from sveb.core.errors import UsageError
    from sveb.core.models import architecture, check_model, model_slug
    from sveb.data_builders import DOMAINS
    from sveb.sample.plan import (
        Settings,
        assumed_lengths,
        build_command,
        check,
        make_plan,
        measured_gpu_rates,  # a GPU sweep's JSON under results/gpu/, if any
        measured_lengths,
        scoring_work,
    )
    spec = check_model(model, weights=False)
    names = list(DOMAINS) if domains == "all" else domains.replace(",", " ").split()
    for d in names:
        if d not in DOMAINS:
            raise UsageError(f"--domains {d}: unknown domain (known: {', '.join(DOMAINS)}, or all)")
    if not names:
        raise UsageError("--domains: none given")
    s = Settings(problems, oversample, rollouts, screen, states_per_problem, mc, mc_extra, max_tokens, gpus)
    check(s)
    if tok_per_s is not None and not (tok_per_s > 0 and tok_per_s != float("inf")):
        raise UsageError(f"--tok-per-s {tok_per_s:g}: must be a positive number of tokens per second")
    lengths = {d: measured_lengths(root, model_slug(spec), d) or assumed_lengths(d, max_tokens) for d in names}
    arch = architecture(spec)
    policy_b = arch.get("params_b") if arch else None
    p = {"model_spec": spec, **make_plan(s, lengths, arch, tok_per_s, measured_gpu_rates()),
         "build_commands": {d: build_command(model, d, s) for d in names},
         "scorers": {m: scoring_work(s, lengths, architecture(m), tok_per_s, policy_b) for m in scorer}}
    if json_out:
        print(_json.dumps(p, indent=2))
    else:
        from sveb.sample.plan_table import print_plan
        print_plan(p, out)
        out.print("to build it:")
        for cmd in p["build_commands"].values():  # whole lines, to copy (not wrapped at the terminal's width)
            out.print(escape(cmd), soft_wrap=True, highlight=False)


@app.command()
def compare(
    a: str = typer.Option(..., "--a", "-a", help="The estimator compared (at its default settings)."),
    b: list[str] = typer.Option(..., "--b", "-b", help="What it is compared with; repeat for several."),
    protocol: str = typer.Option("held-out", help="held-out | in-group"),
    domain: str = DOMAIN, model: str = MODEL, root: Path = ROOT,
    seeds: str | None = typer.Option(None, "--seeds", help="Build seeds to pool, e.g. 0,1,2 (default: the "
                                        "newest complete build)."),
    build_id: str | None = typer.Option(None, "--build", help="Build fingerprint (prefix) or build folder."),
    published: bool = typer.Option(True, "--published/--no-published", help="Also read the committed Table 4 "
                                   "estimates of these builds (results/table4/estimates.parquet, where it exists): "
                                   "an estimator scored on an export is compared with the published ones."),
    allow_mixed_dtype: bool = ALLOW_MIXED_DTYPE, allow_unequal_seeds: bool = ALLOW_UNEQUAL_SEEDS,
):
    """Paired Δ of squared error of A against each B on the same states, seeds pooled (unadjusted p)."""
    from sveb.core.models import check_model, model_slug
    from sveb.evaluate.protocols import check_protocol
    from sveb.score.compare import compare as run
    from sveb.score.compare import line, published_for, with_published
    from sveb.score.pooling import load_view, merge, read_scores
    from sveb.store.builds import locate_build, locate_seed_builds
    check_protocol(protocol)
    slug = model_slug(check_model(model, weights=False))
    if seeds is not None:  # each build opened once: its manifest, parsed here, goes on with it
        builds = locate_seed_builds(root, slug, domain, parse_seeds(seeds, 0), build_id)
    else:
        builds = [locate_build(root, slug, domain, build_id, console)]
    views = [load_view(b, read_scores(b)) for b in builds]
    source = published_for(root)
    added = sorted({n for v in views for n in with_published(v, source)}) if published else []
    if added:
        console.print(f"[dim]from {source}: {', '.join(added)}[/]", soft_wrap=True)
    from sveb.score.pool_checks import Allow, check
    check(views, Allow(allow_mixed_dtype, allow_unequal_seeds))  # the pooling refusals, as the leaderboard's
    view = merge(views)
    shown = ",".join(str(s) for s in view.seeds)
    for r in run(view, a, list(b), protocol):
        out.print(line(r, shown), soft_wrap=True)
    for note in view.notes:
        out.print(f"caveat: {note}", soft_wrap=True)
