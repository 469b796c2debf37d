"""The scaling sweep of `tests/gpu_smoke.py --sizes 40,160,640` (issue 60): SVEB's four GPU steps (the hidden-state
pass, a critic fit, its checkpoint reuse, pacs's fit and prefix scores) at each number of rollouts, with seconds
per token, the time split (disk reads and writes and host-device copies from sveb.lm.timers; the rest is compute
and Python), the peak host RSS sampled during the step, tokens/s and the fraction of peak FLOP/s of the hidden
pass, and each step's time per token relative to the first size. Before a size starts, its time is predicted
from the previous size's rates; if the sweep would pass --budget-s it stops there and records why.
tests/test_scaling_on_cpu.py runs the same steps (`run_size`) at a tiny shape."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

STEPS = ("hidden", "critic_fit", "critic_reuse", "pacs")
SAFETY = 1.3  # the predicted time of the next size is padded by this much


class Meter:
    """Wall time, the I/O counters' gain and the peak RSS (sampled every 20 ms) of one step; `work()` times the
    part that scales with the rollouts (not loading the model nor freeing it), whose growth is judged."""

    def __init__(self, device: str):
        self.device, self.work_s = device, 0.0

    def _sync(self):
        if self.device == "cuda":
            import torch
            torch.cuda.synchronize()

    @contextmanager
    def work(self):
        self._sync()
        t0 = time.perf_counter()
        yield
        self._sync()
        self.work_s += time.perf_counter() - t0

    def __enter__(self):
        import torch

        from sveb.lm import timers
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.before, self.peak, self.stop = timers.snapshot(), rss(), threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        self.t0 = time.perf_counter()
        return self

    def _sample(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        import torch

        from sveb.lm import timers
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.t0
        self.stop.set()
        self.thread.join()
        self.split = timers.since(self.before)
        self.row = {"seconds": round(self.seconds, 3), "work_seconds": round(self.work_s, 3),
                    "io_seconds": self.split["seconds"], "io_bytes": self.split["bytes"],
                    "peak_host_rss_gib": round(max(self.peak, rss()) / 2**30, 3)}
        if self.device == "cuda":
            self.row["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        return False


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def flops_per_token(shape: dict, context: float) -> float:
    """A forward pass's FLOPs per token: 2 x the non-embedding weights (the LM head is not run) plus attention's
    two products over `context` earlier positions on average (4 x layers x d x context)."""
    d, f, n = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = d // shape["num_attention_heads"] * shape["num_key_value_heads"]
    per_layer = 2 * d * d + 2 * d * kv + 3 * d * f
    return 2.0 * n * per_layer + 4.0 * n * d * context


def groups(n: int, group: int, tokens: int, vocab: int, seed: int = 0) -> dict[str, list[dict]]:
    from gpu_smoke import make_rollouts
    size = group or n
    return {f"p{g}": make_rollouts(min(size, n - g * size), tokens, vocab, seed + g)
            for g in range(-(-n // size))}


def run_size(path: str, shape: dict, rows: dict[str, list[dict]], bdir: Path, device: str, dtype: str,
             batch: int = 4, cache_scale: float = 1.0, only=STEPS, out: dict | None = None) -> dict:
    """Every step of `only` on these groups; {step: row}, filled into `out` step by step (what a stop mid-size
    keeps). The builds' files go under bdir."""
    from sveb.core.device import empty_cache
    from sveb.estimators.pacs import PacsConfig, PacsScorer, make_pseq
    from sveb.lm import critic as critic_mod
    from sveb.lm.critic import Critic, CriticConfig, make_seq
    from sveb.lm.hidden import HiddenStates, SharedFeatures
    tokens = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for g in rows.values() for r in g)
    out, bfp = ({} if out is None else out), "scale"
    budget = int(critic_mod.CACHE_BYTES * cache_scale)
    if "hidden" in only:
        with Meter(device) as m:
            hs = HiddenStates(bdir, path, layer=-1, dtype=dtype)
            hs._load_model()
            with m.work():
                for pid, g in rows.items():
                    hs.ensure(pid, g)
            hs.release()
        out["hidden"] = _per_token(m.row, tokens)
    seqs = [make_seq((bfp, pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], r["reward"])
            for pid, g in rows.items() for r in g]

    def shared():
        fn = SharedFeatures(path, -3)
        fn.dtype = dtype
        fn.add(bfp, bdir, rows)
        return fn
    for name in ("critic_fit", "critic_reuse"):
        if name not in only:
            continue
        with Meter(device) as m:
            critic = Critic(CriticConfig(model=path, epochs=1, batch=batch), path, device=device, dtype=dtype,
                            cache_bytes=budget)
            critic.use_features(shared())
            trained = []
            with m.work():
                critic.fit(seqs, bdir / "critics", "scale",
                           on_epoch=lambda e, loss, trained=trained: trained.append(loss))
                vals = critic.values(seqs)
            del critic
            empty_cache()
        out[name] = _per_token({**m.row, "epochs_trained": len(trained),
                                "finite": _finite(vals.values()) and _finite(trained)}, tokens)
    if "pacs" in only:
        with Meter(device) as m:
            scorer = PacsScorer(PacsConfig(model=path, epochs=1), path, device=device, dtype=dtype, cache_bytes=budget)
            scorer.use_features(shared())
            pseqs = [make_pseq(s.key, s.key[1], s.ids[:s.prompt_len], r["response_token_ids"], r["reward"])
                     for s, r in zip(seqs, (r for g in rows.values() for r in g))]
            with m.work():
                scorer.fit(pseqs, bdir / "critics", "scale-pacs")
                scores = scorer.prefix_scores(pseqs)
            del scorer
            empty_cache()
        out["pacs"] = _per_token({**m.row, "finite": _finite(scores.values())}, tokens)
    return out


