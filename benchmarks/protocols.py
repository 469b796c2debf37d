"""The protocol sensitivity study (issue 31; docs/protocols.md): SVEB's preset vs the paper's on number and
programming, and on number one of the paper's choices at a time (cut rule, continuation budget, G, the MCS@k
definition, screening tiers); every estimator, both evaluation protocols -> results/protocols/.
This script holds the flags; the experiment is sveb/experiment/protocols.py, its tables protocols_files.py.

Setting by setting: each is sampled, exported, scored and the tables rewritten before the next is sampled, so
the exports and results can be committed one by one. Resumable: a setting whose export exists in EXPORTS is not
sampled again, and scores already computed are kept (sveb.evaluate caches them). Writes scores.csv (setting x
estimator x protocol: MAE [CI], Δ sq err vs grpo [CI], p,
Holm p, verdict, SVEB's verdict, flips_vs_sveb, and the paired change against SVEB's preset), protocols.md,
estimates.parquet (every cell's per-state estimates) and timing.json (each build's stage seconds; with
"shards found" where the run found some already sampled (carried in, shared, an earlier run's): the
seconds are then the rest's alone).

    python benchmarks/protocols.py                         # the whole study (make protocols); rerun to resume
    python benchmarks/protocols.py --settings number-cut   # one setting (and SVEB's preset it is compared with)
    python benchmarks/protocols.py --from-exports          # the tables again from the stored estimates: seconds
    python benchmarks/protocols.py --save-partial          # a setting still sampling: its shards so far into
                                                           # results/protocols/partial/ (commit them; the next
                                                           # run, in any clone, resumes from them)
    python benchmarks/protocols.py --engine scripted --domains number --source number=FILE ...  # tests: FILE of
                                                           # "What is a + b?" rows (tests/conftest.py)

Sizes (defaults): SVEB's preset 50 problems x 4 states in step pairs (200 states, G 16, 8 screens in
[0.1, 0.8]); the paper's preset 200 problems x 1 state (G 32, 20 screens, equal tiers); the one-state cut 100
problems; every other single choice SVEB's size. Every build of a domain draws from the same CANDIDATES
problems (oversample = CANDIDATES // problems), so that the single choices can share SVEB's draws.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sveb.core.errors import SvebError
from sveb.experiment.partial import PartialError
from sveb.experiment.presets import BASE, PRESETS
from sveb.experiment.protocols import CHOICES, run

DOMAINS = ("number", "programming")
# programming 800: the paper's programming tiers are four, (0, 0.07] first (sveb/sample/paper.py); (0.07, 0.17]
# holds ~8% of the builtin test problems on the default model (8-sample screens of Table 4's programming seed 0,
# 2026-11-27), so its 50 problems need ~625 of the 896
CANDIDATES = {"number": 1200, "programming": 800}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default=" ".join(DOMAINS))
    p.add_argument("--choice-domains", default="number", help="domains that get the single-choice settings")
    p.add_argument("--choices", default=" ".join(CHOICES), help=f"single choices to switch (of {', '.join(CHOICES)})")
    p.add_argument("--settings", default="", help="only these settings, e.g. number-cut,number-G (with SVEB's "
                                                  "preset of their domain); default: all")
    p.add_argument("--source", action="append", default=[], help="DOMAIN=SOURCE (default: builtin)")
    p.add_argument("--candidates", action="append", default=[],
                   help="DOMAIN=N candidates every build of the domain draws from (default: "
                        + ", ".join(f"{k}={v}" for k, v in CANDIDATES.items()) + ")")
    p.add_argument("--estimators", default="", help="comma-separated (default: every registered one)")
    p.add_argument("--model", default=BASE["model"])
    p.add_argument("--engine", default="vllm", help="vllm | hf | scripted (tests: a source it answers)")
    p.add_argument("--dtype", default="auto",
                   help="compute dtype of every build: auto (bfloat16 on a GPU or an AVX-512 bf16 CPU, float32 "
                        "otherwise), bfloat16 or float32. It is in the shards' fingerprints: pin it to resume "
                        "another machine's partial shards")
    p.add_argument("--root", default="sveb_data/protocols")
    p.add_argument("--exports", default="results/protocols/exports")
    p.add_argument("--out", default="results/protocols")
    p.add_argument("--partial", default=None,
                   help="sampled shards of settings not yet exported, carried across fresh clones: taken before a "
                        "setting is sampled, written by --save-partial, removed once it is exported (default: "
                        "OUT/partial; '': off)")
    p.add_argument("--save-partial", action="store_true",
                   help="copy what each unexported setting has sampled under ROOT to PARTIAL (to commit before a "
                        "session ends); no sampling")
    size, train = PRESETS["powered"]
    for k, v in (("problems", size["problems"]), ("states", size["states_per_problem"]),
                 ("rollouts", size["rollouts"]), ("choice-problems", 100), ("paper-problems", 200),
                 ("paper-rollouts", 32), ("mc", BASE["mc"]), ("mc-extra", BASE["mc_extra"]),
                 ("max-tokens", BASE["sampling"].max_tokens), ("train-problems", train["problems"]),
                 ("train-states", train["states_per_problem"]), ("train-mc", train["mc"]),
                 ("train-oversample", BASE["oversample"]), ("seed", BASE["seed"]), ("min-novel-numbers", -1)):
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--min-acc", type=float, default=BASE["min_acc"])
    p.add_argument("--max-acc", type=float, default=BASE["max_acc"])
    p.add_argument("--no-step-pairs", dest="step_pairs", action="store_false",
                   help="SVEB's preset cuts states independently (default: in pairs t1 < t2, as the powered preset)")
    p.add_argument("--no-train", dest="train", action="store_false", help="skip the training builds (ppo-1 needs one)")
    p.add_argument("--from-exports", action="store_true",
                   help="the tables from OUT/estimates.parquet and the exports: no sampling, no estimator")
    a = p.parse_args(argv)
    split = lambda s: s.replace(",", " ").split()  # noqa: E731
    a.domains, a.choice_domains, a.choices, a.settings = (split(x) for x in (a.domains, a.choice_domains, a.choices,
                                                                            a.settings))
    a.estimators = split(a.estimators)
    bad = [c for c in a.choices if c not in CHOICES]
    if bad:
        p.error(f"--choices {bad[0]}: one of {', '.join(CHOICES)}")
    a.source = dict(s.split("=", 1) for s in a.source)
    a.partial = str(Path(a.out) / "partial") if a.partial is None else a.partial
    a.candidates = CANDIDATES | {k: int(v) for k, v in (s.split("=", 1) for s in a.candidates)}
    missing = [d for d in a.domains if d not in a.candidates]
    if missing:
        p.error(f"--candidates {missing[0]}=N: no default for that domain")
    return a


def main(argv: list[str] | None = None, engine=None, model_dir=None) -> Path:
    """`engine`, `model_dir`: a passed-in engine (tests: the scripted one) and the weights to hash."""
    try:
        return run(parse(argv), engine, model_dir)
    except (PartialError, SvebError) as e:  # a user's error: one line, not a traceback
        raise SystemExit(f"protocols: {e}") from None


if __name__ == "__main__":
    main()
