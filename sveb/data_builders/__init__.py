"""Problems: the shared vocabulary of every problem builder and dataset reader in this package.

Here: the problem record (`make_problem`), its id and train/test split, the errors (`SkipRow` for a row that
cannot become a problem, `SourceError`), the domains, and `Source`, the description of one public dataset.
Beside it, importing only this vocabulary (and each other downward):
  number, math, science, general, programming   one module per domain:
      HUB_ID, HUB_CONFIG, HUB_SPLIT             the dataset the paper's code used (written there only)
      builtin(n, seed, split) -> list[dict]     offline procedural problems (seeds disjoint)
      from_record(rec) -> dict                  one row of the dataset's own schema -> problem dict
                                                (raise SkipRow("reason") to skip it)
      prompt(problem) -> list[dict]             chat messages for the policy
  boxed, rows                                   text helpers the domains and readers share
  gsm8k, math500, arc, gpqa, mmlu, mbpp, humaneval, paper, hista
                                                dataset readers: each defines `SOURCE = Source(...)` (or
                                                `SOURCES = [...]`); adding a dataset is adding one such file
  files, fields, load, look                     reading rows (files, hub), --field mappings, `--source`
                                                resolution and `load_problems`, `sveb ls sources` and `sveb ls problems`
"""

from __future__ import annotations

import hashlib
import importlib
import json
import random
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

from sveb.core.errors import SvebError, UsageError

@dataclass(frozen=True)
class Domain:
    """One domain, declared once: its module (beside this one) holds `DOMAIN = Domain(...)` at top level with its
    builtin generator, prompt and dataset hooks. Every list of domains (`DOMAINS`, `FITS`, `sveb plan`'s lengths,
    the hista-json verifiers, table columns) derives from the declared ones, so adding a domain is adding a module."""
    name: str                       # the module's name and --domain
    answer_types: frozenset         # the answer types its prompt and filters are written for (graders: sveb.rewards)
    assumed_tokens: tuple           # (prompt, response) tokens `sveb plan` assumes before a build of it exists
    verifier: str = "general"       # the Hista authors' verifier for it (`--format hista-json` export)
    order: int = 100                # its place in lists and table columns


@lru_cache(maxsize=1)
def declared() -> dict[str, Domain]:
    """name -> Domain of every module of this package that declares one, in declared order. A module is read
    for the line `DOMAIN = Domain(` before it is imported, so the dataset readers are not imported here."""
    import pkgutil
    from pathlib import Path
    found = []
    for m in pkgutil.iter_modules(__path__):
        path = Path(__path__[0]) / f"{m.name}.py"
        if path.is_file() and "\nDOMAIN = Domain(" in path.read_text(encoding="utf-8"):
            d = importlib.import_module(f"{__name__}.{m.name}").DOMAIN
            if not isinstance(d, Domain) or d.name != m.name:
                raise TypeError(f"{path}: DOMAIN must be a Domain named '{m.name}'")
            found.append(d)
    return {d.name: d for d in sorted(found, key=lambda d: (d.order, d.name))}


def __getattr__(name: str):
    """DOMAINS (names, in order) and FITS (name -> answer types), derived from the declared domains on first use."""
    if name == "DOMAINS":
        return tuple(declared())
    if name == "FITS":
        return {n: set(d.answer_types) for n, d in declared().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class SkipRow(Exception):
    """A dataset row that cannot become a problem; the message is the reason counted in the log."""


class SourceError(SvebError, RuntimeError):
    pass


def domain_module(domain: str):
    if domain not in declared():
        raise SourceError(f"--domain {domain}: unknown domain (known: {', '.join(declared())})")
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
                   make: Callable[[int, random.Random], dict], warn: Callable[[str], None] | None = None,
                   ask: str | None = None) -> list[dict]:
    """n distinct problems of the split from a seeded mix of levels; `make(level, rng)` builds one.

    Seeds of one (domain, split, n) draw disjoint problems, by sequential exclusion: seed s draws from its own
    stream exactly as seed 0 draws from its, skipping every problem seeds 0..s-1 drew (so seed 0 is the plain
    draw, and seed s differs from its plain draw only where it overlapped). Should the problems no earlier seed
    drew run out, the seed goes on with earlier seeds' problems and says so through `warn` (see seed_shortfall)."""
    taken: set[str] = set()
    for s in range(seed + 1):
        out, reused = _builtin_draw(domain, n, s, split, levels, make, taken)
        taken.update(p["problem_id"] for p in out)
    if reused and warn is not None:
        warn(seed_shortfall(seed, f"builtin {domain}", len(taken), n, split, reused, ask, about=True))
    return out


