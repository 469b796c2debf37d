"""The numbers behind results/confirm-2/plan.md, computed before any of its builds is sampled (no model, seconds):

1. excluded.txt: every problem id of every committed build or export under results/ (git ls-files: the problems
   tables in the repository, not a run in progress), the file the confirmatory builds pass to --exclude;
2. slots: for each test slot of builtin number, per level, the problems it holds, how many excluded.txt removes, and
   what a seed of 150 candidates (75 problems x oversample 2, or the powered preset's 50 x 3) needs;
3. power.json: the assumed effect and the power of the pre-registered test at 3, 4 and 5 seeds of 75 problems (and
   5 of the powered preset's 50), from exploratory
   data only (results/powered: seeds 0-2, the probe's three trainings and grpo, per state), both by the formula
   (sveb.score.power.power with the training-spread SE of sveb.score.trainings) and by resampling problems.

    .venv/bin/python benchmarks/confirm_plan.py   # writes results/confirm-2/{excluded.txt,slots.csv,power.json}
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from sveb.data_builders import make_problem, number, split_of
from sveb.data_builders.exclude import read
from sveb.data_builders.seeds import SLOTS, allocate, level_pools, slot_of
from sveb.score import power, trainings

EXPLORATORY = Path("results/powered")  # seeds 0-2 of the first powered run: where the hypothesis came from
# A confirmatory seed: the powered preset's 150 candidates (what the smallest slot can give: slots.csv) and its 4 states
# a problem in step pairs, but 75 problems kept of them (the preset keeps 50; about 90 of 150 pass the filter)
SEED_PROBLEMS, OVERSAMPLE, STATES = 75, 2, 4
PRESET_PROBLEMS = 50  # the powered preset's, shown beside for comparison
TRAININGS = (0, 1, 2)  # the probe's training seeds, as Table 4's three trainings


def committed_builds(results: Path) -> list[Path]:
    """Every build or export folder whose problems table is committed under `results`."""
    files = subprocess.run(["git", "ls-files", "--", f":(glob){results}/**/problems/part-*.parquet"],
                           capture_output=True, text=True, check=True).stdout.split()
    return sorted({Path(f).parent.parent for f in files})


def write_excluded(builds: list[Path], out: Path) -> set:
    ex = read(tuple(map(str, builds)))
    lines = ["# Problems of every build or export committed under results/ before the confirmatory run",
             "# (benchmarks/confirm_plan.py; one problem id a line; `sveb build --exclude` reads it).",
             *(f"# {b}" for b in builds)]
    out.write_text("\n".join(lines + sorted(ex.ids)) + "\n")
    return set(ex.ids)


def slot_table(excluded: set) -> list[dict]:
    """builtin number's test slots: per level, held / excluded / left, and the share a 150-candidate seed needs."""
    kept = {lv: w for lv, w in number.LEVELS.items() if w > 0}

    def make(level, rng):
        q, a, inter = number.generate(level, rng)
        return make_problem("number", "builtin", q, str(a), "math", meta={"level": level, "intermediate": inter})
    pools = level_pools("number", kept, make)
    need = allocate(SEED_PROBLEMS * OVERSAMPLE, kept)
    rows = []
    for lv in kept:
        test = [p for p in pools[lv] if split_of(p["problem_id"]) == "test"]
        slot = slot_of(test, ("number", "builtin", "test"), lv, SLOTS["test"])
        for s in range(SLOTS["test"]):
            mine = [p for p in test if slot[p["problem_id"]] == s]
            gone = sum(p["problem_id"] in excluded for p in mine)
            rows.append({"slot": s, "level": lv, "held": len(mine), "excluded": gone, "left": len(mine) - gone,
                         "needed": need[lv]})
    return rows


def _bundles(name: str) -> dict:
    """(training seed or None, build_fp) -> held-out estimates by state id, from the exploratory board's bundles."""
    out = {}
    for f in sorted((EXPLORATORY / "board" / "bundles").glob("*/bundle.json")):
        m = json.loads(f.read_text())
        est = m["estimator"]
        if est["name"] != name or (name == "probe" and est["params"].get("regime") != "outcome"):
            continue
        key = (est["params"].get("seed"), m["build"]["build_fp"])
        t = pq.read_table(f.parent / "estimates.parquet").to_pylist()
        out.setdefault(key, {r["state_id"]: r["value"] for r in t if r["protocol"] == "held-out"})
    return out


