"""Which neighbours the authors' `torch.topk` picks when distances tie at Hista's clamp, on the GPU they ran on.

Hista's value takes the k smallest clamped distances; when more than k sit at the clamp, which of them enter is
decided by `torch.topk(d, k, largest=False, sorted=True)` (their hista_utils.py), whose order among equal values
is implementation-defined. SVEB (and the conformance cases) take them in pool order (a stable sort). This
measures what topk does instead, on the CPU and on CUDA when there is one:

    python benchmarks/hista_topk_ties.py dump ../shared/conformance/public ties.npz   # here: the tie queries' rows
    python benchmarks/hista_topk_ties.py run ties.npz --out ties.json                 # anywhere with torch

`dump` runs every tie case of a conformance directory through `Hista` and keeps the final k-nearest inputs
(the clamped distance row, the neighbours' rewards, k, the clamp, t, the expected value); `run` recomputes each
value with a stable sort (SVEB's rule) and with topk on every device present, and adds a synthetic sweep
(rows of n distances with m ties at the clamp) saying whether topk returns the lowest indices among ties.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

TINY_WEIGHT = 1e-8  # sveb.estimators.hista's (`run` imports nothing of sveb: the GPU machine has torch only)


def dump(conf: Path, out: Path) -> int:
    from sveb.estimators import hista as hista_mod
    from sveb.evaluate.conformance import hista_case
    assert hista_mod.TINY_WEIGHT == TINY_WEIGHT
    rows: list[tuple] = []
    real = hista_mod.knn_value

    def spy(dist, rewards, k, clamp, t):
        rows.append((dist.numpy().astype(np.float32), rewards.numpy().astype(np.float32), int(k), float(clamp),
                     float(t)))
        return real(dist, rewards, k, clamp, t)

    cases = [json.loads(x) for x in (conf / "hista" / "cases.jsonl").read_text().splitlines() if x.strip()]
    keep, groups = [], {}
    hista_mod.knn_value = spy
    try:
        for n, c in enumerate(cases, 1):
            if not c.get("ties"):
                continue
            rows.clear()
            got, want = hista_case(c, conf, conf / "hista" / "cases.jsonl", n, groups)
            # the read-out row is the last knn_value call of this query (the snapped node's)
            keep.append((c["id"], *rows[-1], float(want), float(got)))
    finally:
        hista_mod.knn_value = real
    lens = [len(r[1]) for r in keep]
    np.savez(out, ids=np.array([r[0] for r in keep]), dist=np.concatenate([r[1] for r in keep]),
             rewards=np.concatenate([r[2] for r in keep]), lens=np.array(lens), k=np.array([r[3] for r in keep]),
             clamp=np.array([r[4] for r in keep]), t=np.array([r[5] for r in keep]),
             expected=np.array([r[6] for r in keep]), sveb=np.array([r[7] for r in keep]))
    return len(keep)


def value(d: torch.Tensor, r: torch.Tensor, k: int, clamp: float, t: float, how: str) -> tuple[float, list[int]]:
    d = torch.clamp_min(torch.nan_to_num(d, nan=float("inf")), clamp)
    k = min(k, len(d))
    if how == "stable":
        vals, idx = torch.sort(d, stable=True)
        vals, idx = vals[:k], idx[:k]
    else:
        vals, idx = torch.topk(d, k, largest=False, sorted=True)
    w = 1.0 / vals ** t
    total = w.sum()
    v = 0.0 if total < TINY_WEIGHT else float((r[idx] * w).sum() / total)
    return v, sorted(idx.cpu().tolist())


def sweep(device: str, rng: np.random.Generator) -> dict:
    """Rows of n distances, m of them at the clamp, k < m: does topk pick the m tied ones' lowest indices?"""
    lowest = total = 0
    patterns: dict[str, int] = {}
    for n in (20, 66, 200, 1000, 5000):
        for _ in range(40):
            m = int(rng.integers(2, n // 2 + 2))
            k = int(rng.integers(1, m))
            d = 5.0 + rng.random(n).astype(np.float32) * 10 + 0.01
            tied = np.sort(rng.choice(n, m, replace=False))
            d[tied] = 5.0
            _, idx = torch.topk(torch.tensor(d, device=device), k, largest=False, sorted=True)
            got = sorted(idx.cpu().tolist())
            ok = got == tied[:k].tolist()
            lowest += ok
            total += 1
            key = "lowest" if ok else ("highest" if got == tied[-k:].tolist() else "other")
            patterns[f"n={n} {key}"] = patterns.get(f"n={n} {key}", 0) + 1
    return {"rows": total, "topk picks the lowest indices among ties": lowest, "by size": patterns}


def run(path: Path) -> dict:
    z = np.load(path)
    ends = np.cumsum(z["lens"])
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    report: dict = {"torch": torch.__version__, "devices": devices,
                    "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "cases": int(len(z["ids"]))}
    stable = []
    for i in range(len(z["ids"])):
        lo = ends[i] - z["lens"][i]
        d, r = torch.tensor(z["dist"][lo:ends[i]]), torch.tensor(z["rewards"][lo:ends[i]])
        stable.append(value(d, r, int(z["k"][i]), float(z["clamp"][i]), float(z["t"][i]), "stable"))
    report["stable sort reproduces expected (1e-6)"] = int(sum(abs(v - e) <= 1e-6
                                                              for (v, _), e in zip(stable, z["expected"])))
    for dev in devices:
        same_set = same_value = 0
        diffs = []
        for i in range(len(z["ids"])):
            lo = ends[i] - z["lens"][i]
            d = torch.tensor(z["dist"][lo:ends[i]], device=dev)
            r = torch.tensor(z["rewards"][lo:ends[i]], device=dev)
            v, idx = value(d, r, int(z["k"][i]), float(z["clamp"][i]), float(z["t"][i]), "topk")
            same_set += idx == stable[i][1]
            same_value += abs(v - stable[i][0]) <= 1e-6
            diffs.append(abs(v - stable[i][0]))
        report[dev] = {"same neighbours as pool order": int(same_set), "same value (1e-6)": int(same_value),
                       "mean |value - pool-order value|": float(np.mean(diffs)) if diffs else 0.0,
                       "max |value - pool-order value|": float(np.max(diffs)) if diffs else 0.0,
                       "synthetic sweep": sweep(dev, np.random.default_rng(0))}
    return report


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("conformance", type=Path)
    d.add_argument("out", type=Path)
    r = sub.add_parser("run")
    r.add_argument("ties", type=Path)
    r.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.cmd == "dump":
        print(f"{dump(a.conformance, a.out)} tie cases -> {a.out}")
        return
    report = run(a.ties)
    text = json.dumps(report, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
