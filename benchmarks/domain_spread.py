"""Accuracy spread of a model on each domain's builtin source (the difficulty filter's raw material).

    python benchmarks/domain_spread.py [--domains "math science general programming"] [--problems 8 --samples 16]

Prints, per domain: mean accuracy, quartiles of per-problem accuracy, and the share of problems inside
[0.1, 0.8]. One vLLM engine serves every domain; rewards are the pipeline's own.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--domains", default="number math science general programming")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()

    from sveb.core.config import SamplingConfig, derive_seed
    from sveb.core.models import resolve
    from sveb.data_builders import domain_module
    from sveb.data_builders.load import load_problems
    from sveb.engines import Request, make_engine
    from sveb.sample.jobs import rewards as _rewards

    engine = make_engine(args.engine, resolve(args.model))
    rows = []
    for domain in args.domains.split():
        problems, _ = load_problems(domain, "builtin", args.problems, 0, "test")
        mod = domain_module(domain)
        reqs = [Request(tuple(engine.tokenizer.encode_chat(mod.prompt(p))), derive_seed("spread", domain, i, j))
                for i, p in enumerate(problems) for j in range(args.samples)]
        t0 = time.time()
        outs = engine.generate(reqs, SamplingConfig(max_tokens=args.max_tokens), desc=domain)
        texts = [engine.tokenizer.decode(o.token_ids) for o in outs]
        rewards = _rewards(texts, [p for p in problems for _ in range(args.samples)], workers=4)
        acc = np.array(rewards).reshape(len(problems), args.samples).mean(1)
        q = np.quantile(acc, [0.25, 0.5, 0.75])
        rows.append((domain, acc.mean(), q, np.mean((acc >= 0.1) & (acc <= 0.8)), time.time() - t0))
    print("domain        mean_acc  quartiles            in[0.1,0.8]  seconds")
    for d, m, q, share, s in rows:
        print(f"{d:12s}  {m:8.2f}  {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f}   {share:10.2f}  {s:7.0f}")


if __name__ == "__main__":
    main()