def _builtin_draw(domain: str, n: int, seed: int, split: str, levels: dict[int, float],
                  make: Callable[[int, random.Random], dict], taken: set[str]) -> tuple[list[dict], int]:
    """One seed's draw, skipping `taken` while the stream still yields others; also how many it had to repeat."""
    rng = random.Random(f"{domain}-builtin-{seed}")
    kept = [lv for lv, w in levels.items() if w > 0]
    weights = [levels[lv] for lv in kept]
    out, seen, tries, last, fresh_only = [], set(), 0, 0, bool(taken)
    while len(out) < n:
        tries += 1
        if fresh_only and (tries - last > 20 * n + 2_000 or tries > 100 * n + 10_000):
            fresh_only, tries = False, 0  # what no earlier seed drew ran out (or all but gone): go on with theirs
        if tries > 100 * n + 10_000:  # finite problem spaces: say so instead of looping
            raise UsageError(f"builtin {domain}: only {len(out)} distinct {split} problems found, {n} asked")
        p = make(rng.choices(kept, weights)[0], rng)
        pid = p["problem_id"]
        if split_of(pid) == split and pid not in seen and not (fresh_only and pid in taken):
            seen.add(pid)
            out.append(p)
            last = tries
    return out, len(seen & taken)


def disjoint_draw(problems: list, n: int, seed: int) -> tuple[list, int]:
    """Seed `seed`'s n draws from a pool, by sequential exclusion; also how many repeat an earlier seed's.

    Seed s shuffles the pool with random.Random(s), as every seed did before seeds were made disjoint, and takes the
    first n that none of seeds 0..s-1 took: seed 0 is the plain shuffle's first n, seed s differs from it only where
    it overlapped an earlier seed. Only when the pool holds fewer than (s + 1) x n does seed s fill up with earlier
    seeds' problems (in its own order, after every fresh one)."""
    taken: set[int] = set()
    picked, fresh = [], 0
    for s in range(seed + 1):
        order = list(range(len(problems)))
        random.Random(s).shuffle(order)  # the same permutation as shuffling the pool itself
        new = [i for i in order if i not in taken][:n]
        picked, fresh = new + [i for i in order if i in taken][:n - len(new)], len(new)
        taken.update(picked)
    return [problems[i] for i in picked], len(picked) - fresh


def seed_shortfall(seed: int, where: str, usable: int, n: int, split: str, reused: int, ask: str | None,
                   about: bool = False) -> str:
    """One line for a seed whose candidates repeat earlier seeds' problems because the source ran out."""
    fit = max(usable // n, 1) - 1
    enough = "seed 0 only" if fit == 0 else f"seeds 0-{fit}"
    earlier = "seed 0" if seed == 1 else f"seeds 0-{seed - 1}"
    return (f"--seed {seed}: {where} holds {'about ' if about else ''}{usable} usable {split} problems, enough for "
            f"{enough} at {ask or f'{n} candidates a seed'}; {reused} of this seed's {n} candidates repeat problems "
            f"of {earlier} (seeds of one config draw disjoint problems while the source lasts: use a lower --seed, "
            f"fewer candidates or a larger source)")


@dataclass(frozen=True)
class Source:
    """One public dataset: where it lives on the hub, its licence and domain, and `read(row) -> fields`, which
    turns one row of its own schema into {question, answer, answer_type, tests, meta} (raise SkipRow("why"))."""

    name: str                       # the --source name
    domain: str                     # its default --domain
    hub_id: str
    hub_config: str | None
    hub_split: str
    licence: str
    read: Callable[[dict], dict]    # one row -> {question, answer, answer_type, tests?, meta?}
    answer_types: frozenset = frozenset({"math"})
    columns: tuple = ()             # columns that identify a file of this dataset (for hints)
    min_tests: int = 1              # default --min-tests (code sources)
    about: str = ""                 # one line for `sveb ls sources`
    paper: bool = False             # one of the paper's five datasets (what `--source hub` means)
    # The splits the dataset ships (hub split names = ours): --split test/train read them. Without: halves by id hash.
    own_splits: tuple = ()
    row_split: Callable[[dict], str | None] | None = None  # a file holding every split: a row's split, from the row
    # Rows whose answer type is decided per row (answer_types empty: each row must fit --domain, else it is skipped),
    # and the domain a file names by its rows where no --domain is given (e.g. the authors' verifier field).
    domain_of: Callable[[Any], str | None] | None = None

    def split_rule(self) -> str:
        return "own: " + "/".join(self.own_splits) if self.own_splits else "halves by id hash"

    def domains(self) -> list[str]:
        """Domains whose prompts fit this source's answer types, its own first."""
        fit = [n for n, d in declared().items() if self.answer_types <= d.answer_types and n != self.domain]
        return [self.domain] + fit

    def hub_label(self) -> str:
        if not self.hub_id:
            return f"none (local files only: --source {self.name}=PATH)"
        return f"{self.hub_id} ({self.hub_config or 'default'}, {self.hub_split})"
