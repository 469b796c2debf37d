"""`--source` resolution and loading: the registry of dataset readers, and every row of a named source, a hub
dataset or a file becomes a problem or a counted skip reason; `load_problems` is what a build draws from. Problems
keep where they came from: `source` is the real file (or hub id, config and split), meta keeps the dataset's own
id and metadata plus the row number."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import json
import logging
import pkgutil
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import sveb.data_builders as package
from sveb.core.errors import brief
from sveb.data_builders import FITS, SkipRow, Source, SourceError, domain_module, make_problem, split_of
from sveb.data_builders import fields as fieldmap
from sveb.data_builders.exclude import read as read_exclusions
from sveb.data_builders.files import data_files, read_hub, read_local
from sveb.data_builders.seeds import SLOT_MIN, dataset_slots, partition_draw

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def registry() -> dict[str, Source]:
    """Every dataset reader of the package by its --source name: the modules that define SOURCE or SOURCES."""
    out: dict[str, Source] = {}
    for info in pkgutil.iter_modules(package.__path__):
        mod = importlib.import_module(f"{package.__name__}.{info.name}")
        found = list(getattr(mod, "SOURCES", [])) + ([mod.SOURCE] if hasattr(mod, "SOURCE") else [])
        for src in found:
            if src.name in out:
                raise RuntimeError(f"two sources named {src.name}: {mod.__name__} and another module")
            out[src.name] = src
    return dict(sorted(out.items()))


def paper_source(domain: str) -> Source:
    """The dataset the paper used for a domain: what `--source hub` means."""
    return next(s for s in registry().values() if s.paper and s.domain == domain)


@dataclass
class Spec:
    """What a --source string names: a registered source read from the hub or from a path, or a file with --field."""
    text: str
    source: Source | None          # None: a file read through --field
    path: Path | None              # None: the hub
    bare: bool = False             # a plain path read with the domain's paper schema (no name, no --field)


@dataclass
class Loaded:
    spec: Spec
    domain: str
    problems: list[dict]           # in file order, duplicates dropped
    skipped: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    rows: int = 0                  # rows read, kept or not
    splits: dict[str, str] = field(default_factory=dict)  # problem_id -> the dataset's own split, where it has one
    by_hash: int = 0               # problems whose split is the id-hash half (the dataset ships no split for them)

    def split(self, p: dict) -> str:
        return self.splits.get(p["problem_id"]) or split_of(p["problem_id"])

    def of_split(self, split: str) -> list[dict]:
        return [p for p in self.problems if split == "all" or self.split(p) == split]

    def split_rule(self) -> str:
        """How --split picks rows here, for `sveb ls problems`."""
        if self.by_hash:
            rest = "; the dataset's own splits for the rest" if self.splits else ""
            return f"halves by id hash for {self.by_hash} problems from files whose names say no split{rest}"
        return "the dataset's own splits" if self.splits else "halves by id hash (the dataset ships no train split)"


def file_split(where: str, names) -> str | None:
    """The split a data file's name says it holds (test.jsonl, train-00000-of-00001.parquet), else None."""
    name = Path(where).name.lower()
    hits = [s for s in names if re.search(rf"(^|[^a-z]){s}([^a-z]|$)", name)]
    return hits[0] if len(hits) == 1 else None


def _own_split(spec: Spec, where: str, rec: dict) -> str | None:
    src = spec.source
    if src is None or spec.bare or not src.own_splits:
        return None
    if spec.path is None:  # a hub row: its label ends with the hub split
        return where.rsplit(":", 1)[1]
    if src.row_split is not None:
        return src.row_split(rec)
    return file_split(where, src.own_splits)


def _hub_rows(src: Source):
    if not src.hub_id:
        raise SourceError(f"--source {src.name}: has no hub copy; pass a local file: --source {src.name}=PATH")
    for split in src.own_splits or (src.hub_split,):
        yield from read_hub(src.hub_id, src.hub_config, split, src.name)


def resolve(text: str, domain: str, fields: tuple = ()) -> Spec:
    reg = registry()
    if text == "hub":
        spec = Spec(text, paper_source(domain), None)
    elif text in reg:
        spec = Spec(text, reg[text], None)
    elif Path(text).exists():
        spec = Spec(text, None if fields else paper_source(domain), Path(text), bare=not fields)
    elif "=" in text and text.split("=", 1)[0] in reg:
        name, path = text.split("=", 1)
        if not Path(path).exists():
            raise SourceError(f"--source {text}: no such file or directory: {path}")
        spec = Spec(text, reg[name], Path(path))
    else:
        guess = difflib.get_close_matches(text.split("=", 1)[0], list(reg), n=1)
        hint = f" (did you mean {guess[0]}?)" if guess else ""
        raise SourceError(f"--source {text}: no such file or directory, nor a source name{hint}; "
                          f"use builtin, hub, a path, NAME or NAME=PATH (see `sveb ls sources`)")
    if fields and spec.source is not None:
        raise SourceError(f"--field applies to a plain file or folder, not to --source {text} "
                          f"(a named source knows its own columns)")
    if spec.source is not None and not spec.source.answer_types <= FITS[domain]:
        fit = ", ".join(spec.source.domains())
        raise SourceError(f"--domain {domain} does not fit --source {text} "
                          f"({'/'.join(sorted(spec.source.answer_types))} answers); use --domain {fit}")
    return spec


