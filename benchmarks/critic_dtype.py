"""The critic's training step in fp32 and in bf16 (autocast over a bf16 body) on this machine: why a CPU with
native bf16 trains ppo's critics and pacs's scorer in bf16 (sveb.lm.value_model.default_dtype; docs/timings.md).

    python benchmarks/critic_dtype.py                  # the default model, 8 rollouts of 220 tokens, 5 steps
    python benchmarks/critic_dtype.py --model DIR --tokens 400 --steps 3

Prints, per dtype, the seconds of one optimizer step of ppo's critic (the top `train_layers` layers forward and
backward on features computed beforehand, as the shared pass hands them over) and of one fp32 vs bf16 product
through the LM head (pacs keeps its head in fp32: a log-ratio's small differences), with the CPU flags."""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--rollouts", type=int, default=8)
    p.add_argument("--tokens", type=int, default=220)
    p.add_argument("--steps", type=int, default=5)
    a = p.parse_args(argv)
    import numpy as np
    import torch

    from sveb.core.device import cpu_flags
    from sveb.core.models import resolve
    from sveb.lm.critic import Critic, CriticConfig, make_seq
    path = resolve(a.model)
    rng = np.random.default_rng(0)
    flags = " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")))) or "no avx512/amx"
    print(f"CPU flags: {flags}; torch threads {torch.get_num_threads()}")
    took = {}
    for dtype in ("float32", "bfloat16"):
        critic = Critic(CriticConfig(model=path, batch=a.rollouts), path, device="cpu", dtype=dtype)
        vocab = critic.vocab
        seqs = [make_seq(("b", "p", i), rng.integers(0, vocab, 40).tolist(), rng.integers(0, vocab, a.tokens).tolist(),
                         float(i % 2)) for i in range(a.rollouts)]
        critic.features(seqs)  # the frozen part, as the shared pass would hand it over: not timed
        opt = torch.optim.AdamW(critic.model.trainable().parameters(), lr=1e-4)
        critic._backward(seqs)  # warm-up
        t0 = time.perf_counter()
        for _ in range(a.steps):
            opt.zero_grad(set_to_none=True)
            critic._backward(seqs)
            opt.step()
        took[dtype] = (time.perf_counter() - t0) / a.steps
        print(f"critic step ({a.rollouts} rollouts x {a.tokens + 40} tokens), {dtype}: {took[dtype]:.3f} s")
    print(f"bf16 / fp32 critic step: {took['bfloat16'] / took['float32']:.2f}")
    from sveb.estimators.probe_features import lm_head_weight
    W = torch.from_numpy(lm_head_weight(path)).float()
    rows = torch.randn(2048, W.shape[1])
    for name, ctx in (("float32", torch.autocast("cpu", enabled=False)),
                      ("bfloat16", torch.autocast("cpu", dtype=torch.bfloat16))):
        with ctx:
            torch.nn.functional.linear(rows, W)
            t0 = time.perf_counter()
            for _ in range(a.steps):
                torch.log_softmax(torch.nn.functional.linear(rows, W).float(), -1)
        took[name + " head"] = (time.perf_counter() - t0) / a.steps
        print(f"LM head + log_softmax, 2048 rows, {name}: {took[name + ' head']:.3f} s")
    print(f"bf16 / fp32 head: {took['bfloat16 head'] / took['float32 head']:.2f}")


if __name__ == "__main__":
    main()
