"""The confirmatory probe test, as pre-registered in results/confirm-2/plan.md: build, train, score, test.
This script holds the flags; the experiment is sveb/experiment/confirm.py.

Resumable: rerun the same command after a stop. A seed whose export is in OUT/exports is not sampled again; a
seed cut off by a session's end is kept with `make confirm ARGS=--save-partial` (its shards into OUT/partial, to
commit), and the next run, in a fresh clone too, samples only the rest; the
train build is Table 4's number train build (the same config, so the same fingerprint: its export is found under
results/ and restored, else it is sampled under ROOT); estimates are cached per build. Writes OUT/result.md,
OUT/result.json and OUT/estimates.parquet (the per-state estimates the test read, to commit), from which
`--from-estimates OUT/estimates.parquet --out DIR` redoes the test with the exports alone: no sampling, no model.

    make confirm        # = SVEB_CPU_DTYPE=float32 .venv/bin/python benchmarks/confirm.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sveb.experiment.confirm import run
from sveb.experiment.presets import BASE

PLAN = Path("results/confirm-2")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="3,4,5,6,7", help="number test slots to sample (the plan's: 3-7)")
    p.add_argument("--problems", type=int, default=75, help="problems kept per seed (the plan's: 75)")
    p.add_argument("--oversample", type=int, default=2, help="candidates per kept problem (the plan's: 2, so 150)")
    p.add_argument("--exclude", action="append", default=None,
                   help=f"problems never drawn (repeatable; default: the plan's {PLAN}/excluded.txt)")
    p.add_argument("--trainings", type=int, default=3, help="probe training seeds 0..N-1 (the plan's: 3)")
    p.add_argument("--train-export", default="", help="an export of the plan's train build (Table 4's number train; "
                   "default: the one under --results whose fingerprint is the plan's, else it is sampled under ROOT)")
    p.add_argument("--results", default="results", help="where to look for that export")
    p.add_argument("--dtype", default="float32", help="compute dtype of sampling and hidden states (the plan's)")
    p.add_argument("--model", default=BASE["model"])
    p.add_argument("--engine", default="vllm")
    p.add_argument("--root", default="sveb_data/confirm-2", help="a root of its own: the probe finds its train "
                   "build there, and only that one")
    p.add_argument("--out", default=str(PLAN))
    p.add_argument("--partial", default=None,
                   help="sampled shards of seeds not yet exported, carried across fresh clones: taken before a seed "
                        "samples, written by --save-partial, removed once it is exported (default: OUT/partial)")
    p.add_argument("--save-partial", action="store_true",
                   help="copy what each unexported seed (and the train build, if sampled here) has sampled under "
                        "ROOT to --partial, to commit before a session ends; nothing is sampled or scored")
    p.add_argument("--from-estimates", metavar="FILE", default=None,
                   help="redo the test from a saved estimates file (OUT/estimates.parquet, written by a full run) "
                        "and the exports beside it, writing result.md/.json to --out: no sampling, no estimator")
    a = p.parse_args(argv)
    a.exclude = a.exclude or [str(PLAN / "excluded.txt")]
    a.partial = a.partial if a.partial is not None else str(Path(a.out) / "partial")
    return a


def main(argv: list[str] | None = None, engine=None, model_dir=None, override: dict | None = None) -> Path:
    """`engine`, `model_dir`, `override`: a passed-in engine, the weights to hash and config fields (tests)."""
    from sveb.core.errors import SvebError
    from sveb.experiment.partial import PartialError
    a = parse(argv)
    a.override = override
    try:
        return run(a, engine, model_dir)
    except (SvebError, PartialError) as e:
        raise SystemExit(f"confirm: error: {e}") from None


if __name__ == "__main__":
    print(main())
