"""What a build's config decides before anything is sampled: the flag checks, each stage's fingerprint,
the build's place in the root, the difficulty filter's sizes and the context the engine must hold."""

from __future__ import annotations

from pathlib import Path

from sveb import store
from sveb.core import schema
from sveb.core.config import BuildConfig, fingerprint
from sveb.core.errors import BuildError, did_you_mean
from sveb.core.models import model_slug, resolve
from sveb.data_builders import DOMAINS, declared, domain_module
from sveb.data_builders.exclude import identity as exclusion_identity
from sveb.data_builders.load import identity as source_identity
from sveb.data_builders.load import resolve as resolve_source
from sveb.data_builders.seeds import DRAW
from sveb.engines import EngineError, fingerprint_key, model_context
from sveb.sample.jobs import dtype_of
from sveb.sample.paper import choice_parts, fp_parts


def validate(cfg: BuildConfig) -> None:
    """Every build flag checked up front, with a one-line error naming the flag."""
    s = cfg.sampling
    if cfg.domain not in DOMAINS:
        raise BuildError(f"--domain {cfg.domain}: unknown domain{did_you_mean(cfg.domain, DOMAINS)}")
    checks = [
        (cfg.domain in DOMAINS, "--domain", cfg.domain, f"one of {', '.join(DOMAINS)}"),
        (cfg.split in ("test", "train"), "--split", cfg.split, "test or train"),
        (cfg.problems >= 1, "--problems", cfg.problems, "at least 1"),
        (cfg.oversample >= 1, "--oversample", cfg.oversample, "at least 1"),
        (cfg.rollouts >= 2, "--rollouts", cfg.rollouts, "at least 2 (a group needs others to compare with)"),
        (cfg.states_per_problem >= 1, "--states-per-problem", cfg.states_per_problem, "at least 1"),
        (cfg.mc >= 1, "--mc", cfg.mc, "at least 1"),
        (cfg.mc_extra >= 0, "--mc-extra", cfg.mc_extra, "at least 0"),
        (0 <= cfg.min_acc <= 1, "--min-acc", cfg.min_acc, "in [0, 1]"),
        (0 <= cfg.max_acc <= 1, "--max-acc", cfg.max_acc, "in [0, 1]"),
        (cfg.min_acc <= cfg.max_acc, "--min-acc", cfg.min_acc, f"at most --max-acc {cfg.max_acc}"),
        (cfg.min_novel_numbers >= -1, "--min-novel-numbers", cfg.min_novel_numbers, "-1 (auto) or at least 0"),
        (s.temperature > 0, "--temperature", s.temperature, "greater than 0"),
        (0 < s.top_p <= 1, "--top-p", s.top_p, "in (0, 1]"),
        (s.max_tokens >= 2, "--max-tokens", s.max_tokens, "at least 2 (a state is cut inside a response)"),
        (cfg.seed >= 0, "--seed", cfg.seed, "at least 0"),
        (cfg.batch_size >= 1, "--batch-size", cfg.batch_size, "at least 1"),
        (cfg.workers >= 1, "--workers", cfg.workers, "at least 1"),
        (cfg.tensor_parallel_size >= 1, "--tp", cfg.tensor_parallel_size, "at least 1"),
        (0 < cfg.gpu_memory_utilization <= 1, "--gpu-memory-utilization", cfg.gpu_memory_utilization, "in (0, 1]"),
        (cfg.screen >= 0, "--screen", cfg.screen, "at least 0"),
        (cfg.dtype in ("auto", "bfloat16", "float32"), "--dtype", cfg.dtype, "auto, bfloat16 or float32"),
    ]
    for ok, flag, value, need in checks:
        if not ok:
            raise BuildError(f"{flag} {value}: must be {need}")
    try:  # a registered name or module:Class (sveb.engines.registry); a plugin's module is imported here
        fingerprint_key(cfg)
    except EngineError as e:
        raise BuildError(str(e)) from None
    if cfg.exclude:  # a missing path or a bad id file fails here, before the engine starts
        exclusion_identity(tuple(cfg.exclude))
    if cfg.source != "builtin":  # a mistyped source fails here, before a build folder is made for it
        resolve_source(cfg.source, cfg.domain, tuple(cfg.fields))


def stage_fps(cfg: BuildConfig) -> dict[str, str]:
    v = schema.SCHEMA_VERSION
    # a local file counts by its bytes, not its path (sveb.data_builders.load.identity)
    source = source_identity(cfg.source, cfg.domain, tuple(cfg.fields))
    parts = ["problems", cfg.domain, source, cfg.split, cfg.problems * cfg.oversample, cfg.seed, v]
    if cfg.fields or cfg.min_tests >= 0:  # only when set, so builds made before these knobs keep their fingerprints
        parts.append({"fields": sorted(map(list, cfg.fields)), "min_tests": cfg.min_tests})
    parts.append(DRAW)  # how seeds draw their candidates (sveb.data_builders.seeds): an older draw is never reused
    if cfg.exclude:  # the excluded problems' content, not the paths; only when set, so other builds keep theirs
        parts.append({"exclude": exclusion_identity(tuple(cfg.exclude))})
    problems = fingerprint(*parts)
    rollouts = fingerprint("rollouts", problems, model_identity(cfg.model), cfg.sampling, cfg.rollouts, cfg.seed,
                           dtype_of(cfg), v, "fresh groups after a separate screen", engine_key(cfg),
                           *paper_fp_parts(cfg), *rule_marks(cfg, "rollouts"))
    states = fingerprint("states", rollouts, cfg.problems, cfg.min_acc, cfg.max_acc, min_novel(cfg),
                         cfg.states_per_problem, screen_size(cfg), v, *(["step pairs"] if cfg.step_pairs else []),
                         *choice_parts(cfg, "states"), *rule_marks(cfg, "states"))
    references = fingerprint("references", states, cfg.mc, cfg.mc_extra, v, *choice_parts(cfg, "references"))
    return {"problems": problems, "rollouts": rollouts, "states": states, "references": references}


