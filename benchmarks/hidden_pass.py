"""The shared hidden-state pass on a real build: a group's prompt passed once and its responses in batches
that pad little (sveb.lm.hidden_pass, the default) against the pass before 2026-11-26 (every rollout's prompt
+ response, right-padded, batched by the token budget alone), in turns A B A B on the same problems; prints
seconds, the ratio and the largest difference between the two outputs.

    python benchmarks/hidden_pass.py --build results/table4/exports/general-seed1 --problems 6
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sveb import store  # noqa: E402
from sveb.lm.device import cpu_flags  # noqa: E402
from sveb.lm import hidden_pass  # noqa: E402
from sveb.lm.hidden import SHARED_FULL, SHARED_RESP, HiddenStates, from_store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="a build or export folder (its rollouts table)")
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    args = ap.parse_args()
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    bdir = Path(args.build)
    manifest = store.read_manifest(bdir)
    rows = store.read_table(bdir / "rollouts").to_pylist()
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["problem_id"], []).append(r)
    pids = sorted(groups)[: args.problems]
    hs = HiddenStates(Path(tempfile.mkdtemp()), manifest["model"])
    taps = ([SHARED_RESP], list(SHARED_FULL))  # what the first consumer of a build pays for
    plain = {pid: [{**r, "prompt_token_ids": [], "response_token_ids": list(r["prompt_token_ids"])
                    + list(r["response_token_ids"])} for r in groups[pid]] for pid in pids}
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx"))) or ["avx2 only"]
    n_tok = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for pid in pids for r in groups[pid])
    print(f"{manifest['domain']}: {len(pids)} problems, {sum(len(groups[p]) for p in pids)} rollouts, {n_tok} tokens; "
          f"dtype {hs.dtype}; {__import__('torch').get_num_threads()} threads; CPU flags: {' '.join(flags)}", flush=True)
    hs._load_model()
    seconds: dict[str, list[float]] = {"shared": [], "plain": []}
    outs = {}
    for _ in range(args.repeats):
        for name in ("shared", "plain"):
            # the old batching: as few batches as the budget allows, whatever they pad
            hidden_pass.CALL_TOKENS["cpu"] = 32 if name == "shared" else 10**9
            t0 = time.perf_counter()
            outs[name] = {pid: hs._forward(groups[pid] if name == "shared" else plain[pid], *taps) for pid in pids}
            seconds[name].append(time.perf_counter() - t0)
            print(f"  {name}: {seconds[name][-1]:.1f} s", flush=True)
    worst = 0.0
    for pid in pids:
        for r in groups[pid]:
            i, p = r["rollout_idx"], len(r["prompt_token_ids"])
            a = from_store(outs["shared"][pid][("resp", SHARED_RESP)][i])
            b = from_store(outs["plain"][pid][("resp", SHARED_RESP)][i])[p:]
            if a.size:
                worst = max(worst, float(np.abs(a - b).max()))
    s, pl = np.median(seconds["shared"]), np.median(seconds["plain"])
    print(f"median: shared prompt {s:.1f} s, plain {pl:.1f} s: {pl / s:.2f}x; "
          f"largest difference of the last layer's response states: {worst:.2e}")


if __name__ == "__main__":
    main()
