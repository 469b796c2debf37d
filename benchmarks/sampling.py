"""Sampling throughput: the pipeline's engine layer vs a bare vLLM call, and prefix caching on vs off.

    python benchmarks/sampling.py [--problems 8 --samples 20 --max-tokens 128]
    python benchmarks/sampling.py --build sveb_data/smollm2-135m/number/<fp>   # MCS on a build's own states

Prints generated tokens/s for: (1) bare `vllm.LLM.generate` with n samples per prompt (one request,
SamplingParams(n=...)), (2) the pipeline's engine layer (one seeded request per sample, as the build
does), their ratio; then (3) MCS-style continuations of states (prompt + t response ids) with prefix
caching on vs off (a fresh engine each, same requests). With --build, only (3), on that build's
states exactly as its reference stage samples them (prompt + t response ids, --samples continuations
each with the remaining max_tokens - t budget).
"""

from __future__ import annotations

import argparse
import gc
import time


def tokens_per_s(fn) -> tuple[float, int, float]:
    t0 = time.time()
    n = fn()
    s = time.time() - t0
    return n / s, n, s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--states", type=int, default=8)
    ap.add_argument("--build", default="", help="time MCS continuations of this build's states only")
    args = ap.parse_args()
    if args.build:
        return mcs_on_build(args)

    from vllm import SamplingParams

    from sveb.core.config import SamplingConfig, derive_seed
    from sveb.core.models import resolve
    from sveb.data_builders import number
    from sveb.engines import Request
    from sveb.engines.vllm import VLLMEngine

    path = resolve(args.model)
    probs = number.builtin(args.problems, 0, "test")
    sc = SamplingConfig(max_tokens=args.max_tokens)

    t0 = time.time()
    eng = VLLMEngine(path, seed=0)
    print(f"engine start: {time.time() - t0:.0f}s")
    prompts = [eng.tokenizer.encode_chat(number.prompt(p)) for p in probs]
    eng.generate([Request(tuple(prompts[0]), 1)], sc)  # warm-up

    def bare():
        outs = eng.llm.generate([{"prompt_token_ids": p} for p in prompts],
                                SamplingParams(n=args.samples, temperature=sc.temperature, max_tokens=sc.max_tokens),
                                use_tqdm=False)
        return sum(len(c.token_ids) for o in outs for c in o.outputs)

    def layer():
        reqs = [Request(tuple(p), derive_seed(i, j)) for i, p in enumerate(prompts) for j in range(args.samples)]
        return sum(len(c.token_ids) for c in eng.generate(reqs, sc))

    b, bn, bs = tokens_per_s(bare)
    lay, ln, ls = tokens_per_s(layer)
    print(f"rollouts, bare vllm (n={args.samples} per prompt): {b:7.1f} tok/s ({bn} tokens, {bs:.0f}s)")
    print(f"rollouts, pipeline engine layer (seeded requests): {lay:7.1f} tok/s ({ln} tokens, {ls:.0f}s)")
    print(f"ratio layer / bare: {lay / b:.2f}")

    # states: first half of a rollout's response, continued samples times
    outs = eng.generate([Request(tuple(p), 7) for p in prompts], sc)
    states = [tuple(p) + o.token_ids[: max(1, len(o.token_ids) // 2)] for p, o in zip(prompts, outs)][: args.states]
    reqs = [Request(s, derive_seed("mc", i, j)) for i, s in enumerate(states) for j in range(args.samples)]
    on, onn, ons = tokens_per_s(lambda: sum(len(c.token_ids) for c in eng.generate(reqs, sc)))
    del eng
    gc.collect()
    eng = VLLMEngine(path, seed=0, prefix_caching=False)
    eng.generate([Request(tuple(prompts[0]), 1)], sc)
    off, offn, offs = tokens_per_s(lambda: sum(len(c.token_ids) for c in eng.generate(reqs, sc)))
    print(f"MCS continuations, prefix caching on:  {on:7.1f} tok/s ({onn} tokens, {ons:.0f}s)")
    print(f"MCS continuations, prefix caching off: {off:7.1f} tok/s ({offn} tokens, {offs:.0f}s)")
    print(f"ratio on / off: {on / off:.2f}")


def mcs_on_build(args) -> None:
    """Prefix caching on vs off for the reference stage's own requests on a build."""
    from pathlib import Path

    from sveb.core.config import BuildConfig, derive_seed
    from sveb.core.device import pick_dtype
    from sveb.core.models import resolve
    from sveb.engines import Request
    from sveb.engines.vllm import VLLMEngine
    from sveb.store.builds import load_build
    data = load_build(Path(args.build))
    sc = BuildConfig.from_manifest(data.manifest).sampling
    reqs, prefix = [], 0
    for s in data.states:
        r = data.rollouts[s["problem_id"]][s["rollout_idx"]]
        ids = tuple(r["prompt_token_ids"]) + tuple(r["response_token_ids"][: s["t"]])
        prefix += len(ids)
        reqs += [Request(ids, derive_seed("bench", s["state_id"], j), max_tokens=sc.max_tokens - s["t"])
                 for j in range(args.samples)]
    print(f"{len(data.states)} states x {args.samples} continuations; "
          f"mean prefix {prefix / len(data.states):.0f} tokens")
    res = {}
    for caching in (True, False):
        eng = VLLMEngine(resolve(data.manifest["model"]), seed=0, prefix_caching=caching,
                         dtype=pick_dtype(data.manifest.get("dtype", "auto")))  # the build's own dtype
        eng.generate([reqs[0]], sc)  # warm-up
        res[caching] = tokens_per_s(lambda eng=eng: sum(len(c.token_ids) for c in eng.generate(reqs, sc)))
        eng.close()
        gc.collect()
        t, n, secs = res[caching]
        print(f"prefix caching {'on ' if caching else 'off'}: {secs:6.1f} s, {t:6.1f} generated tok/s ({n} tokens)",
              flush=True)
    print(f"time off / on: {res[False][2] / res[True][2]:.2f}")


if __name__ == "__main__":
    main()
