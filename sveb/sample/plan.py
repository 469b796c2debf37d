"""`sveb plan`: the work, storage and time of a build plus its hidden-state extraction, before running it.

The arithmetic is pure (settings, lengths, architecture, throughput -> numbers); reading response lengths
from an existing build is the only I/O, in `measured_lengths`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from sveb.core.config import BuildConfig
from sveb.core.errors import UsageError
from sveb.data_builders import declared

# Bytes on disk, measured on the store's own writer (pyarrow defaults, the pipeline's shard sizes) with
# MATH-500 solutions as responses and the SmolLM2 tokenizer: a rollout row costs ~41 B plus ~2.85 B per
# response token (its prompt ids repeat within the group and compress to almost nothing); a state ~4.8 B per
# prefix token (its text); a reference row ~290 B (24 rewards). Hidden states: 2 bytes (bf16) per value per
# response token, stored uncompressed since 2026-11-26 (zlib kept ~93%, and cost most of a GPU pass).
ROLLOUT_ROW_BYTES = 41
ROLLOUT_TOKEN_BYTES = 2.85
STATE_PREFIX_BYTES = 4.8
REFERENCE_ROW_BYTES = 290

# Assumed generated tokens/s of one 80 GB GPU running vLLM with large batches, by parameters (billions);
# measure yours with a short build and pass --tok-per-s. A forward pass (hidden states) is assumed
# FORWARD_SPEEDUP times faster per token than decoding.
ASSUMED_TOK_PER_S = ((1.0, 20000), (2.0, 14000), (4.5, 9000), (9.0, 5000), (16.0, 2500), (float("inf"), 1000))
FORWARD_SPEEDUP = 5

SUMMED = ("candidates", "discarded", "rollouts", "screening_rollouts", "states", "continuations", "rollout_tokens",
          "continuation_tokens", "generated_tokens", "hidden_tokens", "rollouts_bytes", "states_references_bytes",
          "hidden_bytes")


@dataclass(frozen=True)
class Settings:
    problems: int = 3000          # kept per domain
    oversample: int = 4           # candidates per kept problem
    rollouts: int = 40            # G per kept problem
    screen: int = 8               # screening rollouts per candidate, apart from the G of a kept one
    states_per_problem: int = 2
    mc: int = 20
    mc_extra: int = 4
    max_tokens: int = 4096
    gpus: int = 1


@dataclass(frozen=True)
class Lengths:
    prompt: float      # mean prompt tokens
    response: float    # mean response tokens of a rollout
    remaining: float   # mean tokens a continuation generates: mean over states of T - t
    source: str        # "assumed" or "measured: ..."


def check(s: Settings) -> None:
    for name in ("problems", "oversample", "rollouts", "mc", "max_tokens", "gpus"):
        if getattr(s, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} {getattr(s, name)}: must be at least 1")
    if not 0 <= s.screen <= s.rollouts:
        raise UsageError(f"--screen {s.screen}: must be between 0 and --rollouts {s.rollouts}")
    if s.states_per_problem < 0 or s.mc_extra < 0:
        raise UsageError("--states-per-problem and --mc-extra must not be negative")


def assumed_lengths(domain: str, max_tokens: int) -> Lengths:
    """Mean (prompt, response) tokens when no build of the model exists: the domain's declared assumption (its
    `Domain.assumed_tokens`: an instruct model answering with a chain of thought, no thinking mode)."""
    prompt, response = declared()[domain].assumed_tokens
    response = min(response, max_tokens)
    # a state is a uniform cut t of a rollout of length T, so a continuation has about T/2 tokens left
    return Lengths(prompt, response, response / 2, "assumed")


def assumed_tok_per_s(params_b: float) -> int:
    return next(v for limit, v in ASSUMED_TOK_PER_S if params_b <= limit)


def domain_work(s: Settings, L: Lengths, hidden_size: int | None) -> dict:
    """Counts, tokens and bytes of one domain."""
    candidates = s.problems * s.oversample
    discarded = candidates - s.problems
    kept_rollouts = s.problems * s.rollouts
    screening = candidates * s.screen  # every candidate is screened apart from the G a kept problem then gets
    states = s.problems * s.states_per_problem
    continuations = states * (s.mc + s.mc_extra)
    rollout_tokens = (kept_rollouts + screening) * L.response
    continuation_tokens = continuations * L.remaining
    hidden_tokens = kept_rollouts * (L.prompt + L.response)  # one forward pass over each kept rollout
    prefix = L.response - L.remaining                         # mean t
    return {
        "candidates": candidates, "discarded": discarded, "rollouts": kept_rollouts, "screening_rollouts": screening,
        "states": states, "continuations": continuations,
        "mean_prompt_tokens": L.prompt, "mean_response_tokens": L.response, "mean_remaining_tokens": L.remaining,
        "lengths": L.source,
        "rollout_tokens": rollout_tokens, "continuation_tokens": continuation_tokens,
        "generated_tokens": rollout_tokens + continuation_tokens, "hidden_tokens": hidden_tokens,
        "rollouts_bytes": (kept_rollouts + screening) * (ROLLOUT_ROW_BYTES + ROLLOUT_TOKEN_BYTES * L.response),
        "states_references_bytes": states * (STATE_PREFIX_BYTES * prefix + REFERENCE_ROW_BYTES),
        # the shared pass (sveb.lm.hidden) keeps the last layer at the response positions and the critics'
        # input layer at every position, of the kept problems' rollouts
        "hidden_bytes": None if hidden_size is None
        else kept_rollouts * (L.prompt + 2 * L.response) * hidden_size * 2,  # 2 B a value, uncompressed
    }


def scoring_work(s: Settings, lengths: dict[str, Lengths], arch: dict | None, tok_per_s: float | None,
                 policy_params_b: float | None = None) -> dict:
    """What scoring every state with a model read as a scorer (a PRM for `prm`, a judge for `judge`) costs: one
    forward pass per state over its question and prefix (the format's few added tokens not counted), about
    2 x parameters FLOPs a token, at FORWARD_SPEEDUP x the scorer's decoding speed. That speed is the assumption for
    its size; or, with `tok_per_s` (the policy's measured rate), that rate scaled by policy / scorer parameters (a
    forward pass costs about its parameter count a token), or taken as it is where either size is unknown."""
    tokens = {d: s.problems * s.states_per_problem * (L.prompt + L.response - L.remaining) for d, L in lengths.items()}
    total = sum(tokens.values())
    params = arch.get("params_b") if arch else None
    if tok_per_s and params and policy_params_b:
        rate, how = tok_per_s * policy_params_b / params, "scaled from the given rate by parameters"
    elif tok_per_s:
        rate, how = tok_per_s, "given"
    else:
        rate = assumed_tok_per_s(params) if params else None
        how = "assumed" if rate else "unknown"
    return {"model": arch, "tokens": tokens, "total_tokens": total,
            "flops": 2 * params * 1e9 * total if params else None,
            "time_s": total / (rate * FORWARD_SPEEDUP * s.gpus) if rate else None,
            "tok_per_s": rate, "rate": how}


def make_plan(s: Settings, lengths: dict[str, Lengths], arch: dict | None, tok_per_s: float | None,
              measured: dict | None = None) -> dict:
    """The whole plan: one row per domain, the totals, and the time on s.gpus GPUs. `measured`
    (measured_gpu_rates) replaces the assumed forward speed where its model shape is this model's, and adds a
    critic epoch's and pacs's time over the build's rollouts."""
    check(s)
    hidden = arch.get("hidden_size") if arch else None
    rows = {d: domain_work(s, L, hidden) for d, L in lengths.items()}
    total = {k: None if any(r[k] is None for r in rows.values()) else sum(r[k] for r in rows.values())
             for k in SUMMED}
    if tok_per_s is not None:
        speed = f"given: {tok_per_s:g} tokens/s per GPU"
    elif arch and arch.get("params_b"):
        tok_per_s = assumed_tok_per_s(arch["params_b"])
        speed = f"assumed for {arch['params_b']:.3g}B parameters: {tok_per_s} tokens/s per GPU (vLLM, one 80 GB GPU)"
    else:
        speed = "unknown model size: pass --tok-per-s"
    time = None
    if tok_per_s:
        gen = total["generated_tokens"] / (tok_per_s * s.gpus)
        fwd = total["hidden_tokens"] / (tok_per_s * FORWARD_SPEEDUP * s.gpus)
        time = {"generation_s": gen, "hidden_s": fwd, "total_s": gen + fwd}
    if time and measured and arch and (arch.get("hidden_size"), arch.get("layers")) == (measured["hidden_size"],
                                                                                       measured["layers"]):
        tokens = total["hidden_tokens"] / s.gpus
        time.update(hidden_s=tokens / measured["hidden_tok_per_s"], measured=measured,
                    critic_epoch_s=tokens * measured["critic_epoch_s_per_token"],
                    pacs_s=tokens * measured["pacs_s_per_token"])
        time["total_s"] = time["generation_s"] + time["hidden_s"]
    return {"settings": asdict(s), "model": arch, "throughput": speed, "tok_per_s": tok_per_s,
            "forward_speedup": FORWARD_SPEEDUP, "domains": rows, "total": total, "time": time}


def measured_lengths(root: str | Path, model_slug: str, domain: str) -> Lengths | None:
    """Mean lengths from the newest complete build of this model and domain under root; None if none."""
    import pyarrow.compute as pc

    from sveb import store  # pyarrow
    builds = [b for b in store.list_builds(root) if b.parent.parent.name == model_slug and b.parent.name == domain
              and store.load_manifest(b).complete]
    if not builds:
        return None
    b = builds[-1]
    rollouts = store.read_table(b / "rollouts")
    states = store.read_table(b / "states")
    if rollouts.num_rows == 0 or states.num_rows == 0:
        return None
    prompt = pc.mean(pc.list_value_length(rollouts["prompt_token_ids"])).as_py()
    response = pc.mean(pc.list_value_length(rollouts["response_token_ids"])).as_py()
    remaining = pc.mean(pc.subtract(states["T"], states["t"])).as_py()
    cap = BuildConfig.from_manifest(store.read_manifest(b)).sampling.max_tokens
    return Lengths(prompt, response, remaining,
                   f"measured: build {b.name} ({rollouts.num_rows} rollouts, {states.num_rows} states, "
                   f"max_tokens {cap})")


def human(n: float | None, unit: str = "") -> str:
    """1234567 -> '1.23 M'; bytes with unit='B' -> '1.23 GB'."""
    if n is None:
        return "?"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G" if unit else "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {prefix}{unit}"
    return f"{n:.0f} {unit}".strip()


def duration(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


# Settings field -> `sveb build` flag; a flag is spelled only where the plan departs from the build's default
BUILD_FLAGS = {"problems": "--problems", "oversample": "--oversample", "rollouts": "--rollouts", "screen": "--screen",
               "states_per_problem": "--states-per-problem", "mc": "--mc", "mc_extra": "--mc-extra",
               "max_tokens": "--max-tokens"}


def build_defaults() -> dict:
    """`sveb build`'s defaults of the planned settings (BuildConfig's: the CLI and the config agree, tested)."""
    b = BuildConfig()
    return {k: b.sampling.max_tokens if k == "max_tokens" else getattr(b, k) for k in BUILD_FLAGS}


def build_command(model: str, domain: str, s: Settings) -> str:
    """The `sveb build` command that makes the planned build of one domain (`--ray` where several GPUs share it:
    one engine per GPU)."""
    import shlex
    base = build_defaults()
    flags = [f"{flag} {getattr(s, k)}" for k, flag in BUILD_FLAGS.items() if getattr(s, k) != base[k]]
    return " ".join(["sveb build --model", shlex.quote(model), "--domain", domain, *flags] + ["--ray"] * (s.gpus > 1))


def measured_gpu_rates(dirs: list[Path] | None = None) -> dict | None:
    """The newest GPU scaling sweep (`tests/gpu_smoke.py --sizes`, a JSON under results/gpu/ of the working
    directory or of SVEB's checkout) at its largest size: the model shape, the hidden pass's tokens/s, and a
    critic epoch's and pacs's (fit + scores) seconds per token; None without one."""
    import json
    if dirs is None:
        dirs = [Path.cwd() / "results" / "gpu", Path(__file__).resolve().parents[2] / "results" / "gpu"]
    files = sorted({f.resolve() for d in dirs if Path(d).is_dir() for f in Path(d).glob("*.json")},
                   key=lambda f: f.stat().st_mtime, reverse=True)
    for f in files:
        try:
            j = json.loads(f.read_text())
            meta, last = j["meta"], j["sizes"][-1]
            steps = last["steps"]
            if not meta.get("gpu"):
                continue  # a CPU sweep (tiny shape) says nothing of a GPU's speed
            return {"source": str(f), "gpu": meta["gpu"], "hidden_size": meta["hidden_size"], "layers": meta["layers"],
                    "rollouts": last["rollouts"], "hidden_tok_per_s": float(steps["hidden"]["tokens_per_s"]),
                    "critic_epoch_s_per_token": steps["critic_fit"]["us_per_token"] / 1e6,
                    "pacs_s_per_token": steps["pacs"]["us_per_token"] / 1e6}
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            continue  # not a sweep's JSON (the smoke test's rows, a profile)
    return None
