"""Table 4 on the embedded default: one build per domain, every estimator, both protocols -> results/table4/.
This script holds the flags; the experiment is sveb/experiment/table4.py (on the runner `sveb demo` uses).

Resumable domain by domain: a domain whose export exists in EXPORTS is not sampled again; its export is restored
under ROOT (beside the builds, as `<build_fp>.export`) and scored there, so the numbers are those anyone gets from
`sveb eval --build <export>`. Scores already computed are kept (evaluate caches them). Writes table4.md (held-out
first, then in-group, the paper's protocol), scores.csv, domains.csv (states, accuracy, truncation, wall times,
export size), timing.csv (seconds per state of each stage: screening, rollouts, references, hidden pass, each
estimator), each naming the machine's CPU flags, interaction.csv (per estimator and protocol: is its Δ vs grpo the
same in every domain? Cochran's Q, sveb.score.power) and estimates.parquet (every cell's per-state estimates, so the
tables can be scored again without running an estimator).

scores.csv has one row per cell (domain x estimator x protocol): MAE [CI]; Δ of squared error vs grpo [CI], its
CR1 standard error and G - 1 df; p (cluster-robust t); the Holm family, its size m and the Holm p; the verdict;
and beside each "no difference" the minimum detectable Δ at 80% power at alpha / m (sveb.score.power.mde). Every Δ,
CI and p comes from sveb.score.pooling.paired / sveb.score.scoring; table4.md shows MAE with the marks, then per
protocol
the numbers behind each mark, then the interaction test.

--from-exports scores again without sampling or running any estimator: each domain's states and references
from its export, the per-state estimates from --estimates (default OUT/estimates.parquet, committed: the
exports' own estimates/ folders are git-ignored), the timings from OUT/timing.json. A cell with no stored
per-state estimates keeps the MAE [CI] of OUT/scores.csv, marked † and untested. This is the command that
regenerates results/table4/{table4.md,scores.csv,domains.csv,timing.csv,interaction.csv} after a change to
the scoring code:

    python benchmarks/table4.py --from-exports

Each domain's builds are the powered preset's (50 problems x 4 states in step pairs, G = 16, MCS@20 + 4 extras,
seed 0; a train build of 60 problems x 2 states, MC@4), so the number column is the powered run's seed-0 build.
More seeds (--seeds 1,2) add builds of disjoint problems beside it (EXPORTS/DOMAIN-seedK); each domain's cells pool
every seed's export present (clusters: problems), and all seeds share one train build and what trains on it.

    python benchmarks/table4.py                       # the five domains (hours on 2 cores; rerun to resume)
    python benchmarks/table4.py --domains number --problems 8 --states 2
    python benchmarks/table4.py --from-exports        # rescore the committed estimates: seconds, no engine
    python benchmarks/table4.py --domains general --seeds 1,2   # two more seeds of a domain, pooled with seed 0
    python benchmarks/table4.py --preset paper        # the Hista/Numca authors' protocol (sveb/sample/paper.py):
                                                      # G = 32,
                                                      # one state per problem, equal tiers -> results/table4-paper/
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sveb.data_builders import DOMAINS
from sveb.experiment.presets import BASE, PRESETS
from sveb.experiment.table4 import cached_pass_seconds, configs, eval_seconds, hidden_pass, run  # noqa: F401
from sveb.experiment.table4_files import shown_source, write_csv  # noqa: F401  (read by the tests from here)
from sveb.sample.paper import PRESET as PAPER

# Per domain: the builtin generator unless a real dataset puts >= 30% of its screened candidates inside the band
# on the default model (docs/domains.md: gsm8k, math500 and humaneval 0.12, mbpp 0, arc-challenge 0.88,
# mmlu-stem 0.62). Science takes mmlu-stem: its file has no split of its own, so halves by id give a disjoint
# train build offline (the ARC copy here holds only ARC's test split, so trained estimators would have none).
MMLU = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "mmlu_stem" / "test.jsonl"
SOURCES = {"science": f"mmlu-stem={MMLU.resolve()}" if MMLU.exists() else "mmlu-stem"}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default=" ".join(DOMAINS))
    p.add_argument("--source", action="append", default=[], help="DOMAIN=SOURCE (default: builtin)")
    p.add_argument("--estimators", default="", help="comma-separated (default: every registered one)")
    p.add_argument("--model", default=BASE["model"])
    p.add_argument("--engine", default="vllm")
    p.add_argument("--dtype", default="auto",
                   help="compute dtype of every build and model-reading estimator: auto (bfloat16 on a GPU or an "
                        "AVX-512 bf16 CPU, float32 otherwise), bfloat16 or float32; pin it so that every session's "
                        "builds of one table share it (and can resume each other's --save-partial shards)")
    p.add_argument("--root", default="sveb_data")
    p.add_argument("--exports", default="results/table4/exports")
    p.add_argument("--out", default="results/table4")
    p.add_argument("--partial", default=None,
                   help="sampled shards of builds not yet exported, carried across fresh clones: taken before a build "
                        "samples, written by --save-partial, removed once it is exported (default: OUT/partial; "
                        "'': off)")
    p.add_argument("--save-partial", action="store_true",
                   help="copy what each unexported build of --domains x --seeds (and its train build) has sampled "
                        "under ROOT to PARTIAL (to commit before a session ends); no sampling")
    size, train = PRESETS["powered"]
    for k, v in (("problems", size["problems"]), ("states", size["states_per_problem"]), ("rollouts", size["rollouts"]),
                 ("mc", BASE["mc"]), ("mc-extra", BASE["mc_extra"]), ("oversample", BASE["oversample"]),
                 ("max-tokens", BASE["sampling"].max_tokens), ("train-problems", train["problems"]),
                 ("train-states", train["states_per_problem"]), ("train-mc", train["mc"]),
                 ("seed", BASE["seed"]), ("train-seed", BASE["seed"]), ("min-novel-numbers", -1)):
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--seeds", default="", metavar="S,S,...",
                   help="benchmark seeds to sample and score, e.g. 0,1,2 (default: --seed); seeds of one config draw "
                        "disjoint problems; seed 0's export is EXPORTS/DOMAIN, seed k's EXPORTS/DOMAIN-seedk, and "
                        "every table pools each domain's exports found there; all seeds share the train build of "
                        "--train-seed (so ppo-1, probe and pacs train once)")
    p.add_argument("--min-acc", type=float, default=BASE["min_acc"])
    p.add_argument("--max-acc", type=float, default=BASE["max_acc"])
    p.add_argument("--no-step-pairs", dest="step_pairs", action="store_false",
                   help="cut states independently (default: in pairs t1 < t2 of one rollout, as the powered preset)")
    p.add_argument("--no-train", dest="train", action="store_false", help="skip the training builds (ppo-1 needs one)")
    p.add_argument("--trainings", type=int, default=3,
                   help="train each trained estimator (ppo-1, ppo-n, pacs, probe, probe-mc) this many times per "
                        "domain (training seeds seed, seed+1, ...; on the one train build) and test the mean over "
                        "them with the between-training spread in its SE (default 3; 1: the default training only)")
    p.add_argument("--from-exports", action="store_true",
                   help="score the stored per-state estimates (--estimates) on the exports' states and references: "
                        "no sampling, no estimator run, no engine")
    p.add_argument("--add", default="", metavar="NAMES",
                   help="comma-separated: score these estimators on the committed exports (no sampling), put their "
                        "per-state estimates into --estimates beside the stored ones (replacing their own earlier "
                        "cells) and write the tables as --from-exports does; their seconds are not added to the "
                        "timing tables, which stay the run's that sampled the domains")
    p.add_argument("--add-domains", default="", metavar="DOMAINS",
                   help="with --add: score them on these domains only (default: every domain of --domains); the "
                        "tables still show every domain")
    p.add_argument("--estimates", default="",
                   help="per-state estimates for --from-exports (default OUT/estimates.parquet)")
    p.add_argument("--allow-unequal-seeds", action="store_true",
                   help="pool a domain's seeds although their level or answer-type mix differs (p < 0.01); "
                        "table4.md then says so")
    p.add_argument("--allow-mixed-dtype", action="store_true",
                   help="pool a domain's seeds although they were sampled in different dtypes; table4.md says so")
    p.add_argument("--preset", choices=["sveb", "paper"], default="sveb",
                   help="paper: the Hista/Numca authors' protocol (G 32, one space cut per problem, full-budget "
                        "continuations, 20 screens in equal tiers; --max-tokens as given), into results/table4-paper")
    if p.parse_known_args(argv)[0].preset == "paper":
        p.set_defaults(rollouts=PAPER["rollouts"], states=1, train_states=1, mc=PAPER["mc"], mc_extra=PAPER["mc_extra"],
                       min_acc=PAPER["min_acc"], max_acc=PAPER["max_acc"], step_pairs=False,
                       exports="results/table4-paper/exports", out="results/table4-paper")
    a = p.parse_args(argv)
    if not all(x.isdigit() for x in a.seeds.replace(",", " ").split()):
        p.error(f"--seeds {a.seeds}: expected comma-separated seeds (non-negative integers), e.g. 0,1,2")
    if a.trainings < 1:
        p.error(f"--trainings {a.trainings}: expected 1 or more (1: the default training only)")
    a.source = SOURCES | dict(s.split("=", 1) for s in a.source)
    a.partial = str(Path(a.out) / "partial") if a.partial is None else a.partial
    return a


def main(argv: list[str] | None = None, engine=None, model_dir=None) -> Path:
    """`engine`, `model_dir`: a passed-in engine (tests: the scripted one) and the weights to hash. An error SVEB
    reports to a user (a bad source, a seed its source cannot fill) is one line, not a traceback."""
    from sveb.core.errors import SvebError
    from sveb.experiment.partial import PartialError
    try:
        return run(parse(argv), engine, model_dir)
    except (SvebError, PartialError) as e:
        raise SystemExit(f"table4: error: {e}") from None


if __name__ == "__main__":
    main()
