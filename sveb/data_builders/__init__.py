"""Problem sources per domain: `builtin` (offline, seeded), or a dataset read through sveb/sources
(`hub`, a named source such as gsm8k or gsm8k=PATH, or a file/folder, optionally with --field mappings).

Every domain module exposes:
  HUB_ID, HUB_CONFIG, HUB_SPLIT     the dataset the paper's code used
  builtin(n, seed, split) -> list[dict]       offline procedural problems
  from_record(rec) -> dict                    one row of the dataset's own schema -> problem dict
                                              (raise SkipRow("reason") to skip it)
  prompt(problem) -> list[dict]               chat messages for the policy
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import random
import unicodedata
from typing import Any, Callable, Iterable

from sveb.errors import SvebError, UsageError

DOMAINS = ("number", "math", "science", "general", "programming")
log = logging.getLogger(__name__)


class SkipRow(Exception):
    """A dataset row that cannot become a problem; the message is the reason counted in the log."""


class SourceError(SvebError, RuntimeError):
    pass


def domain_module(domain: str):
    if domain not in DOMAINS:
        raise SourceError(f"--domain {domain}: unknown domain (known: {', '.join(DOMAINS)})")
    return importlib.import_module(f"sveb.data_builders.{domain}")


def normalise_question(question: str) -> str:
    """What makes two questions the same problem: Unicode form, case and whitespace do not count."""
    return " ".join(unicodedata.normalize("NFKC", question).lower().split())


def problem_id(domain: str, question: str) -> str:
    """Identity from (domain, normalised question) only, never the source string: the same question
    read from the hub and from a local file is one problem, so the train/test split and ppo-1's
    overlap check hold across sources."""
    return hashlib.sha256(f"{domain}\x00{normalise_question(question)}".encode()).hexdigest()[:16]


def split_of(pid: str) -> str:
    """Disjoint train/test halves by a hash bit of the problem id."""
    return "train" if int(pid[-1], 16) % 2 else "test"


def make_problem(domain: str, source: str, question: str, answer: str, answer_type: str,
                 tests: list | None = None, meta: dict | None = None) -> dict[str, Any]:
    return {
        "problem_id": problem_id(domain, question),
        "domain": domain,
        "source": source,
        "question": question,
        "answer": answer,
        "answer_type": answer_type,
        "tests": json.dumps(tests) if tests is not None else "",
        "meta": json.dumps(meta or {}, sort_keys=True),
    }


def sample_builtin(domain: str, n: int, seed: int, split: str, levels: dict[int, float],
                   make: Callable[[int, random.Random], dict]) -> list[dict]:
    """n distinct problems of the split from a seeded mix of levels; `make(level, rng)` builds one."""
    rng = random.Random(f"{domain}-builtin-{seed}")
    kept = [lv for lv, w in levels.items() if w > 0]
    weights = [levels[lv] for lv in kept]
    out, seen, tries = [], set(), 0
    while len(out) < n:
        tries += 1
        if tries > 100 * n + 10_000:  # finite problem spaces: say so instead of looping
            raise UsageError(f"builtin {domain}: only {len(out)} distinct {split} problems found, {n} asked")
        p = make(rng.choices(kept, weights)[0], rng)
        if split_of(p["problem_id"]) == split and p["problem_id"] not in seen:
            seen.add(p["problem_id"])
            out.append(p)
    return out


def _read_hub(mod) -> Iterable[tuple[str, dict]]:
    """(where, row) of a domain module's hub dataset (HUB_ID, HUB_CONFIG, HUB_SPLIT)."""
    from sveb.sources.files import read_hub
    for where, i, row in read_hub(mod.HUB_ID, mod.HUB_CONFIG, mod.HUB_SPLIT, "hub"):
        yield f"{where} row {i}", row


def load_problems(domain: str, source: str, n: int, seed: int, split: str, fields: tuple = (), min_tests: int = -1,
                  warn: Callable[[str], None] | None = None) -> tuple[list[dict], dict[str, int]]:
    """Up to n candidate problems of the split, seeded; also the count of skipped rows per reason.

    source: builtin | hub (the domain's paper dataset) | NAME | NAME=PATH | PATH (see sveb/sources);
    fields: ((key, column), ...) for a file with its own columns; min_tests: -1 = the source's default.
    Warnings (a gold that looks like a worked solution) go to `warn` before anything is sampled."""
    mod = domain_module(domain)
    if source == "builtin":
        if fields:
            raise SourceError("--field applies to a file source, not to --source builtin")
        return mod.builtin(n, seed, split), {}
    from sveb.sources.load import scan
    loaded = scan(domain, source, tuple(fields), min_tests)
    for w in loaded.warnings:
        (warn or log.warning)(w)
    problems = loaded.of_split(split)
    if not problems and loaded.splits:  # e.g. --split train on the test file of a dataset that ships both
        have = sorted({loaded.split(p) for p in loaded.problems})
        raise SourceError(f"--source {source}: holds no {split} rows (only {', '.join(have)}); pass the dataset's "
                          f"{split} file (its name says {split}, e.g. {split}.jsonl)")
    problems.sort(key=lambda p: p["problem_id"])
    random.Random(seed).shuffle(problems)
    return problems[:n], dict(loaded.skipped)