def exploratory() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """d (trainings x states): (probe - ref)² - (grpo - ref)² on the exploratory seeds, and each state's cluster
    (build, problem): one problem with its 4 states, the unit a confirmatory seed adds."""
    probe, grpo = _bundles("probe"), _bundles("grpo")
    rows, clusters, builds = [], [], []
    for exp in sorted((EXPLORATORY / "exports").glob("number-seed*")):
        fp = json.loads((exp / "manifest.json").read_text())["build_fp"]
        states = pq.read_table(exp / "states", columns=["state_id", "problem_id"]).to_pylist()
        ref = {r["state_id"]: r["value"] for r in pq.read_table(exp / "references", columns=["state_id", "value"])
               .to_pylist()}
        for s in states:
            sid = s["state_id"]
            g, v = grpo[(None, fp)][sid], ref[sid]
            rows.append([(probe[(r, fp)][sid] - v) ** 2 - (g - v) ** 2 for r in TRAININGS])
            clusters.append(f"{fp}/{s['problem_id']}")
        builds.append(fp)
    return np.array(rows).T, np.array(clusters), builds


def projected(d: np.ndarray, clusters: np.ndarray, n_problems: int, delta: float) -> dict:
    """The over-trainings test's SE and df with n_problems problems of 4 states: the shared variance scales as
    1 / problems (CR1 over independent problems), the training spread s² / R stays (it does not shrink with
    problems: a conservative choice), and its power at `delta` (sveb.score.power.power)."""
    res = trainings.over_trainings(d, clusters)
    g = len(set(clusters))
    v_a = res["var_shared"] * g / n_problems
    v_b = res["var_training"]
    df = trainings.satterthwaite(v_a, n_problems - 1, v_b, d.shape[0] - 1)
    se = float(np.sqrt(v_a + v_b))
    return {"problems": n_problems, "states": n_problems * STATES, "se": se, "df": df,
            "power": power.power(delta, se, df), "mde_80": power.mde(se, int(df))}


def simulated(d: np.ndarray, clusters: np.ndarray, n_problems: int, delta: float, reps: int, seed: int) -> dict:
    """The same power by resampling: n_problems exploratory (build, problem) clusters drawn with replacement, each
    training's d shifted so the trainings' mean is `delta` (their spread kept), then the pre-registered test
    (sveb.score.trainings.over_trainings) on the draw; the share of draws with p < 0.05 and of those with Δ < 0."""
    rng = np.random.default_rng(seed)
    shifted = d - d.mean() + delta
    ids = np.unique(clusters)
    cols = {c: np.flatnonzero(clusters == c) for c in ids}
    hits = better = 0
    for _ in range(reps):
        pick = rng.choice(ids, n_problems)
        idx = np.concatenate([cols[c] for c in pick])
        lab = np.repeat(np.arange(n_problems), [len(cols[c]) for c in pick])
        res = trainings.over_trainings(shifted[:, idx], lab)
        hits += res["p_delta"] < 0.05
        better += res["p_delta"] < 0.05 and res["delta_sq"] < 0
    return {"problems": n_problems, "reps": reps, "power": hits / reps, "power_better": better / reps}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="results/confirm-2")
    p.add_argument("--reps", type=int, default=2000)
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    builds = [b for b in committed_builds(Path("results")) if out not in b.parents]
    excluded = write_excluded(builds, out / "excluded.txt")
    rows = slot_table(excluded)
    with open(out / "slots.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    d, clusters, fps = exploratory()
    expl = trainings.over_trainings(d, clusters)
    per = [float(x) for x in d.mean(1)]
    assumed = float(expl["delta_sq"])
    grid = {"assumed": assumed, "three quarters": 0.75 * assumed, "half": 0.5 * assumed}
    sizes = sorted({PRESET_PROBLEMS * 5} | {SEED_PROBLEMS * k for k in (3, 4, 5)})
    result = {
        "excluded": {"ids": len(excluded), "builds": [str(b) for b in builds]},
        "exploratory": {"builds": fps, "states": int(d.shape[1]), "clusters": len(set(clusters)),
                        "trainings": list(TRAININGS), "delta_per_training": per,
                        **{k: float(v) for k, v in expl.items()}},
        "assumed_delta": assumed,
        "formula": {name: [projected(d, clusters, n, delta) for n in sizes] for name, delta in grid.items()},
        "simulation": {name: [simulated(d, clusters, n, delta, a.reps, 56) for n in sizes]
                       for name, delta in grid.items()},
    }
    (out / "power.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("assumed_delta", "formula")}, indent=1))
    print(json.dumps(result["simulation"], indent=1))


if __name__ == "__main__":
    main()
