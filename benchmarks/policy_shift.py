"""Do two builds sample the same policy? The pass rates of the candidates both builds screened, paired by problem.

    python benchmarks/policy_shift.py BUILD_A BUILD_B [--permutations 10000 --seed 0]

BUILD_*: a build directory or an export (its `screens` table: rollouts of the screening). Builds of one domain that
draw from the same
candidates screen the same problems with the same prompts (the protocol study: every build of a domain draws from
one pool), so a difference in their pass rates is the policy's: its dtype (bf16 vs fp32), engine or model, plus
the sampling noise that the test accounts for. Prints the shared problems, each build's mean pass rate over them,
the paired difference B - A with its t-interval over problems (sveb.score.scoring), and an exact-in-spirit
permutation p: under "one policy", a problem's screening rewards are exchangeable between the two builds, so they
are shuffled within each problem and the mean difference recomputed (seeded). Problems whose prompts differ are
left out and counted (then the difference would be the prompt's, not the policy's).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sveb import store
from sveb.core import schema
from sveb.score import scoring


def per_problem(rows: list[dict]) -> dict[str, tuple[tuple[int, ...], list[float]]]:
    """problem_id -> (its prompt's token ids, its screening rewards)."""
    out: dict[str, tuple[tuple[int, ...], list[float]]] = {}
    for r in rows:
        prompt, rewards = out.setdefault(r["problem_id"], (tuple(r["prompt_token_ids"]), []))
        rewards.append(float(r["reward"]))
    return out


def shift(a: dict, b: dict, permutations: int = 10000, seed: int = 0) -> dict:
    """The paired comparison of two builds' per-problem screening rewards (see the module's docstring)."""
    shared = [p for p in a if p in b and a[p][0] == b[p][0]]
    other_prompt = sum(1 for p in a if p in b and a[p][0] != b[p][0])
    ra = [np.array(a[p][1]) for p in shared]
    rb = [np.array(b[p][1]) for p in shared]
    d = np.array([y.mean() - x.mean() for x, y in zip(ra, rb)])
    m, lo, hi = scoring.mean_ci(d) if len(d) else (float("nan"),) * 3
    rng = np.random.default_rng(seed)
    dp = np.zeros(permutations)  # each permutation's mean difference, summed problem by problem
    for x, y in zip(ra, rb):
        pooled = rng.permuted(np.tile(np.concatenate([x, y]), (permutations, 1)), axis=1)
        dp += (pooled[:, len(x):].mean(1) - pooled[:, :len(x)].mean(1)) / len(d)
    beyond = int((np.abs(dp) >= abs(m) - 1e-12).sum()) if len(d) else 0
    return {"problems": len(shared), "other_prompt": other_prompt,
            "samples_a": int(sum(len(x) for x in ra)), "samples_b": int(sum(len(y) for y in rb)),
            "pass_a": float(np.mean([x.mean() for x in ra])) if ra else float("nan"),
            "pass_b": float(np.mean([y.mean() for y in rb])) if rb else float("nan"),
            "diff": m, "ci_low": lo, "ci_high": hi,
            "p_perm": (beyond + 1) / (permutations + 1) if len(d) else float("nan")}


def screens_of(bdir: Path) -> dict:
    table = Path(bdir) / "screens"
    if not any(table.glob("part-*.parquet")):
        raise SystemExit(f"{table}: no screens shards")
    return per_problem(store.read_table(table, schema.ROLLOUTS).to_pylist())


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--permutations", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    r = shift(screens_of(args.a), screens_of(args.b), args.permutations, args.seed)
    print(f"{r['problems']} shared problems ({r['other_prompt']} left out: other prompts)")
    print(f"screening samples: {r['samples_a']} in A, {r['samples_b']} in B")
    print(f"pass rate: A {r['pass_a']:.4f}, B {r['pass_b']:.4f}")
    print(f"B - A {r['diff']:+.4f} [{r['ci_low']:+.4f}, {r['ci_high']:+.4f}] (95% t over problems); "
          f"permutation p {r['p_perm']:.4f}")
    return r


if __name__ == "__main__":
    main()
