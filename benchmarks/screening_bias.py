"""What selection-free groups move: grpo's mean signed error (estimate - reference) and MAE on one build, with the
group the estimators see (G fresh rollouts, today) against a replica of the old group (the filter's own screening
rollouts as its first members, the fresh ones after them).

    python benchmarks/screening_bias.py sveb_data/<model>/<domain>/<build_fp> [more builds ...]

Before the fix, a kept problem's first `screen` rollouts were the very ones the difficulty filter chose it on, and
the other G - screen were fresh; the replica rebuilds that group from a build's `screens` and `rollouts` tables:
screening rollouts + group rollouts with rollout_idx >= screen. Both estimates leave the state's own rollout out
(held-out). Clusters are problems; the CIs are cluster-robust (CR1) t-intervals.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from sveb import store
from sveb.score import scoring


def grpo_before_after(screens: dict[str, list[float]], groups: dict[str, dict[int, float]],
                      states: list[dict], refs: dict[str, float]) -> dict[str, np.ndarray]:
    """Per state: the reference, grpo's held-out estimate on the fresh group ('after') and on the replica of the old
    group ('before': screening rewards + fresh rollouts from index len(screen) on, the own rollout left out)."""
    after, before, ref, pid = [], [], [], []
    for s in states:
        g, own = groups[s["problem_id"]], s["rollout_idx"]
        fresh = [r for i, r in g.items() if i != own]
        screen = screens[s["problem_id"]]
        old = screen + [r for i, r in g.items() if i >= len(screen) and i != own]
        after.append(np.mean(fresh))
        before.append(np.mean(old))
        ref.append(refs[s["state_id"]])
        pid.append(s["problem_id"])
    return {"after": np.array(after), "before": np.array(before), "ref": np.array(ref), "problem": np.array(pid)}


def load(bdir: Path):
    screens: dict[str, list[float]] = {}
    for r in store.read_table(bdir / "screens").to_pylist():
        screens.setdefault(r["problem_id"], []).append(float(r["reward"]))
    groups: dict[str, dict[int, float]] = {}
    for r in store.read_table(bdir / "rollouts").to_pylist():
        groups.setdefault(r["problem_id"], {})[r["rollout_idx"]] = float(r["reward"])
    states = store.read_table(bdir / "states").to_pylist()
    refs = {r["state_id"]: r["value"] for r in store.read_table(bdir / "references").to_pylist()}
    return screens, groups, states, refs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("builds", nargs="+", type=Path)
    a = ap.parse_args()
    parts = [grpo_before_after(*load(b)) for b in a.builds]
    d = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    d["problem"] = np.concatenate([[f"{i}:{x}" for x in p["problem"]] for i, p in enumerate(parts)])
    print(f"{len(d['ref'])} states, {len(set(d['problem']))} problems, {len(a.builds)} build(s)")
    for k in ("before", "after"):
        bias, lo, hi = scoring.bias_ci(d[k], d["ref"], d["problem"])
        mae, mlo, mhi = scoring.mae_ci(d[k], d["ref"], d["problem"])
        print(f"grpo {k:6s}  mean signed error {bias:+.4f} [{lo:+.4f}, {hi:+.4f}]  "
              f"MAE {mae:.4f} [{mlo:.4f}, {mhi:.4f}]")


if __name__ == "__main__":
    main()
