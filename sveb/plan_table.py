"""`sveb plan`'s printed form: a table per domain and the assumptions behind it."""

from __future__ import annotations


def print_plan(p: dict, out) -> None:
    """The plan as a rich table and a few lines on `out` (a rich Console)."""
    from rich.table import Table
    from sveb.plan import duration, human
    s, rows, total = p["settings"], p["domains"], p["total"]
    t = Table(title=f"sveb plan: {p['model_spec']}, {s['problems']:,} problems per domain")
    t.add_column("", no_wrap=True)
    for c in [*rows, "total"]:
        t.add_column(c, justify="right")

    def line(label, key, fmt=lambda v: f"{v:,.0f}"):
        t.add_row(label, *(fmt(r[key]) for r in rows.values()), fmt(total[key]) if key in total else "")

    line(f"candidates (problems x {s['oversample']})", "candidates")
    line(f"  dropped after {s['screen']} rollouts each", "discarded")
    line(f"rollouts (kept x {s['rollouts']})", "rollouts")
    line("screening rollouts", "screening_rollouts")
    line(f"states ({s['states_per_problem']} per problem)", "states")
    line(f"continuations (states x {s['mc']}+{s['mc_extra']})", "continuations")
    t.add_row("mean tokens: prompt/response/left",
              *(f"{r['mean_prompt_tokens']:.0f}/{r['mean_response_tokens']:.0f}/{r['mean_remaining_tokens']:.0f}"
                for r in rows.values()), "")
    line("generated tokens: rollouts", "rollout_tokens", human)
    line("generated tokens: continuations", "continuation_tokens", human)
    line("generated tokens", "generated_tokens", human)
    line("hidden-state tokens (forward)", "hidden_tokens", human)
    line("rollouts Parquet", "rollouts_bytes", lambda v: human(v, "B"))
    line("states + references Parquet", "states_references_bytes", lambda v: human(v, "B"))
    d = (p["model"] or {}).get("hidden_size")
    line(f"hidden-state cache (fp16, d={d})", "hidden_bytes", lambda v: human(v, "B"))
    out.print(t)
    m = p["model"]
    size = f"{m['params_b']:.3g}B parameters" if m and m["params_b"] else "parameters unknown"
    out.print(f"model: {p['model_spec']}: " + (f"hidden size {m['hidden_size']}, {m['layers']} layers, {size} "
              f"({m['source']})" if m else "architecture unknown (not in the table, not cached)"), soft_wrap=True)
    by_source: dict = {}
    for dom, r in rows.items():
        by_source.setdefault(r["lengths"], []).append(dom)
    for src, doms in by_source.items():
        out.print(f"lengths of {', '.join(doms)}: {src}" + (" (no complete build of this model there under --root)"
                                                            if src == "assumed" else ""), soft_wrap=True)
    out.print(f"throughput: {p['throughput']}; a forward pass assumed {p['forward_speedup']}x faster per token",
              soft_wrap=True)
    if p["time"]:
        tm = p["time"]
        out.print(f"time on {s['gpus']} GPU(s): generation {duration(tm['generation_s'])} + hidden states "
                  f"{duration(tm['hidden_s'])} = [bold]{duration(tm['total_s'])}[/] (shards spread evenly; "
                  f"model loading, rewards and critic training not counted)", soft_wrap=True)
