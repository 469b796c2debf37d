"""The first GPU contact, scripted: SVEB's GPU paths at a real model's shape, with torch and transformers
only (no vLLM, no hub, no network). A random-init model at Qwen2.5-3B's shape is built on the device in
its dtype; then the hidden-state pass over 40 rollouts of ~4k tokens (one problem group), a critic fit and
its checkpoint reuse, and pacs's training and prefix scoring. For each: device, dtype, finiteness,
seconds, peak GPU memory and peak host RSS. Exit status 1 if any output is not finite or a step fails.

    python tests/gpu_smoke.py                                   # a CUDA machine: 3B shape, bf16
    python tests/gpu_smoke.py --device cpu --shape tiny --rollouts 4 --tokens 96   # what the test runs
    python tests/gpu_smoke.py --vllm /path/to/small-model       # + two vLLM runs compared (GPU with vLLM)
    python tests/gpu_smoke.py --sizes 40,160,640 --json out.json  # growth with the rollouts (tests/gpu_scale.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

SHAPES = {  # Qwen2.5-3B-Instruct's config.json, and a tiny one for CPU tests
    "qwen2.5-3b": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                       num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=512, tie_word_embeddings=True),
}


def make_model(shape: str, dtype: str, path: Path, device: str) -> str:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.manual_seed(0)
    cfg = Qwen2Config(max_position_embeddings=32768, rope_theta=1e6, **SHAPES[shape])
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(getattr(torch, dtype))
    model.save_pretrained(path)
    del model
    return str(path)


def make_rollouts(n: int, tokens: int, vocab: int, seed: int = 0) -> list[dict]:
    import numpy as np
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, vocab, max(4, tokens // 16)).tolist()  # one problem group: one prompt
    return [{"rollout_idx": i, "prompt_token_ids": prompt,
             "response_token_ids": rng.integers(1, vocab,
                                                int(tokens - len(prompt) - rng.integers(0, tokens // 8 + 1))).tolist(),
             "reward": float(i % 2)} for i in range(n)]


class Step:
    """Times a step and records its device, dtype, finiteness and peak memory."""

    def __init__(self, name: str, device: str, dtype: str, results: list):
        self.row = {"step": name, "device": device, "dtype": dtype}
        self.results, self.device = results, device

    def __enter__(self):
        import torch
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.t0 = time.perf_counter()
        return self.row

    def __exit__(self, kind, err, tb):
        import torch
        if self.device == "cuda":
            torch.cuda.synchronize()
            self.row["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        self.row["seconds"] = round(time.perf_counter() - self.t0, 2)
        self.row["peak_host_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
        if err is not None:
            self.row.update(finite=False, error=f"{kind.__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        self.results.append(self.row)
        print(json.dumps(self.row), flush=True)
        return True  # the next steps still run; the exit status says it failed


def finite(arrays) -> bool:
    import numpy as np
    return all(bool(np.all(np.isfinite(np.asarray(a)))) for a in arrays)


def run(args) -> list[dict]:
    os.environ["SVEB_DEVICE"] = args.device  # read by sveb.core.device: every component on this device
    import torch

    from sveb.core.device import device, empty_cache
    from sveb.estimators.pacs import PacsConfig, PacsScorer, make_pseq
    from sveb.lm.critic import Critic, CriticConfig, make_seq
    from sveb.lm.hidden import HiddenStates, SharedFeatures, from_store
    dev = device()
    print(f"device: {dev.describe()}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
          f"{torch.cuda.get_device_name(0) if dev.torch == 'cuda' else 'cpu'}", flush=True)
    if dev.torch != args.device:
        raise SystemExit(f"asked for {args.device}, sveb.core.device decided {dev.torch}")
    dtype, results = args.dtype, []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        with Step("build random-init model", args.device, dtype, results) as row:
            path = make_model(args.shape, dtype, tmp / "model", args.device)
            row["finite"] = True
        rows = make_rollouts(args.rollouts, args.tokens, SHAPES[args.shape]["vocab_size"])
        bdir, bfp, pid = tmp / "build", "smoke", "p0"
        with Step("hidden-state pass (resp + critic input, one group)", args.device, dtype, results) as row:
            hs = HiddenStates(bdir, path, layer=-1, dtype=dtype)
            arrays = hs.group(pid, rows)
            row["finite"] = finite(arrays.values())
            row["tokens"] = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for r in rows)
            # the shared-prompt pass against a plain pass over prompt + response (two rollouts, same dtype)
            flat = [{**r, "prompt_token_ids": [], "response_token_ids": r["prompt_token_ids"]
                     + r["response_token_ids"]} for r in rows[:2]]
            plain = {i: from_store(a) for i, a in hs._forward(flat, [-1], [])[("resp", -1)].items()}
            row["shared_vs_plain_max_abs"] = max(float(abs(plain[r["rollout_idx"]][len(r["prompt_token_ids"]):]
                                                        - arrays[r["rollout_idx"]]).max()) for r in rows[:2])
            # the noise floor of the dtype: the same plain pass with another batch shape (alone vs padded in two)
            first = rows[0]["rollout_idx"]
            alone = from_store(hs._forward(flat[:1], [-1], [])[("resp", -1)][first])
            row["plain_batch_shape_max_abs"] = float(abs(alone - plain[first]).max())
            row["state_max_abs"] = max(float(abs(arrays[r["rollout_idx"]]).max()) for r in rows[:2])
            hs.release()
        shared = SharedFeatures(path, -3)
        shared.dtype = dtype
        shared.add(bfp, bdir, {pid: rows})
        seqs = [make_seq((bfp, pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], r["reward"])
                for r in rows]
        cfg = CriticConfig(model=path, epochs=1, batch=args.batch)
        for name in ("critic fit (1 epoch)", "critic checkpoint reuse"):
            with Step(name, args.device, dtype, results) as row:
                critic = Critic(cfg, path, device=args.device, dtype=dtype)
                critic.use_features(shared)
                trained = []
                ckpt = critic.fit(seqs, bdir / "critics", "smoke",
                                  on_epoch=lambda e, loss, trained=trained: trained.append(loss))
                vals = critic.values(seqs)
                row.update(finite=finite(vals.values()) and finite(trained), epochs_trained=len(trained),
                           checkpoint=ckpt.name)
                del critic
                empty_cache()
        with Step("pacs fit (1 epoch) + prefix scores", args.device, dtype, results) as row:
            scorer = PacsScorer(PacsConfig(model=path, epochs=1), path, device=args.device, dtype=dtype)
            scorer.use_features(shared)
            pseqs = [make_pseq(s.key, pid, r["prompt_token_ids"], r["response_token_ids"], r["reward"])
                     for s, r in zip(seqs, rows)]
            scorer.fit(pseqs, bdir / "critics", "smoke-pacs")
            scores = scorer.prefix_scores(pseqs)
            row["finite"] = finite(scores.values())
            del scorer
            empty_cache()
        if args.vllm:
            with Step("vLLM: two engines, same seeded requests", args.device, dtype, results) as row:
                row.update(vllm_twice(args.vllm, dtype))
    return results


def vllm_twice(model: str, dtype: str) -> dict:
    """Token agreement of two engine runs over the same 32 seeded requests (a build's reproducibility)."""
    from sveb.core.config import SamplingConfig
    from sveb.core.models import resolve
    from sveb.engines import Request
    from sveb.engines.vllm import VLLMEngine
    reqs = [Request((1, 2, 3, 4 + i % 4), seed=i) for i in range(32)]
    runs = []
    for _ in range(2):
        eng = VLLMEngine(resolve(model), dtype=dtype, max_model_len=1024)
        runs.append([c.token_ids for c in eng.generate(reqs, SamplingConfig(max_tokens=128))])
        eng.close()
    return {"finite": True, "identical_sequences": sum(a == b for a, b in zip(*runs)), "of": len(reqs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--dtype", default=None, choices=["bfloat16", "float32"], help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--shape", default="qwen2.5-3b", choices=sorted(SHAPES))
    ap.add_argument("--rollouts", type=int, default=40)
    ap.add_argument("--tokens", type=int, default=4096, help="prompt + response tokens per rollout (about)")
    ap.add_argument("--batch", type=int, default=4, help="critic micro-batch (rollouts)")
    ap.add_argument("--vllm", default="", help="a small real model: also compare two vLLM runs")
    ap.add_argument("--workdir", default=None, help="where the model and the build go (default: $TMPDIR)")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--sizes", default="", help="rollouts per size, e.g. 40,160,640: the scaling sweep "
                    "(tests/gpu_scale.py), one JSON")
    ap.add_argument("--group", type=int, default=0, help="sweep: rollouts per problem group (0: one group a size)")
    ap.add_argument("--budget-s", type=float, default=450.0, help="sweep: stop before a size that would pass it")
    ap.add_argument("--peak-flops", type=float, default=790e12, help="sweep: the device's peak (H200 bf16 matmul)")
    ap.add_argument("--cache-scale", type=float, default=1.0, help="sweep: scales the in-memory feature budgets "
                    "(a tiny shape's features fit any budget; scaled, they cross it as the 3B shape's do)")
    ap.add_argument("--repeats", type=int, default=1, help="sweep: runs per size; the fastest counts")
    ap.add_argument("--threads", type=int, default=1, help="sweep on a CPU: torch threads")
    ap.add_argument("--profile", action="store_true", help="sweep: the smallest size again under torch.profiler "
                    "(device kernels, device copies, host ops)")
    args = ap.parse_args(argv)
    args.dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    if args.sizes:
        from gpu_scale import sweep
        out = sweep(args)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out["growth"]))
        return 0 if out["finite"] else 1
    results = run(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    bad = [r["step"] for r in results if not r.get("finite")]
    print("ok: every step ran and every output is finite" if not bad else f"FAILED: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
