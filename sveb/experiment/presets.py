"""The experiments' build sizes: `sveb demo --preset` and Table 4 (benchmarks/table4.py, the powered preset)."""

from __future__ import annotations

from sveb.core.config import BuildConfig, SamplingConfig
from sveb.sample.paper import PRESET as PAPER
from sveb.sample.paper import preset_for

BASE = dict(model="smollm2-135m", source="builtin", oversample=3, mc=20, mc_extra=4, min_acc=0.1, max_acc=0.8,
            seed=0, sampling=SamplingConfig(max_tokens=256))
# Each preset: the benchmark build's size, and the disjoint `train` build the trained estimators learn on.
PRESETS = {
    # `make demo`: every estimator in 11 minutes on 2 AVX2 cores (fp32; ~5 expected with avx512_bf16) (18 states: a
    # demonstration, not evidence). 8 + 8 problems took 19 minutes on AVX2 (docs/timings.md, 2026-11-28)
    "demo": (dict(problems=6, rollouts=16, states_per_problem=3),
             dict(problems=4, states_per_problem=1, mc=2, mc_extra=0)),
    # `--quick`: a first look at a domain
    "quick": (dict(problems=6, rollouts=16, states_per_problem=2),
              dict(problems=6, states_per_problem=1, mc=2, mc_extra=0)),
    # `make powered`: 50 problems x 4 states (two pairs t1 < t2 of one rollout) per seed, run on seeds 0,1,2: 600
    # states for paired tests that survive Holm; the train build is big enough for the probe's MC labels
    "powered": (dict(problems=50, rollouts=16, states_per_problem=4, step_pairs=True),
                dict(problems=60, states_per_problem=2, mc=4, mc_extra=0)),
    # `--preset paper`: the Hista/Numca authors' protocol (sveb/sample/paper.py: G = 32, one space cut per problem in
    # the first rollout, full-budget continuations, 20 screens, equal tiers), 4 problems per tier; the demo's
    # 256-token budget (theirs is 4096: `sveb build --preset paper`)
    "paper": (dict(PAPER, problems=12, oversample=4), dict(problems=6, mc=2, mc_extra=0)),
}


# vLLM without compilation for the small presets: their decoding is a few minutes, so the compile a machine's first
# vLLM start pays (about 57 s on 2 AVX-512 cores, 25 s to start with a warm cache, 14 s eager) costs more than eager's
# slower decoding (14%); the samples are of the same distribution, not the same tokens (docs/timings.md)
EAGER = {"demo": True, "quick": True}


def preset_configs(preset: str, domain: str, engine: str, seeds: list[int] | None = None, eager: bool | None = None
                   ) -> tuple[list[BuildConfig], BuildConfig]:
    """A preset's benchmark build of each seed (default: seed 0) and its one `train` build (seed 0); `eager`:
    vLLM without compilation (default: EAGER's choice for the preset)."""
    size, train = PRESETS[preset]
    if preset == "paper":  # the domain's tiers (programming's lowest starts above 0)
        size = {**size, **{k: preset_for(domain)[k] for k in ("min_acc", "max_acc")}}
    config = {**BASE, **size, "eager": EAGER.get(preset, False) if eager is None else eager}
    tests = [BuildConfig(domain=domain, engine=engine, **{**config, "seed": s}) for s in seeds or [0]]
    return tests, BuildConfig(domain=domain, engine=engine, split="train", **{**config, **train})