def identity(text: str, domain: str, fields: tuple = ()) -> str:
    """What a build's fingerprint keeps of --source: a builtin or hub source by its name; a local file or folder by
    its reader and the SHA-256 of its data files (names relative to it, and bytes). One dataset is then one build,
    with the same draws, wherever it lies, and an edited file is another build, never a stale resume."""
    spec = resolve(text, domain, fields) if text != "builtin" else None
    if spec is None or spec.path is None:
        return text
    reader = "fields" if spec.source is None else "paper" if spec.bare else spec.source.name
    stamp, folder = [], spec.path.is_dir()
    for f in data_files(spec.path):  # its errors name the path as given
        st = f.stat()
        name = f.relative_to(spec.path).as_posix() if folder else ""
        stamp.append((name, str(f.resolve()), st.st_size, st.st_mtime_ns))
    return f"{reader}:sha256={_digest(tuple(stamp))}"


@lru_cache(maxsize=32)
def _digest(stamp: tuple) -> str:
    """SHA-256 over (relative name, bytes) of each file; the absolute path, size and mtime in `stamp` key the
    cache, so a file edited in place is hashed again."""
    h = hashlib.sha256()
    for name, path, _, _ in stamp:
        h.update(name.encode() + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:32]


def default_domain(text: str) -> str | None:
    """The domain a --source names by itself (a registered name, or NAME=PATH), else None."""
    reg = registry()
    if text in reg:  # a name wins over a same-named folder, as in resolve(); use ./NAME for the folder
        return reg[text].domain
    name = text.split("=", 1)[0]
    if "=" not in text or name not in reg or Path(text).exists():
        return None
    path = Path(text.split("=", 1)[1])
    by_rows = reg[name].domain_of(path) if reg[name].domain_of is not None and path.exists() else None
    return by_rows or reg[name].domain


def looks_worked(answer: str) -> bool:
    """A gold that is a worked solution rather than a final answer."""
    return "####" in answer or "\n" in answer.strip() or len(answer.split()) > 12


def _worked_warning(problems: list[dict], spec: Spec) -> str | None:
    golds = [p["answer"] for p in problems if p["answer_type"] in ("math", "string")]
    worked = [a for a in golds if looks_worked(a)]
    if not worked or len(worked) < 0.1 * len(golds):
        return None
    return (f"--source {spec.text}: {len(worked)} of {len(golds)} gold answers look like worked solutions "
            f"(long text or '####'), e.g. {worked[0][:70]!r}; a response is graded against this whole text, so "
            f"almost nothing will count as correct. Map a final-answer column with --field answer=COLUMN, or use "
            f"a named source that extracts the answer (sveb ls sources).")


def _hint(spec: Spec, first: dict | None) -> str:
    if first is None:
        return ""
    cols = set(first)
    like = [s.name for s in registry().values() if s.columns and set(s.columns) <= cols and s is not spec.source]
    if spec.bare and like:
        return f"; its columns look like {like[0]}: try --source {like[0]}={spec.path}"
    if spec.path is not None:
        return (f"; its columns are {', '.join(sorted(map(str, cols)))[:300]}: map them with "
                f"--field question=COLUMN --field answer=COLUMN")
    return ""


def _min_tests(fields: dict, min_tests: int, spec: Spec) -> int:
    if min_tests >= 0:
        return min_tests
    return spec.source.min_tests if spec.source is not None else 1


def _n_tests(f: dict) -> int:
    return int(f.get("meta", {}).get("n_asserts", len(f.get("tests") or [])))


