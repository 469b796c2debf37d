"""`sveb plan`'s printed form: a table per domain and the assumptions behind it."""

from __future__ import annotations

from sveb.sample.plan import duration, human


def short(n: float | None, unit: str = "") -> str:
    """A count in at most 6 characters, 3 significant digits: 9000 -> '9,000', 120000 -> '120k', 1.52e9 bytes with
    unit 'B' -> '1.52GB'. Short so that a table of five domains fits an 80-column terminal (--json is exact)."""
    if n is None:
        return "?"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= (scale if unit or scale > 1e3 else 1e5):  # plain counts keep their digits up to 99,999
            v = n / scale
            digits = 2 if abs(v) < 10 else 1 if abs(v) < 100 else 0
            return f"{v:.{digits}f}{prefix}{unit}"
    return f"{n:,.0f}{unit}"


def print_plan(p: dict, out) -> None:
    """The plan as a rich table and a few lines on `out` (a rich Console)."""
    from rich import box
    from rich.table import Table
    s, rows, total = p["settings"], p["domains"], p["total"]
    # labels wrap, numbers never: at 80 columns rich narrows the label column, not the values
    t = Table(title=f"sveb plan: {p['model_spec']}, {s['problems']:,} problems per domain", box=box.SIMPLE_HEAD,
              show_edge=False, pad_edge=False, collapse_padding=True)
    t.add_column("", ratio=1, min_width=12)
    for c in [*rows, "total"]:
        t.add_column(c, justify="right", no_wrap=True)

    def line(label, key, fmt=short):
        t.add_row(label, *(fmt(r[key]) for r in rows.values()), fmt(total[key]) if key in total else "")

    line(f"candidates (problems x {s['oversample']})", "candidates")
    line(f"  dropped (after {s['screen']})", "discarded")
    line(f"rollouts (kept x {s['rollouts']})", "rollouts")
    line("screening rollouts", "screening_rollouts")
    line(f"states ({s['states_per_problem']} per problem)", "states")
    line(f"continuations ({s['mc']}+{s['mc_extra']} each)", "continuations")
    line("mean tokens: prompt", "mean_prompt_tokens")
    line("  response", "mean_response_tokens")
    line("  left after a state", "mean_remaining_tokens")
    line("generated tokens", "generated_tokens")
    line("  in rollouts", "rollout_tokens")
    line("  in continuations", "continuation_tokens")
    line("hidden-state tokens", "hidden_tokens")
    line("Parquet: rollouts", "rollouts_bytes", lambda v: short(v, "B"))
    line("  states + references", "states_references_bytes", lambda v: short(v, "B"))
    d = (p["model"] or {}).get("hidden_size")
    line(f"hidden cache fp16 d={d}", "hidden_bytes", lambda v: short(v, "B"))
    out.print(t)
    # the notes wrap between words at the terminal's width
    m = p["model"]
    size = f"{m['params_b']:.3g}B parameters" if m and m["params_b"] else "parameters unknown"
    out.print(f"model: {p['model_spec']}: " + (f"hidden size {m['hidden_size']}, {m['layers']} layers, {size} "
              f"({m['source']})" if m else "architecture unknown (not in the table, not cached)"))
    by_source: dict = {}
    for dom, r in rows.items():
        by_source.setdefault(r["lengths"], []).append(dom)
    for src, doms in by_source.items():
        out.print(f"lengths of {', '.join(doms)}: {src}" + (" (no complete build of this model there under --root)"
                                                            if src == "assumed" else ""))
    tm = p["time"] or {}
    fwd = (f"hidden states measured: {tm['measured']['hidden_tok_per_s']:,.0f} tokens/s on {tm['measured']['gpu']} "
           f"({tm['measured']['source']})" if tm.get("measured") else
           f"a forward pass assumed {p['forward_speedup']}x faster per token")
    out.print(f"throughput: {p['throughput']}; {fwd}")
    if tm.get("measured"):
        out.print(f"measured on that GPU, per GPU here: a critic epoch {duration(tm['critic_epoch_s'])}, pacs's fit "
                  f"and scores {duration(tm['pacs_s'])} over these rollouts")
    if p["time"]:
        out.print(f"time on {s['gpus']} GPU(s): generation {duration(tm['generation_s'])} + hidden states "
                  f"{duration(tm['hidden_s'])} = [bold]{duration(tm['total_s'])}[/] (shards spread evenly; "
                  f"model loading, rewards and critic training not counted)")
    for name, w in (p.get("scorers") or {}).items():
        m = w["model"]
        shape = (f"{m['params_b']:.3g}B parameters ({m['source']})" if m and m.get("params_b")
                 else "parameters unknown (not in the tables, not cached): pass --tok-per-s for a time")
        when = (f"{duration(w['time_s'])} on {s['gpus']} GPU(s) at {w['tok_per_s'] * p['forward_speedup']:,.0f} "
                f"tokens/s ({w['rate']})" if w["time_s"] is not None else "time unknown")
        out.print(f"scorer {name}: {shape}; one forward pass per state over question + prefix: "
                  f"{short(w['total_tokens'])} tokens, {human(w['flops'], 'FLOP')}, "
                  f"{when}", soft_wrap=False)