def _per_token(row: dict, tokens: int) -> dict:
    return {**row, "tokens": tokens, "us_per_token": round(row["seconds"] / tokens * 1e6, 3),
            "work_us_per_token": round(row["work_seconds"] / tokens * 1e6, 3)}


class OverBudget(Exception):
    pass


def _over_budget(*_):
    raise OverBudget


def measure_size(args, path: str, shape: dict, rows: dict, tmp: Path, left: float, partial: dict) -> tuple[dict, bool]:
    """The fastest of --repeats runs of every step at this size, and whether every output was finite; an alarm at
    `left` seconds raises OverBudget mid-size (the steps done so far stay in `partial`)."""
    old = signal.signal(signal.SIGALRM, _over_budget)
    signal.setitimer(signal.ITIMER_REAL, max(left, 0.01))
    bdir = tmp / "build"
    try:
        best, finite = None, True
        for _ in range(args.repeats):
            partial.clear()
            steps = run_size(path, shape, rows, bdir, args.device, args.dtype, args.batch, args.cache_scale,
                             out=partial)
            finite &= hidden_finite(bdir) and all(r.get("finite", True) for r in steps.values())
            shutil.rmtree(bdir)
            best = dict(steps) if best is None else {k: min(best[k], steps[k], key=lambda r: r["work_seconds"])
                                                     for k in steps}
        return best, finite
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        shutil.rmtree(bdir, ignore_errors=True)


def _finite(arrays) -> bool:
    return all(bool(np.all(np.isfinite(np.asarray(a)))) for a in arrays)


def growth(per_size: list[dict]) -> dict[str, float]:
    """Each step's work time per token (Meter.work) at the largest size it ran over that at the smallest."""
    out = {}
    for step in STEPS:
        rates = [s["steps"][step]["work_us_per_token"] for s in per_size if step in s.get("steps", {})]
        if len(rates) >= 2:
            out[step] = round(rates[-1] / rates[0], 3)
    return out


