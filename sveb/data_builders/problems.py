"""The shared vocabulary of every problem builder and dataset reader (sveb.data_builders): the problem record
(`make_problem`), its id and train/test split, the errors (`SkipRow` for a row that cannot become a problem,
`SourceError`), the domains, and `Source`, the description of one public dataset."""


from __future__ import annotations

import hashlib
import importlib
import json
import random
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sveb.core.errors import SvebError, UsageError
from sveb.data_builders.seeds import SLOTS, level_pools, partition_draw

PACKAGE = "sveb.data_builders"  # the domains' modules live there, beside this one


@dataclass(frozen=True)
class Domain:
    """One domain, declared once: its module (beside this one) holds `DOMAIN = Domain(...)` at top level with its
    builtin generator, prompt and dataset hooks. Every list of domains (`DOMAINS`, `FITS`, `sveb plan`'s lengths,
    the hista-json verifiers, table columns) derives from the declared ones, and every rule that differs between
    domains reads a field here (none reads a domain's name), so adding a domain is adding a module."""
    name: str                       # the module's name and --domain
    # the answer types its prompt and filters are written for (graders: sveb.rewards); `--field` reads them too:
    # "code" needs --field tests, "choice" allows --field options, "string" grades a non-numeric answer as text
    answer_types: frozenset
    assumed_tokens: tuple           # (prompt, response) tokens `sveb plan` assumes before a build of it exists
    verifier: str = "general"       # the Hista authors' verifier for it (`--format hista-json` export)
    order: int = 100                # its place in lists and table columns
    # the paper's screening tiers ((low, high] accuracy, equal problems each); None: the paper's three
    # (sveb.sample.paper.TIERS)
    paper_tiers: tuple | None = None
    # the paper's novel-numbers filter (sveb.sample.rules.min_novel): the distinct numbers a correct response must
    # hold beyond the question's and the answer's on a dataset source under --min-novel-numbers -1 (auto; builtin
    # problems: 0); None: the filter does not apply to the domain, whatever the flag
    novel_numbers: int | None = None


@lru_cache(maxsize=1)
def declared() -> dict[str, Domain]:
    """name -> Domain of every module of this package that declares one, in declared order. A module is read
    for the line `DOMAIN = Domain(` before it is imported, so the dataset readers are not imported here."""
    import pkgutil
    from pathlib import Path
    here = Path(__file__).parent  # the package's folder: its modules are the candidates
    found = []
    for m in pkgutil.iter_modules([str(here)]):
        path = here / f"{m.name}.py"
        if path.is_file() and "\nDOMAIN = Domain(" in path.read_text(encoding="utf-8"):
            d = importlib.import_module(f"{PACKAGE}.{m.name}").DOMAIN
            if not isinstance(d, Domain) or d.name != m.name:
                raise TypeError(f"{path}: DOMAIN must be a Domain named '{m.name}'")
            found.append(d)
    return {d.name: d for d in sorted(found, key=lambda d: (d.order, d.name))}


def __getattr__(name: str):
    """DOMAINS (names, in order) and FITS (name -> answer types), derived from the declared domains on first use
    (the package hands this on as its own module __getattr__)."""
    if name == "DOMAINS":
        return tuple(declared())
    if name == "FITS":
        return {n: set(d.answer_types) for n, d in declared().items()}
    raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}")


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
                   make: Callable[[int, random.Random], dict], ask: str | None = None, exclude=None) -> list[dict]:
    """Seed `seed`'s n problems of the split, `levels` (level -> weight) the mix; `make(level, rng)` builds one.

    Each level's source is a finite pool (sveb.data_builders.seeds.level_pools); its split is dealt into the
    split's seed slots, and the seed takes each level's share of n from its own slot (seeds.partition_draw):
    seeds are disjoint and hold the same level mix. A slot too small for its share is an error, never a repeat.
    `exclude`: problems left out of the seed's slot (sveb.data_builders.exclude)."""
    if split not in SLOTS:
        raise UsageError(f"--split {split}: builtin {domain} has a test and a train split")
    kept = {lv: w for lv, w in levels.items() if w > 0}
    pools = level_pools(domain, kept, make)
    strata = {lv: [p for p in pools[lv] if split_of(p["problem_id"]) == split] for lv in kept}
    out = partition_draw(strata, kept, n, seed, (domain, "builtin", split), SLOTS[split], f"builtin {domain}", ask,
                         exclude=exclude)
    return [dict(p) for p in out]  # copies: the pools are kept for the process


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
    # The meta field seeds stratify on (sveb.data_builders.seeds): its level, subject or type; a row without it
    # is in stratum "none" (one stratum where no row has it).
    stratum: str = "level"

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
