"""What one RL step of the validity pilot (issue 59) costs here, on the real default model, per part: sampling
(G x problems rollouts through the hf engine), the baseline (grpo, and mcs-k's fresh continuations on a few
problems, scaled), the update (per train-layers setting, timed on a subset of the rollouts, scaled), a held-out
evaluation, and a weight reload (hf: none, the engine's model is the policy; vLLM: writing the weights, whose
restart is docs/timings.md's figure).

    python benchmarks/rl_cost.py --dtype float32 --dtype bfloat16 --json results/validity/cost.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import numpy as np


class Clock:
    """Wall seconds and this process's CPU seconds of a block: under contention (other jobs on the cores) the
    wall time is the machine's state, the CPU time (at one thread) the work's own cost."""

    def __enter__(self):
        self.w, self.c = time.time(), time.process_time()
        return self

    def __init__(self, what: str = ""):
        self.what = what

    def __exit__(self, *exc):
        self.wall, self.cpu = time.time() - self.w, time.process_time() - self.c
        if self.what:  # a line per part as it ends: a contended run is long
            print(f"  {self.what}: {self.wall:.1f} s wall, {self.cpu:.1f} s CPU", flush=True)


def one(dtype: str, args) -> dict:
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    from sveb.experiment.rl.baselines import Baseline
    from sveb.experiment.rl.loop import RLConfig, advantages, held_out_accuracy, pick, rollouts
    from sveb.experiment.rl.policy import hf_policy, number_pools
    from sveb.lm.policy_update import PolicyUpdate, Sample
    cfg = RLConfig(problems=args.problems, rollouts=args.rollouts, max_tokens=args.max_tokens, dtype=dtype,
                   eval_problems=args.eval_problems, seed=0)
    engine, model = hf_policy(cfg.model, dtype, batch_size=args.batch)
    train, held = number_pools(256, max(args.eval_problems, 1))
    held = held[:args.eval_problems]
    res = {"dtype": dtype, "threads": torch.get_num_threads(), "problems": cfg.problems, "G": cfg.rollouts,
           "max_tokens": cfg.max_tokens}
    with Clock("sampling") as c, torch.no_grad():
        groups = rollouts(engine, cfg, 1, pick(cfg, 1, train))
    res["sample_s"], res["sample_cpu_s"] = c.wall, c.cpu
    toks = [len(r.response_token_ids) for g in groups for r in g.rollouts]
    res["response_tokens"] = int(sum(toks))
    res["prompt_tokens"] = int(sum(len(r.prompt_token_ids) for g in groups for r in g.rollouts))
    res["reward"] = float(np.mean([r.reward for g in groups for r in g.rollouts]))
    res["sample_tok_per_cpu_s"] = res["response_tokens"] / res["sample_cpu_s"]
    with Clock("grpo baseline") as c:
        adv = advantages(engine, cfg, 1, groups, Baseline("grpo"))
    res["baseline_grpo_s"] = c.wall
    k = args.mcs
    if k:
        few = groups[:args.mcs_problems]
        with Clock(f"mcs-{k} baseline on {len(few)} problem(s)") as c, torch.no_grad():
            advantages(engine, dataclasses.replace(cfg, baseline=f"mcs-{k}"), 1, few, Baseline(f"mcs-{k}"))
        scale = len(groups) / len(few)  # scaled to every problem
        res[f"baseline_mcs{k}_s"], res[f"baseline_mcs{k}_cpu_s"] = c.wall * scale, c.cpu * scale
    samples = [Sample(r.prompt_token_ids, r.response_token_ids, a) for _, r, a in adv]
    nonzero = [s for s in samples if np.any(s.advantages)]
    res["rollouts_with_signal"] = len(nonzero)
    sub = (nonzero or samples)[:args.update_rollouts]
    for layers in args.train_layers:
        upd = PolicyUpdate(model, layers, lr=0.0, scale=cfg.max_tokens, amp="bfloat16" if dtype == "bfloat16" else None)
        n_tok = sum(len(s.prompt) + len(s.response) for s in sub)
        with Clock(f"update, {layers} layers, {len(sub)} rollouts") as c:
            upd.step(sub)
        res[f"update_L{layers}_tok_per_cpu_s"] = n_tok / c.cpu
        res[f"update_L{layers}_cpu_s_per_rollout"] = c.cpu / len(sub)
        res[f"update_L{layers}_s_per_rollout"] = c.wall / len(sub)
        del upd
    with tempfile.TemporaryDirectory() as d:  # what a vLLM reload would write first
        with Clock("save weights") as c:
            model.save_pretrained(d)
        res["save_weights_s"] = c.wall
    if held:
        with Clock("held-out evaluation") as c, torch.no_grad():
            res["held_out_acc"] = held_out_accuracy(engine, cfg, held)
        res["eval_s"], res["eval_cpu_s"] = c.wall, c.cpu
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", action="append", help="float32 / bfloat16 (repeatable; default both)")
    ap.add_argument("--problems", type=int, default=8)
    ap.add_argument("--rollouts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8, help="hf engine batch size (sveb rl's default)")
    ap.add_argument("--train-layers", type=int, action="append", help="repeatable; default 0 (all), 2, 4")
    ap.add_argument("--update-rollouts", type=int, default=8, help="rollouts the update is timed on")
    ap.add_argument("--mcs", type=int, default=4, help="k of the mcs-k baseline timed (0: skip)")
    ap.add_argument("--mcs-problems", type=int, default=1, help="problems mcs-k is timed on (scaled to all)")
    ap.add_argument("--eval-problems", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: under contention 2 threads spin on each other; 0: torch's default)")
    ap.add_argument("--json", type=Path, help="append the results here")
    args = ap.parse_args()
    args.train_layers = args.train_layers or [0, 2, 4]
    from sveb.core.device import describe
    print(f"CPU: {describe()}")
    out = []
    for dtype in args.dtype or ["float32", "bfloat16"]:
        r = one(dtype, args)
        out.append(r)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        old = json.loads(args.json.read_text()) if args.json.exists() else []
        args.json.write_text(json.dumps(old + [{"cpu": describe(), **r} for r in out], indent=1))


if __name__ == "__main__":
    main()
