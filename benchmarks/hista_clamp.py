"""What Hista's raw clamp (the authors' min_distance 5.0) means for a model: the scale of its node histories.

For a seeded sample of problem groups of each build: the model's last-layer states (prompt + response, the
authors' EMA and nodes), and for every (query node, neighbour node) pair Hista compares in-group, the raw
MinDistance. Printed per build: the mean hidden-state norm, the median raw MinDistance per group, the share of
pairs at or below the clamp, the share of in-group queries whose k nearest are decided by ties (more than k
neighbours at the clamp), and how far the value moves when those ties are broken in reverse pool order
instead of pool order (the authors' GPU order is undefined).

    python benchmarks/hista_clamp.py results/table4/exports/{number,math,science,general,programming} --groups 12
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from sveb.estimators.hista import ema_histories, ema_prompt, k_schedule, knn_value, node_distances, node_tokens
from sveb.lm.hidden import HiddenStates
from sveb.store.builds import load_build

CLAMP, MAX_K, MIN_K, MW, NI, ALPHA = 5.0, 66, 6, 5, 50, 0.7


def group_figures(hs: HiddenStates, pid: str, rows: list[dict]) -> dict:
    resp = hs.group(pid, rows)
    prompt = hs.prompt_states(pid, rows)
    start = hs.start_token(rows[0]["prompt_token_ids"])
    order = sorted(resp)
    pre = ema_prompt(prompt, ALPHA, MW, prompt.shape[1])
    hist = dict(zip(order, ema_histories(pre, [resp[j] for j in order], ALPHA, MW)))
    lengths = {j: len(prompt) + len(resp[j]) for j in order}
    nodes = {j: node_tokens(lengths[j], start, NI) for j in order}
    rewards = {r["rollout_idx"]: 1.0 if r["reward"] > 0 else 0.0 for r in rows}
    existing = [(j, q // MW) for j in order for q in nodes[j]]
    rew = torch.tensor([rewards[j] for j, _ in existing])
    pairs, tie_q, moved = [], 0, []
    for i in order:
        ends = [q // MW + 1 for q in nodes[i]]
        dist = torch.cat([node_distances(hist[i], ends, hist[j], [r + 1 for jj, r in existing if jj == j], j == i)
                          for j in order], dim=1)
        finite = dist[torch.isfinite(dist)]
        pairs.append(finite.numpy())
        for n, k in enumerate(k_schedule(MAX_K, MIN_K, len(ends))):
            at_clamp = int((dist[n] <= CLAMP).sum())
            if at_clamp > k:
                tie_q += 1
                # ties in pool order, and (both reversed, the stable sort's order reversed) the other way
                moved.append(abs(knn_value(dist[n], rew, k, CLAMP, 1.0)
                                 - knn_value(dist[n].flip(0), rew.flip(0), k, CLAMP, 1.0)))
    d = np.concatenate(pairs)
    norm = float(np.mean(np.concatenate([np.linalg.norm(resp[j], axis=1) for j in order])))
    return {"pid": pid, "median": float(np.median(d)), "share_at_clamp": float(np.mean(d <= CLAMP)), "norm": norm,
            "queries": sum(len(nodes[j]) for j in order), "tie_queries": tie_q,
            "tie_moved_mean": float(np.mean(moved)) if moved else 0.0,
            "tie_moved_max": float(np.max(moved)) if moved else 0.0}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", type=Path)
    ap.add_argument("--groups", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="a JSON file for the per-group figures")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    report = {}
    for b in a.builds:
        data = load_build(b, references=False)
        hs = HiddenStates(b, data.manifest["model"])
        pids = sorted(data.problems)
        pick = sorted(np.random.default_rng(a.seed).choice(len(pids), min(a.groups, len(pids)), replace=False))
        figs = [group_figures(hs, pids[i], data.rollouts[pids[i]]) for i in pick]
        hs.release()
        med = [f["median"] for f in figs]
        share = [f["share_at_clamp"] for f in figs]
        q, tq = sum(f["queries"] for f in figs), sum(f["tie_queries"] for f in figs)
        moved = [f["tie_moved_mean"] for f in figs if f["tie_queries"]]
        print(f"{b.name}: {len(figs)} groups; mean hidden norm {np.mean([f['norm'] for f in figs]):.1f} "
              f"(clamp 5.0 = {5.0 / np.mean([f['norm'] for f in figs]):.3f} of it); median raw MinDistance per group "
              f"{min(med):.1f}-{max(med):.1f}; pairs at or below 5.0: {min(share):.0%}-{max(share):.0%} per group "
              f"(mean {np.mean(share):.0%}); in-group queries decided by ties: {tq} of {q} ({tq / max(q, 1):.0%}); "
              f"|value(pool order) - value(reverse)| on those: mean {np.mean(moved) if moved else 0:.3f}, "
              f"max {max((f['tie_moved_max'] for f in figs), default=0):.3f}")
        report[b.name] = figs
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
