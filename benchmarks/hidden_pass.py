"""The shared hidden-state pass on a real build: a group's prompt passed once and its responses in batches
that pad little (sveb.lm.hidden_pass, the default) against the pass before 2026-11-26 (every rollout's prompt
+ response, right-padded, batched by the token budget alone), in turns A B A B on the same problems; prints
seconds, the ratio and the largest difference between the two outputs.
--what critic: a critic's training steps the same way: each random micro-batch run in parts of similar
length (the default since 2026-11-26) against the micro-batch padded to its longest rollout.

    python benchmarks/hidden_pass.py --build results/table4/exports/general-seed1 --problems 6
    python benchmarks/hidden_pass.py --what critic --build results/table4/exports/general-seed1 --problems 6
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sveb.core.device import cpu_flags  # noqa: E402
from sveb.core.models import resolve  # noqa: E402
from sveb.lm import hidden_pass  # noqa: E402
from sveb.lm.critic import Critic, CriticConfig, make_seq  # noqa: E402
from sveb.lm.hidden import SHARED_FULL, SHARED_RESP, HiddenStates, SharedFeatures, from_store  # noqa: E402
from sveb.store.builds import load_build  # noqa: E402

FLAGS = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")))) or "avx2 only"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", choices=["pass", "critic"], default="pass")
    ap.add_argument("--build", required=True, help="a build or export folder (its rollouts table)")
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    ap.add_argument("--batch", type=int, default=8, help="--what critic: rollouts per micro-batch (the default's)")
    args = ap.parse_args()
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    data = load_build(Path(args.build), references=False)
    groups = data.rollouts
    pids = sorted(groups)[: args.problems]
    (critic if args.what == "critic" else shared_pass)(data.manifest, groups, pids, args)


def shared_pass(manifest: dict, groups: dict, pids: list[str], args) -> None:
    hs = HiddenStates(Path(tempfile.mkdtemp()), manifest["model"])
    taps = ([SHARED_RESP], list(SHARED_FULL))  # what the first consumer of a build pays for
    plain = {pid: [{**r, "prompt_token_ids": [], "response_token_ids": list(r["prompt_token_ids"])
                    + list(r["response_token_ids"])} for r in groups[pid]] for pid in pids}
    n_tok = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for pid in pids for r in groups[pid])
    print(f"{manifest['domain']}: {len(pids)} problems, {sum(len(groups[p]) for p in pids)} rollouts, {n_tok} tokens;\n"
          f"  dtype {hs.dtype}; {__import__('torch').get_num_threads()} threads; CPU flags: {FLAGS}", flush=True)
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
    print(f"median: shared prompt {s:.1f} s, plain {pl:.1f} s: {pl / s:.2f}x;\n"
          f"  largest difference of the last layer's response states: {worst:.2e}")


def critic(manifest: dict, groups: dict, pids: list[str], args) -> None:
    import torch
    model = resolve(manifest["model"])
    shared = SharedFeatures(manifest["model"], -3)
    shared.add("b", Path(tempfile.mkdtemp()), {pid: groups[pid] for pid in pids})
    seqs = [make_seq(("b", pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], r["reward"])
            for pid in pids for r in groups[pid] if r["response_token_ids"]]
    value = Critic(CriticConfig(model=manifest["model"], train_layers=2), model, device="cpu")
    value.use_features(shared)
    value.features(seqs)  # the shared pass, paid once, not timed
    order = np.random.default_rng(0).permutation(len(seqs))
    steps = [[seqs[j] for j in order[a:a + args.batch]] for a in range(0, len(seqs), args.batch)]
    print(f"{manifest['domain']}: {len(seqs)} rollouts in {len(steps)} micro-batches of {args.batch};\n"
          f"  {torch.get_num_threads()} threads; CPU flags: {FLAGS}", flush=True)
    seconds: dict[str, list[float]] = {"parts": [], "padded": []}
    grads = {}
    for _ in range(args.repeats):
        for name, call in (("parts", 32), ("padded", 10**9)):
            hidden_pass.CALL_TOKENS["cpu"] = call
            t0 = time.perf_counter()
            value.model.zero_grad(set_to_none=True)
            for step in steps:
                value._loss_sum(step).backward()
            seconds[name].append(time.perf_counter() - t0)
            grads[name] = [p.grad.clone() for p in value.model.trainable().parameters() if p.grad is not None]
            print(f"  {name}: {seconds[name][-1]:.1f} s", flush=True)
    diff = max(float((a - b).abs().max()) for a, b in zip(grads["parts"], grads["padded"]))
    scale = max(float(b.abs().max()) for b in grads["padded"])
    a, b = np.median(seconds["parts"]), np.median(seconds["padded"])
    print(f"median: parts {a:.1f} s, padded {b:.1f} s: {b / a:.2f}x;\n"
          f"  largest gradient difference {diff:.2e} (largest gradient entry {scale:.2e})")


if __name__ == "__main__":
    main()
