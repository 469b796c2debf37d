"""Estimator cost: seconds per state for each estimator, next to the cost of sampling MCS@2.

    python benchmarks/estimators.py [--root ./sveb_data --model smollm2-135m --domain number]
        [--estimators grpo numca hista shear hidden-align pacs probe] [--G 40 --T 1000 --d 576 --states 8] [--seed 0]
        [--mcs --mcs-states 8] [--no-build]

1. build: on the newest complete build of --model/--domain, estimate_all per estimator under
   in-group and held-out; the one-time hidden-state extraction is timed on its own (from the
   build's cache if it is there already) and excluded from the estimators' times. An estimator that
   trains (pacs, ppo-*) is prepared and trained first; that one-time cost is its `train` row.
2. synthetic: one group of G rollouts of T tokens with random d-dim hidden states (a shared
   component, a per-rollout component and per-token noise), random 0/1 rewards and fake texts full
   of numbers; --states states, in-group (estimators that train on a build are left out here).
3. --mcs (off by default, it starts vLLM): wall time to sample 2 continuations of up to
   --mcs-states build states with the build's sampling config, and of the synthetic states (2 x
   exactly T - t tokens each, --model's engine), after a warm-up request; each estimator's time is
   also given as a ratio to its own setting's MCS@2. The synthetic d defaults to the default model's
   hidden size (576), so both sides are the same model size; --d 2048 is a 3B model's width.
Prints a table and a one-line JSON summary.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from rich.console import Console
from rich.table import Table

from sveb.estimators import entry, make
from sveb.estimators.base import ProblemGroup, Rollout, State


def fresh() -> None:
    """Drop Numca's text caches so a run does not reuse a previous run's work."""
    from sveb.estimators import numca
    numca.abstract_path.cache_clear()
    numca.norm_text.cache_clear()


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_build(args, console) -> tuple[dict | None, list[dict]]:
    """Setting 1: the real build. Returns (info, rows); info is None if there is no build."""
    from sveb.core.errors import EvalError
    from sveb.evaluate.context import prepare
    from sveb.evaluate.protocols import estimate_all
    from sveb.store.builds import find_build, group_for, load_build, state_for
    try:
        bdir = find_build(args.root, args.model, args.domain, console=console)
    except EvalError as e:
        console.print(f"[yellow]build setting skipped: {e}[/]")
        return None, []
    data = load_build(bdir)
    n = len(data.states)
    pids = sorted({s["problem_id"] for s in data.states})
    info = {"build": str(bdir), "data": data, "n_states": n, "n_problems": len(pids)}
    fns: dict = {}
    ests = [make(name) for name in args.estimators]
    if any(e.needs_hidden for e in ests):
        from sveb.lm.hidden import HiddenStates
        hs = HiddenStates(bdir, data.manifest["model"])
        cached = hs.dir.exists()
        provider = hs.provider(console)
        secs = timed(lambda: fns.update({p: provider(p, data.rollouts[p]) for p in pids}))
        info.update(hidden_s=secs, hidden_cached=cached)
    rows = []
    for est in ests:
        hidden = (lambda pid, rolls: fns[pid]) if est.needs_hidden else None
        s0 = data.states[0]  # warm-up on one state: imports, first torch calls (and any training)

        def warm_up(est=est, s0=s0):
            prepare(est, data, console)
            est.estimate(group_for(data, s0["problem_id"], fns.get(s0["problem_id"])), [state_for(data, s0)])
        secs = timed(warm_up)
        if entry(est.name).needs_training:
            rows.append({"setting": "build", "estimator": est.name, "protocol": "train (once)",
                         "n_states": n, "s_per_state": secs / n})
        for protocol in ("in-group", "held-out"):
            fresh()
            secs = estimate_all(est, data, protocol, hidden)[2]
            rows.append({"setting": "build", "estimator": est.name, "protocol": protocol,
                         "n_states": n, "s_per_state": secs / n})
    return info, rows


def fake_text(rng, n_chars: int) -> str:
    """Arithmetic-looking text; small numbers so rollouts share some of them."""
    parts, size, k = [], 0, 1
    while size < n_chars:
        a, b = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        parts.append(f"Step {k}: {a} + {b} = {a + b}, so we carry {a + b} forward. ")
        size += len(parts[-1])
        k += 1
    return "".join(parts)[:n_chars]


def synthetic(G: int, T: int, d: int, n_states: int, seed: int) -> tuple[ProblemGroup, list[State]]:
    rng = np.random.default_rng(seed)
    shared = 4.0 * rng.standard_normal(d)
    hidden = [(shared + rng.standard_normal(d) + rng.standard_normal((T, d))).astype(np.float32) for _ in range(G)]
    texts = [fake_text(rng, 4 * T) for _ in range(G)]  # ~4 characters per token
    rolls = tuple(Rollout(g, tuple(range(16)), tuple([0] * T), texts[g], float(rng.integers(0, 2)))
                  for g in range(G))
    states = []
    for k in range(n_states):
        g, t = int(rng.integers(G)), int(rng.integers(1, T))
        states.append(State(f"s{k}", "syn", g, t, texts[g][: len(texts[g]) * t // T]))
    return ProblemGroup({"problem_id": "syn"}, rolls, rolls, lambda i: hidden[i]), states


def bench_synthetic(args) -> list[dict]:
    group, states = synthetic(args.G, args.T, args.d, args.states, args.seed)
    rows = []
    for name in args.estimators:
        if entry(name).needs_training:
            continue
        est = make(name, {"calibration": "fixed"} if name == "hidden-align" else {})
        est.prepare(SimpleNamespace(bdir=Path(tempfile.mkdtemp()), manifest={"model": "none"}), None)
        est.estimate(group, states[:1])  # warm-up
        fresh()
        secs = timed(lambda est=est: est.estimate(group, states))
        rows.append({"setting": "synthetic", "estimator": name,
                     "protocol": "in-group", "n_states": len(states), "s_per_state": secs / len(states)})
    return rows


def start_engine(model: str, dtype: str, console):
    from sveb.core.device import pick_dtype
    from sveb.core.models import resolve
    from sveb.engines.vllm import VLLMEngine
    console.print(f"starting vLLM on {model} ({pick_dtype(dtype)}) for MCS@2")
    return VLLMEngine(resolve(model), seed=0, dtype=pick_dtype(dtype))


def bench_mcs(engine, data, n_states: int) -> tuple[float, int]:
    """Seconds per state to sample 2 continuations (MCS@2) of build states, as the build samples them."""
    from sveb.core.config import BuildConfig, derive_seed
    from sveb.engines import Request
    sampling = BuildConfig.from_manifest(data.manifest).sampling
    step = max(1, len(data.states) // n_states)
    chosen = data.states[::step][:n_states]  # spread over the build's problems
    prompts = []
    for s in chosen:
        r = data.rollouts[s["problem_id"]][s["rollout_idx"]]
        prompts.append(tuple(r["prompt_token_ids"]) + tuple(r["response_token_ids"][: s["t"]]))
    reqs = [Request(p, derive_seed("bench-mcs", s["state_id"], j)) for p, s in zip(prompts, chosen) for j in range(2)]
    engine.generate([Request(prompts[0], 12345)], sampling)  # warm-up
    return timed(lambda: engine.generate(reqs, sampling)) / len(chosen), len(chosen)


def bench_mcs_synthetic(engine, states: list[State], T: int) -> float:
    """Seconds per state for MCS@2 of the synthetic states: 2 continuations of exactly T - t tokens
    after a prompt plus t tokens (what a T-token rollout's state costs; the tokens' content does not
    change the cost)."""
    from vllm import SamplingParams

    from sveb.data_builders import number
    prompt = engine.tokenizer.encode_chat(number.prompt(number.builtin(1, 0, "test")[0]))
    filler = list(engine.tokenizer.tok.encode("Step 1: 12 + 7 = 19, so we carry 19 forward. "))
    prompts, params = [], []
    for k, st in enumerate(states):
        body = (filler * (st.t // len(filler) + 1))[: st.t]
        for j in range(2):
            prompts.append({"prompt_token_ids": list(prompt) + body})
            params.append(SamplingParams(temperature=1.0, seed=1000 * k + j, min_tokens=T - st.t,
                                         max_tokens=T - st.t, ignore_eos=True))
    engine.llm.generate(prompts[:1], SamplingParams(max_tokens=4), use_tqdm=False)  # warm-up
    return timed(lambda: engine.llm.generate(prompts, params, use_tqdm=False)) / len(states)


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 1e-3:
        return f"{x * 1e6:.1f} µs"
    return f"{x * 1e3:.2f} ms" if x < 1 else f"{x:.2f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="./sveb_data")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--domain", default="number")
    ap.add_argument("--estimators", nargs="+",
                    default=["grpo", "numca", "hista", "shear", "hidden-align", "pacs", "probe"])
    ap.add_argument("--G", type=int, default=40, help="synthetic group size")
    ap.add_argument("--T", type=int, default=1000, help="synthetic response tokens per rollout")
    ap.add_argument("--d", type=int, default=576, help="synthetic hidden size (576: the default model's)")
    ap.add_argument("--states", type=int, default=8, help="synthetic states")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mcs", action="store_true", help="also time MCS@2 sampling with vLLM (needs a build)")
    ap.add_argument("--mcs-states", type=int, default=8)
    ap.add_argument("--no-build", action="store_true", help="skip the build setting")
    args = ap.parse_args()
    console = Console()

    info, rows = (None, []) if args.no_build else bench_build(args, console)
    rows += bench_synthetic(args)
    mcs, mcs_n, mcs_syn = None, 0, None
    if args.mcs:
        manifest = info["data"].manifest if info else {"model": args.model}
        engine = start_engine(manifest["model"], manifest.get("dtype", "auto"), console)  # as the build sampled
        if info is not None:
            mcs, mcs_n = bench_mcs(engine, info["data"], args.mcs_states)
        mcs_syn = bench_mcs_synthetic(engine, synthetic(args.G, args.T, args.d, args.states, args.seed)[1], args.T)
        engine.close()
    for r in rows:
        ref = mcs_syn if r["setting"] == "synthetic" else mcs
        r["ratio_mcs2"] = r["s_per_state"] / ref if ref else None

    table = Table(title="Estimator cost (seconds per state)", caption=f"synthetic: G={args.G} T={args.T} d={args.d}")
    for col in ("setting", "estimator", "protocol", "states", "per state", "÷ MCS@2"):
        table.add_column(col, justify="right" if col in ("states", "per state", "÷ MCS@2") else "left")
    for r in rows:
        ratio = f"{r['ratio_mcs2']:.3g}" if r["ratio_mcs2"] is not None else "-"
        table.add_row(r["setting"], r["estimator"], r["protocol"], str(r["n_states"]), fmt(r["s_per_state"]), ratio)
    summary = {"rows": rows, "mcs2_s_per_state": mcs, "synthetic_mcs2_s_per_state": mcs_syn}
    if info is not None:
        summary.update(build=info["build"], n_states=info["n_states"], n_problems=info["n_problems"])
        if "hidden_s" in info:
            per_p, per_s = info["hidden_s"] / info["n_problems"], info["hidden_s"] / info["n_states"]
            cached = " (from cache)" if info["hidden_cached"] else ""
            table.add_row("build", f"hidden states{cached}", "once", str(info["n_states"]), fmt(per_s),
                          f"{per_s / mcs:.3g}" if mcs else "-")
            summary.update(hidden_s_per_problem=per_p, hidden_s_per_state=per_s, hidden_cached=info["hidden_cached"])
    if mcs is not None:
        table.add_row("build", "MCS@2 (vLLM)", "-", str(mcs_n), fmt(mcs), "1")
    if mcs_syn is not None:
        table.add_row("synthetic", "MCS@2 (vLLM, T - t tokens)", "-", str(args.states), fmt(mcs_syn), "1")
    console.print(table)
    if info is not None and "hidden_s" in info:
        console.print(f"hidden-state extraction: {fmt(summary['hidden_s_per_problem'])} per problem, "
                      f"{fmt(summary['hidden_s_per_state'])} per state (excluded from the estimator rows)")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