def model_identity(model: str) -> str:
    """What of the model the rollouts fingerprint holds. A local model directory counts by its weights (sha256 of
    its weight files, as an export's card), not its path, as a local source counts by its bytes: moved, its builds
    keep their fingerprints (and request seeds); retrained in place, they change. Builtin names and hub ids are
    themselves."""
    from sveb.core.models import BUILTIN
    from sveb.store.export import cached_weights_hash, weight_files
    path = Path(model).expanduser()
    if model in BUILTIN or not path.is_dir() or not weight_files(path):
        return model  # a name, or no weights to hash (a tokenizer-only stand-in): itself, as before
    return "weights:" + cached_weights_hash(path)


def rule_marks(cfg: BuildConfig, stage: str) -> list[str]:
    """Revisions of the paper's rules that change what a build holds, on the first stage they change, and only
    for builds they apply to (the others keep their fingerprints): the number rule read as the authors' script
    reads it (13th session: before `\\box`, ints, the solution's integers excluded), applied where the paper's tiers
    screen with a number rule; the byte-safe token cut, wherever states are cut at a space."""
    marks = []
    if cfg.choice("tiers") == "paper" and min_novel(cfg) and stage == ("rollouts" if cfg.protocol == "paper"
                                                                     else "states"):
        marks.append("number rule 2")
    if cfg.choice("cut") == "space" and stage == "states":
        marks.append("token cut 2")
    return marks


def paper_fp_parts(cfg: BuildConfig) -> list:
    """The paper protocol's marks on the rollouts fingerprint (none for SVEB's: its builds keep their fingerprints)."""
    return fp_parts(cfg)


def engine_key(cfg: BuildConfig) -> str:
    """What of the engine decides the samples: vLLM and transformers draw different tokens for one seed, and
    transformers' padded batches change its numerics, so its batch size counts too. A resume with another engine
    is then another build, never a mix of two engines' samples under one fingerprint. Each engine declares it
    (sveb.engines.registry: "vllm", "hf/batch=64", "scripted", a plugin's template)."""
    return fingerprint_key(cfg)


def min_novel(cfg: BuildConfig) -> int:
    """Novel numbers a correct response must hold: the paper's filter on real data, for a domain that declares it
    (its Domain's `novel_numbers`: number's 4)."""
    d = declared().get(cfg.domain)
    if d is None or d.novel_numbers is None:
        return 0
    if cfg.min_novel_numbers >= 0:
        return cfg.min_novel_numbers
    return 0 if cfg.source == "builtin" else d.novel_numbers


def locate(cfg: BuildConfig, root: str | Path) -> Path:
    return store.build_dir(root, model_slug(cfg.model), cfg.domain, stage_fps(cfg)["references"])


def context_needed(cfg: BuildConfig, candidates: list[dict], tokenizer) -> int:
    """Prompt + --max-tokens of the longest candidate: the engine's max_model_len. A continuation of a
    state at t has t response tokens in its prompt and max_tokens - t to go, so it needs no more.
    A request the model cannot hold is an error now, never a silent cut later."""
    mod = domain_module(cfg.domain)
    longest, pid = max((len(tokenizer.encode_chat(mod.prompt(p))), p["problem_id"]) for p in candidates)
    need = longest + cfg.sampling.max_tokens
    if cfg.choice("continuation") == "full":  # a continuation: the prefix + the full budget again
        need += cfg.sampling.max_tokens
    if cfg.choice("cut") == "space":  # the prefix re-tokenised: a little slack
        need += 16
    limit = model_context(resolve(cfg.model))
    if limit is not None and need > limit:
        raise BuildError(f"problem {pid}: its prompt of {longest} tokens + --max-tokens {cfg.sampling.max_tokens} "
                         f"exceeds the model's context of {limit} tokens; lower --max-tokens")
    return need


def filter_open(cfg: BuildConfig) -> bool:
    """No difficulty filter at all: every candidate is kept in order, and nothing is screened."""
    return cfg.min_acc <= 0 and cfg.max_acc >= 1 and not min_novel(cfg)


def screen_size(cfg: BuildConfig) -> int:
    """Screening rollouts per candidate, drawn apart from the G rollouts estimators see (0: no filter)."""
    return 0 if filter_open(cfg) else cfg.screen
