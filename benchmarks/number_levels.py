"""Accuracy spread of a model on the builtin number levels (used to tune the level mix).

    python benchmarks/number_levels.py --problems 8 --samples 16 [--engine vllm]

Prints, per level: mean accuracy, the share of problems with accuracy in [0.1, 0.8], and the mean
count of distinct numbers in correct responses found neither in the question nor the answer.
"""

from __future__ import annotations

import argparse
import random
import re
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--levels", default="")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--system", default=None, help="Try another system prompt.")
    args = ap.parse_args()

    from sveb.core.config import SamplingConfig, derive_seed
    from sveb.core.models import resolve
    from sveb.data_builders import make_problem, number
    from sveb.engines import Request, make_engine
    from sveb.rewards import reward

    if args.system is not None:
        number.SYSTEM = args.system
    levels = [int(x) for x in args.levels.split(",")] if args.levels else list(number.LEVELS)
    engine = make_engine(args.engine, resolve(args.model))
    rng = random.Random(0)
    probs = []
    for level in levels:
        for _ in range(args.problems):
            q, a, inter = number.generate(level, rng)
            probs.append(make_problem("number", "builtin", q, str(a), "math", meta={"level": level}))
    reqs = [Request(tuple(engine.tokenizer.encode_chat(number.prompt(p))), derive_seed("lv", i, j))
            for i, p in enumerate(probs) for j in range(args.samples)]
    t0 = time.time()
    outs = engine.generate(reqs, SamplingConfig(max_tokens=args.max_tokens), desc="survey")
    secs = time.time() - t0
    ntok = sum(len(o.token_ids) for o in outs)
    texts = [engine.tokenizer.decode(o.token_ids) for o in outs]
    print(f"{len(outs)} responses, {ntok} tokens in {secs:.0f}s ({ntok / secs:.0f} tok/s)")
    print("level  mean_acc  in[0.1,0.8]  novel_numbers_in_correct")
    for level in levels:
        accs, novel = [], []
        for i, p in enumerate(probs):
            if p["meta"] != f'{{"level": {level}}}':
                continue
            rs = [reward(texts[i * args.samples + j], p) for j in range(args.samples)]
            accs.append(np.mean(rs))
            known = set(re.findall(r"\d+", p["question"])) | {p["answer"]}
            for j, r in enumerate(rs):
                if r:
                    novel.append(len(set(re.findall(r"\d+", texts[i * args.samples + j])) - known))
        accs = np.array(accs)
        print(f"{level:5d}  {accs.mean():8.2f}  {np.mean((accs >= 0.1) & (accs <= 0.8)):11.2f}  "
              f"{np.mean(novel) if novel else float('nan'):8.1f}")


if __name__ == "__main__":
    main()
