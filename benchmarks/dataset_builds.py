"""A small real build on each named dataset with one shared engine (issue 11's table).

    python benchmarks/dataset_builds.py [--data ../shared/datasets] [--root /tmp/sveb_datasets] [--problems 2]

Runs `sveb build`'s own pipeline on gsm8k, math500, humaneval, mbpp, arc-challenge and mmlu-stem (read in
place), then prints per dataset: rows loaded, candidates rolled out, problems kept, the default model's mean
accuracy on the candidates' screening rollouts, the share of candidates inside the difficulty band, states,
and seconds. One vLLM engine serves every dataset.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

DATASETS = {  # name: (domain, file under --data)
    "gsm8k": ("math", "gsm8k/test.jsonl"),
    "math500": ("math", "math500/test.jsonl"),
    "humaneval": ("programming", "humaneval/HumanEval.jsonl.gz"),
    "mbpp": ("programming", "mbpp/mbpp.jsonl"),
    "arc-challenge": ("science", "arc_challenge/test.jsonl"),
    "mmlu-stem": ("science", "mmlu_stem/test.jsonl"),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "datasets"))
    ap.add_argument("--root", default="/tmp/sveb_datasets")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--problems", type=int, default=2)
    ap.add_argument("--oversample", type=int, default=4)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=384)
    ap.add_argument("--only", default="", help="comma-separated subset of the datasets")
    args = ap.parse_args()

    from rich.console import Console

    from sveb import store
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.core.models import resolve
    from sveb.data_builders.load import scan
    from sveb.engines import make_engine
    from sveb.sample.pipeline import build, dtype_of, locate

    console = Console(stderr=True)
    names = [n for n in DATASETS if not args.only or n in args.only.split(",")]
    engine, rows = None, []
    for name in names:
        domain, rel = DATASETS[name]
        source = f"{name}={Path(args.data) / rel}"
        cfg = BuildConfig(domain=domain, model=args.model, source=source, problems=args.problems,
                          oversample=args.oversample, rollouts=args.rollouts, states_per_problem=1, mc=4, mc_extra=0,
                          screen=args.rollouts, sampling=SamplingConfig(max_tokens=args.max_tokens))
        bdir = locate(cfg, args.root)
        done = (bdir / "manifest.json").exists() and store.read_manifest(bdir).get("status") == "complete"
        if engine is None and not done:  # one engine for every dataset, started only if one needs sampling
            engine = make_engine("vllm", resolve(cfg.model), cfg.seed, dtype=dtype_of(cfg))
        t0 = time.time()
        bdir = build(cfg, args.root, engine=engine, console=console)
        m = store.read_manifest(bdir)
        acc = list(m["candidate_accuracy"].values())
        band = sum(cfg.min_acc <= a <= cfg.max_acc for a in acc) / len(acc)
        rows.append((name, len(scan(domain, source).problems), len(acc), m["n_problems"], sum(acc) / len(acc), band,
                     m["n_states"], m["truncated"]["rollouts"], m.get("seconds", time.time() - t0)))
    if engine is not None and hasattr(engine, "close"):
        engine.close()
    print("| dataset | rows loaded | candidates rolled out | kept | default-model accuracy | share in [0.1, 0.8] "
          "| states | rollouts cut off | seconds |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for name, loaded, cand, kept, acc, band, states, cut, secs in rows:
        cut = "-" if cut is None else f"{cut:.0%}"  # no kept problem: no rollout of the benchmark
        print(f"| {name} | {loaded} | {cand} | {kept} | {acc:.2f} | {band:.2f} | {states} | {cut} | {secs:.0f} |")


if __name__ == "__main__":
    main()