def profile_split(run) -> dict:
    """run() under torch.profiler: its wall time split into device kernels, device copies (memcpy/memset) and the
    host's own op time (dispatch, Python-driven work, CPU compute on a CPU); the top ops by host time."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    t0 = time.perf_counter()
    with profile(activities=acts) as prof:
        run()
    wall = time.perf_counter() - t0
    events = prof.key_averages()
    dev = lambda e: getattr(e, "self_device_time_total", 0) or 0  # noqa: E731
    on_device = [e for e in events if str(getattr(e, "device_type", "")).endswith("CUDA")]
    copies = sum(dev(e) for e in on_device if "memcpy" in e.key.lower() or "memset" in e.key.lower()) / 1e6
    kernels = sum(dev(e) for e in on_device) / 1e6 - copies
    host = sum(e.self_cpu_time_total for e in events) / 1e6
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:8]
    return {"wall_s": round(wall, 3), "device_kernels_s": round(kernels, 3), "device_copies_s": round(copies, 3),
            "host_ops_s": round(host, 3), "top_host_ops": {e.key: round(e.self_cpu_time_total / 1e6, 3) for e in top}}


def hidden_finite(bdir: Path) -> bool:
    """Every stored state finite, read one rollout at a time (a 640-rollout group never sits in memory)."""
    from sveb.lm.hidden import from_store
    for path in Path(bdir).rglob("*.npz"):
        with np.load(path) as z:
            if not all(np.isfinite(from_store(z[k])).all() for k in z.files):
                return False
    return True


def sweep(args) -> dict:
    os.environ["SVEB_DEVICE"] = args.device
    import torch
    from gpu_smoke import SHAPES

    from sveb.core.device import device
    dev = device()
    if dev.torch != args.device:
        raise SystemExit(f"asked for {args.device}, sveb.core.device decided {dev.torch}")
    sizes = [int(x) for x in args.sizes.split(",")]
    shape = SHAPES[args.shape]
    meta = {"device": dev.describe(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None, "cpu_flags": cpu_flags(),
            "shape": args.shape, "hidden_size": shape["hidden_size"], "layers": shape["num_hidden_layers"],
            "dtype": args.dtype, "tokens_per_rollout": args.tokens, "group": args.group,
            "sizes": sizes, "budget_s": args.budget_s, "peak_flops": args.peak_flops,
            "cache_scale": args.cache_scale}
    threads = torch.get_num_threads()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)  # OpenMP threads on a shared CPU spin: 1 thread ran a step 19x faster
    try:
        return _sweep(args, meta, shape, sizes)
    finally:
        torch.set_num_threads(threads)


def _sweep(args, meta: dict, shape: dict, sizes: list[int]) -> dict:
    import torch
    from gpu_smoke import make_model
    out = {"meta": meta, "sizes": [], "stopped": None, "finite": True}
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        path = make_model(args.shape, args.dtype, tmp / "model", args.device)
        meta["model_seconds"] = round(time.perf_counter() - t0, 2)
        prev = None
        for n in sizes:
            rows = groups(n, args.group, args.tokens, shape["vocab_size"])
            tokens = sum(len(r["prompt_token_ids"]) + len(r["response_token_ids"]) for g in rows.values() for r in g)
            left = args.budget_s - (time.perf_counter() - t_start)
            # the previous size's whole wall time (steps, checks, clean-up) scaled by the tokens, padded
            need = 0.0 if prev is None else SAFETY * prev["wall_seconds"] * tokens / prev["tokens"]
            if need > left:
                out["stopped"] = {"size": n, "predicted_s": round(need, 1), "left_s": round(left, 1),
                                  "why": "the predicted time of this size passes --budget-s"}
                print(f"stopping before {n} rollouts: predicted {need:.0f} s, {left:.0f} s left", flush=True)
                break
            t_size, partial = time.perf_counter(), {}
            try:
                best, finite = measure_size(args, path, shape, rows, tmp, left, partial)
            except OverBudget:
                out["stopped"] = {"size": n, "left_s": round(left, 1), "partial_steps": partial,
                                  "why": "--budget-s ran out during this size (growth past the prediction)"}
                print(f"stopped during {n} rollouts: --budget-s ran out", flush=True)
                break
            out["finite"] &= finite
            h = best["hidden"]
            ctx = float(np.mean([len(r["prompt_token_ids"]) + len(r["response_token_ids"])
                                 for g in rows.values() for r in g])) / 2
            h["tokens_per_s"] = round(tokens / h["work_seconds"], 1)  # the pass itself, not loading the model
            h["fraction_of_peak"] = float(f"{h['tokens_per_s'] * flops_per_token(shape, ctx) / args.peak_flops:.4g}")
            prev = {"rollouts": n, "tokens": tokens, "steps": best, "finite": finite,
                    "wall_seconds": round(time.perf_counter() - t_size, 2)}
            out["sizes"].append(prev)
            print(f"{n} rollouts: " + ", ".join(f"{k} {v['seconds']:.2f} s" for k, v in best.items()), flush=True)
        if args.profile and out["sizes"]:
            left = args.budget_s - (time.perf_counter() - t_start)
            out["profile"] = profiled(args, path, shape, out["sizes"][0], tmp, left)
    meta["threads"] = torch.get_num_threads()
    out["growth"] = growth(out["sizes"])
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)
    return out


def profiled(args, path: str, shape: dict, first: dict, tmp: Path, left: float) -> dict:
    """The smallest size again under torch.profiler, if the budget leaves room (the profiler's overhead: ~2x)."""
    need = SAFETY * 2 * sum(r["seconds"] for r in first["steps"].values())
    if need > left:
        return {"skipped": f"predicted {need:.0f} s, {left:.0f} s left of --budget-s"}
    rows = groups(first["rollouts"], args.group, args.tokens, shape["vocab_size"])
    try:
        return {"rollouts": first["rollouts"], **profile_split(
            lambda: run_size(path, shape, rows, tmp / "profiled", args.device, args.dtype, args.batch,
                             args.cache_scale))}
    finally:
        shutil.rmtree(tmp / "profiled", ignore_errors=True)


def cpu_flags() -> list[str]:
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        return []
    return sorted(f for f in flags if f in {"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