def scan(domain: str, text: str, fields: tuple = (), min_tests: int = -1) -> Loaded:
    """Every row of the source, read and de-duplicated (all splits); raises SourceError if none is usable."""
    spec = resolve(text, domain, fields)
    src = spec.source
    read: Callable[[dict], dict] = src.read if src is not None else fieldmap.reader(fields, domain)
    if spec.path is None:
        rows = _hub_rows(src)
    else:
        rows = read_local(spec.path)
    need = _min_tests(dict(fields), min_tests, spec)
    out = Loaded(spec, domain, [])
    seen, checked, first = set(), set(), None
    for where, i, rec in rows:
        out.rows += 1
        try:
            if isinstance(rec, SkipRow):
                raise rec
            if not isinstance(rec, dict):
                raise SkipRow("row is not an object")
            first = first or rec
            if fields and where not in checked:  # each file's columns, once
                checked.add(where)
                missing = fieldmap.missing_columns(fields, rec)
                if missing:
                    raise SourceError(f"{where}: --field names column '{missing[0]}', which this file does not have "
                                      f"(columns: {', '.join(map(str, rec))})")
            f = read(rec)
            if src is not None and not src.answer_types and f["answer_type"] not in FITS[domain]:
                raise SkipRow(f"{f['answer_type']} answer does not fit --domain {domain}")
            if f["answer_type"] == "code" and _n_tests(f) < need:
                raise SkipRow(f"fewer than {need} test cases")
            meta = dict(f.get("meta") or {})
            meta.setdefault("row", i)
            if src is not None and not spec.bare:
                meta.setdefault("dataset", src.name)
            p = make_problem(domain, where, f["question"], f["answer"], f["answer_type"], f.get("tests"), meta)
        except SkipRow as e:
            out.skipped[str(e)] += 1
            continue
        except SourceError:
            raise
        except Exception as e:  # a bug or an unforeseen row shape: name the row
            raise SourceError(f"{where} row {i}: cannot read this row ({type(e).__name__}: {brief(e)})") from None
        if p["problem_id"] in seen:
            out.skipped["duplicate question"] += 1
            continue
        seen.add(p["problem_id"])
        out.problems.append(p)
        own = _own_split(spec, where, rec)
        if own is not None:
            out.splits[p["problem_id"]] = own
        elif src is not None and src.own_splits and not spec.bare:
            out.by_hash += 1
    if not out.problems:
        skipped = ", ".join(f"{v} {k}" for k, v in out.skipped.most_common()) or "no rows"
        raise SourceError(f"--source {text}: no usable {domain} rows (skipped: {skipped}){_hint(spec, first)}")
    warning = _worked_warning(out.problems, spec)
    if warning:
        out.warnings.append(warning)
    return out


def load_problems(domain: str, source: str, n: int, seed: int, split: str, fields: tuple = (), min_tests: int = -1,
                  warn: Callable[[str], None] | None = None, ask: str | None = None,
                  exclude: tuple[str, ...] = ()) -> tuple[list[dict], dict[str, int]]:
    """Seed `seed`'s n candidate problems of the split; also the count of skipped rows per reason.

    source: builtin | hub (the domain's paper dataset) | NAME | NAME=PATH | PATH (see `sveb ls sources`);
    fields: ((key, column), ...) for a file with its own columns; min_tests: -1 = the source's default.
    Seeds are a stratified partition of the source's split (sveb.data_builders.seeds): disjoint, each with the
    split's mix of strata (meta "level"); a seed whose slot is too small for n is an error naming `ask` (how n was
    made, e.g. "--problems 8 x --oversample 4"). Warnings (a gold that looks like a worked solution) go to `warn`
    before anything is sampled. exclude: --exclude paths (sveb.data_builders.exclude), left out of the seed's slot."""
    mod = domain_module(domain)
    say = warn or log.warning
    gone = read_exclusions(tuple(exclude)) if exclude else None
    if source == "builtin":
        if fields:
            raise SourceError("--field applies to a file source, not to --source builtin")
        return mod.builtin(n, seed, split, ask=ask, **({"exclude": gone} if gone else {})), {}
    loaded = scan(domain, source, tuple(fields), min_tests)
    for w in loaded.warnings:
        say(w)
    problems = loaded.of_split(split)
    if not problems and loaded.splits:  # e.g. --split train on the test file of a dataset that ships both
        have = sorted({loaded.split(p) for p in loaded.problems})
        raise SourceError(f"--source {source}: holds no {split} rows (only {', '.join(have)}); pass the dataset's "
                          f"{split} file (its name says {split}, e.g. {split}.jsonl)")
    src = loaded.spec.source
    name = src.stratum if src is not None else "level"
    strata: dict[str, list[dict]] = {}
    for p in map(dict, problems):
        meta = json.loads(p["meta"])
        meta["level"] = meta.get(name, "none")  # the stratum, under one key for every source (pooling reads it)
        if name != "level":
            meta["stratum"] = name
        p["meta"] = json.dumps(meta, sort_keys=True)
        strata.setdefault(str(meta["level"]), []).append(p)
    key = (domain, src.name if src is not None else "fields", split)
    slots = dataset_slots(split, len(problems))
    if slots == 1:  # too small to deal into seeds: each seed its own sample of the whole split, all of it at most
        n = min(n, sum(p not in gone for p in problems) if gone else len(problems))
        if seed > 0:
            say(f"--seed {seed}: --source {source} holds {len(problems)} {split} problems, under {2 * SLOT_MIN}, "
                f"too few to deal into disjoint seeds: this seed's candidates overlap other seeds' (use a larger "
                f"source for replicate seeds)")
    out = partition_draw(strata, {k: len(v) for k, v in strata.items()}, n, seed, key, slots,
                         f"--source {source}", ask, name=name, exclude=gone)
    return out, dict(loaded.skipped)
