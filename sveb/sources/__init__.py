"""Named problem sources: one small module per dataset, found by scanning this package.

A source module defines `SOURCE = Source(...)` (or `SOURCES = [...]`): the dataset's hub id, config and
split, its licence, the domain it belongs to, and `read(row) -> fields`, which turns one row of the
dataset's own schema into {question, answer, answer_type, tests, meta} (raise SkipRow("why") to skip).
Adding a dataset is adding one such file.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

# Which answer types a domain's prompt and filters are written for.
FITS = {"number": {"math"}, "math": {"math"}, "science": {"choice", "math"},
        "general": {"math", "choice", "string"}, "programming": {"code"}}


@dataclass(frozen=True)
class Source:
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

    def split_rule(self) -> str:
        return "own: " + "/".join(self.own_splits) if self.own_splits else "halves by id hash"

    def domains(self) -> list[str]:
        """Domains whose prompts fit this source's answer types, its own first."""
        fit = [d for d, kinds in FITS.items() if self.answer_types <= kinds and d != self.domain]
        return [self.domain] + fit

    def hub_label(self) -> str:
        return f"{self.hub_id} ({self.hub_config or 'default'}, {self.hub_split})"


@lru_cache(maxsize=1)
def registry() -> dict[str, Source]:
    out: dict[str, Source] = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        found = list(getattr(mod, "SOURCES", [])) + ([mod.SOURCE] if hasattr(mod, "SOURCE") else [])
        for src in found:
            if src.name in out:
                raise RuntimeError(f"two sources named {src.name}: {mod.__name__} and another module")
            out[src.name] = src
    return dict(sorted(out.items()))


def paper_source(domain: str) -> Source:
    """The dataset the paper used for a domain: what `--source hub` means."""
    return next(s for s in registry().values() if s.paper and s.domain == domain)
