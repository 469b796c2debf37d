"""Each rule of an authors' (or paper's) estimator against SVEB's earlier choice, one rule at a time, on committed
builds.

For every setting (the authors' default, each rule switched alone to SVEB's earlier choice, all of them
switched, and SVEB's earlier preset) and both protocols: MAE, the paired Δ of squared error against grpo over
the same states [95% CR1 t-interval] and its cluster-robust p, builds pooled with clusters by problem
identity. The settings form a family of their own (Holm within each protocol; labelled so).

    python benchmarks/fidelity.py --estimator numca --out results/fidelity/numca-number \\
        results/powered/exports/number-seed0 results/powered/exports/number-seed1 results/powered/exports/number-seed2
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
from rich.console import Console

from sveb.estimators import make, params_fp
from sveb.evaluate import evaluate
from sveb.evaluate.protocols import PROTOCOLS
from sveb.present.report_format import md_table
from sveb.score import scoring
from sveb.score.pooling import load_view, merge, read_scores

# (label, estimator, params): the rule each row switches to SVEB's earlier choice
SETTINGS = {
    "numca": [
        ("authors' code (default)", "numca", {}),
        ("numbers = SVEB's normalised ints, decimals, fractions", "numca", {"numbers": "normalised"}),
        ("the last number kept", "numca", {"drop_last": "false"}),
        ("no 50-character merge", "numca", {"merge": "0"}),
        ("unseen set = the latest seen (not 0.0)", "numca", {"unseen": "latest"}),
        ("read V(set at cut) (not root + advantages)", "numca", {"read": "table"}),
        ("all five switched", "numca", {"numbers": "normalised", "drop_last": "false", "merge": "0",
                                        "unseen": "latest", "read": "table"}),
        ("numca-sveb (SVEB's earlier code)", "numca-sveb", {}),
    ],
    "hista": [
        ("authors' code (default)", "hista", {}),
        ("history = the response only", "hista", {"history": "response"}),
        ("read the cut's own history (no snap)", "hista", {"read": "cut"}),
        ("fixed k = 66 (no schedule)", "hista", {"min_k": "66"}),
        ("clamp 0.1 of the group's mean norm (not 5.0 raw)", "hista", {"scale": "norm", "min_distance": "0.1"}),
        ("all four switched", "hista", {"history": "response", "read": "cut", "min_k": "66", "scale": "norm",
                                        "min_distance": "0.1"}),
        ("hista-sveb (SVEB's earlier code)", "hista-sveb", {}),
    ],
    "shear": [  # the signal's rules switched under the contrast read-out (its rows as measured before issue 35)
        ("the paper's signal, base-rate read-out (default, SVEB's)", "shear", {}),
        ("contrast read-out d- / (d+ + d-) (the earlier default)", "shear", {"readout": "contrast"}),
        ("contrast; tail spans full (not truncated)", "shear", {"readout": "contrast", "tail": "full"}),
        ("contrast; the trailing window (not the covering spans)", "shear",
         {"readout": "contrast", "span": "trailing"}),
        ("contrast; compare with every rollout (not the opposing set)", "shear",
         {"readout": "contrast", "compare": "all"}),
        ("contrast; a minimum per rollout (not one over the set)", "shear",
         {"readout": "contrast", "minimum": "rollout"}),
        ("1/d kNN read-out (not the base rate)", "shear", {"readout": "knn"}),
        ("shear-sveb (SVEB's earlier construction)", "shear-sveb", {}),
    ],
    "pacs": [  # final_baseline is left out: no benchmark state holds its whole response (t <= T - 1)
        ("the authors' loss and temperature (default)", "pacs", {}),
        ("unweighted BCE (not class-balanced)", "pacs", {"weight": "none"}),
        ("log-probs at T = 1 (not the sampling temperature)", "pacs", {"logprob_temperature": "1.0"}),
        ("pacs-sveb (SVEB's earlier variant: both, and the truncated final baseline)", "pacs-sveb", {}),
    ],
    "hidden-align": [  # the paper defines no value: every row is SVEB's read-out, the default first
        ("similarity + base rate, fitted on the train build (default)", "hidden-align", {}),
        ("no similarity term: the calibrated base rate", "hidden-align", {"similarity": "false"}),
        ("fixed weights (0, 4, 1), not fitted", "hidden-align", {"calibration": "fixed"}),
    ],
}

TITLES = {
    "numca": "each rule of the authors' code against SVEB's earlier choice",
    "shear": "the paper's signal and each of SVEB's earlier rules, under SVEB's read-outs",
    "pacs": "each rule of the authors' code (loss weights, log-prob temperature) against SVEB's earlier choice",
    "hidden-align": "SVEB's read-out of the paper's observation, one piece removed at a time (the paper defines no "
                    "value)",
}


def run(builds: list[Path], which: str, console: Console, only: list[int] | None = None,
        protocols: tuple[str, ...] = PROTOCOLS) -> list[dict]:
    settings = [x for i, x in enumerate(SETTINGS[which]) if only is None or i in only]
    for b in builds:
        for proto in protocols:
            evaluate(b, "grpo", {}, proto, console=console)
            for _, name, params in settings:
                evaluate(b, name, params, proto, console=console)
    view = merge([load_view(b, read_scores(b)) for b in builds]) if len(builds) > 1 else \
        load_view(builds[0], read_scores(builds[0]))
    rows = []
    for proto in protocols:
        base = next(v for k, v in view.est.items() if k[0] == "grpo" and k[2] == proto)
        part = []
        for label, name, params in settings:
            x = view.est[(name, params_fp(make(name, params)), proto)]
            ok = np.isfinite(x) & np.isfinite(base) & np.isfinite(view.ref)
            r = scoring.paired_sq_diff(x[ok], base[ok], view.ref[ok], view.problem[ok])
            part.append({"protocol": proto, "setting": label, "estimator": name, "params": json.dumps(params),
                         "states": int(ok.sum()), "mae": float(np.mean(np.abs(x[ok] - view.ref[ok]))),
                         "grpo_mae": float(np.mean(np.abs(base[ok] - view.ref[ok]))), **r})
        for row, p in zip(part, scoring.holm([r["p_delta"] for r in part])):
            row["p_holm"], row["verdict"] = float(p), scoring.verdict(row["delta_sq"], float(p))
        rows += part
    return rows


def write(rows: list[dict], out: Path, builds: list[Path], which: str) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# {which}: {TITLES.get(which, TITLES['numca'])}", "",
             f"Builds: {', '.join(b.name for b in builds)} (pooled, clusters by problem identity); "
             f"{rows[0]['states']} states. Δ = paired difference of squared error to grpo (< 0: closer); "
             "p: cluster-robust t (CR1); Holm over this table's settings within a protocol (an ablation family "
             "of its own, not the leaderboard's). Generated by benchmarks/fidelity.py.", ""]
    for proto in dict.fromkeys(r["protocol"] for r in rows):
        part = [r for r in rows if r["protocol"] == proto]
        lines += [f"## {proto} (grpo MAE {part[0]['grpo_mae']:.3f})", ""]
        lines += [md_table(["setting", "MAE", "Δ sq err vs grpo [95% CI]", "p", "Holm p", "verdict"],
                           [[r["setting"], f"{r['mae']:.3f}", f"{r['delta_sq']:+.4f} [{r['delta_sq_ci_low']:+.4f}, "
                             f"{r['delta_sq_ci_high']:+.4f}]", f"{r['p_delta']:.3f}", f"{r['p_holm']:.3f}",
                             r["verdict"]] for r in part]), ""]
    out.with_suffix(".md").write_text("\n".join(lines))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("builds", nargs="+", type=Path)
    ap.add_argument("--estimator", choices=sorted(SETTINGS), required=True)
    ap.add_argument("--out", type=Path, required=True, help="path stem: writes STEM.md and STEM.csv")
    ap.add_argument("--settings", help="only these rows of the estimator's list, by index (0 = the default), e.g. "
                    "0,1: Holm then runs over them alone")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS), help="comma-separated (default: both)")
    a = ap.parse_args(argv)
    only = [int(x) for x in a.settings.split(",")] if a.settings else None
    protocols = tuple(x.strip() for x in a.protocols.split(",") if x.strip())
    if not protocols or set(protocols) - set(PROTOCOLS):
        ap.error(f"--protocols: choose from {', '.join(PROTOCOLS)}")
    rows = run(a.builds, a.estimator, Console(stderr=True), only, protocols)
    write(rows, a.out, a.builds, a.estimator)
    print(a.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
