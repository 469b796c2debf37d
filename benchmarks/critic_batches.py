"""A critic's training step on a real build: each random micro-batch run in parts of similar length (the
default since 2026-11-26) against the whole micro-batch padded to its longest rollout, in turns A B A B on the
same steps; prints seconds per epoch-slice, the ratio, and the largest difference of the gradients.

    python benchmarks/critic_batches.py --build results/table4/exports/general-seed1 --problems 6
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
from sveb.core.models import resolve  # noqa: E402
from sveb.lm import hidden_pass  # noqa: E402
from sveb.lm.critic import Critic, CriticConfig, make_seq  # noqa: E402
from sveb.lm.device import cpu_flags  # noqa: E402
from sveb.lm.hidden import SharedFeatures  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8, help="rollouts per micro-batch (the critics' default)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    bdir = Path(args.build)
    manifest = store.read_manifest(bdir)
    rows = store.read_table(bdir / "rollouts").to_pylist()
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(r["problem_id"], []).append(r)
    pids = sorted(groups)[: args.problems]
    model = resolve(manifest["model"])
    shared = SharedFeatures(manifest["model"], -3)
    shared.add("b", Path(tempfile.mkdtemp()), {pid: groups[pid] for pid in pids})
    seqs = [make_seq(("b", pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], r["reward"])
            for pid in pids for r in groups[pid] if r["response_token_ids"]]
    critic = Critic(CriticConfig(model=manifest["model"], train_layers=2), model, device="cpu")
    critic.use_features(shared)
    critic.features(seqs)  # the shared pass, paid once, not timed
    order = np.random.default_rng(0).permutation(len(seqs))
    steps = [[seqs[j] for j in order[a:a + args.batch]] for a in range(0, len(seqs), args.batch)]
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx"))) or ["avx2 only"]
    print(f"{manifest['domain']}: {len(seqs)} rollouts in {len(steps)} micro-batches of {args.batch}; "
          f"{torch.get_num_threads()} threads; CPU flags: {' '.join(flags)}", flush=True)
    seconds: dict[str, list[float]] = {"parts": [], "padded": []}
    grads = {}
    for _ in range(args.repeats):
        for name, call in (("parts", 32), ("padded", 10**9)):
            hidden_pass.CALL_TOKENS["cpu"] = call
            t0 = time.perf_counter()
            critic.model.zero_grad(set_to_none=True)
            for step in steps:
                critic._loss_sum(step).backward()
            seconds[name].append(time.perf_counter() - t0)
            grads[name] = [p.grad.clone() for p in critic.model.trainable().parameters() if p.grad is not None]
            print(f"  {name}: {seconds[name][-1]:.1f} s", flush=True)
    diff = max(float((a - b).abs().max()) for a, b in zip(grads["parts"], grads["padded"]))
    scale = max(float(b.abs().max()) for b in grads["padded"])
    a, b = np.median(seconds["parts"]), np.median(seconds["padded"])
    print(f"median: parts {a:.1f} s, padded {b:.1f} s: {b / a:.2f}x; largest gradient difference {diff:.2e} "
          f"(largest gradient entry {scale:.2e})")


if __name__ == "__main__":
    main()
