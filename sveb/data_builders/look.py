"""What `sveb ls sources` and `sveb ls problems` print: look at a source before paying for rollouts."""

from __future__ import annotations

import json

from sveb.core.errors import UsageError
from sveb.data_builders import SourceError, domain_module, split_of
from sveb.data_builders.load import Loaded, default_domain, registry, scan

SPLITS = ("test", "train", "all")


def source_rows() -> list[tuple[str, str]]:
    """`sveb ls sources`: (name, a block of lines) per source, so that the listing fits 80 columns."""
    rows = []
    for s in registry().values():
        also = ", ".join(s.domains()[1:])
        rows.append((s.name + (" *" if s.paper else ""), f"{s.domain}" + (f" (also fits {also})" if also else "")
                     + f"; licence: {s.licence}\nhub: {s.hub_label()}\n--split test/train: {s.split_rule()}"
                     + (f"\n{s.about}" if s.about else "")))
    return rows


SOURCE_NOTES = ("--split: 'own' reads the dataset's own test and train splits (a local file's split from its name, "
                "test.* or train.*); the others keep the half of the rows whose id hash says test (or train).\n"
                "* the paper's dataset for its domain (--source hub). Local copy: --source NAME=PATH (a file or "
                "folder). Also: --source builtin (offline, the default), or --source PATH --field question=COL "
                "--field answer=COL.")


def _problems(domain: str, source: str, split: str, fields: tuple, min_tests: int, n: int) -> tuple[Loaded | None,
                                                                                                         list[dict]]:
    if source == "builtin":
        if fields:
            raise SourceError("--field applies to a file source, not to --source builtin")
        mod = domain_module(domain)
        splits = ("test", "train") if split == "all" else (split,)
        return None, [p for s in splits for p in mod.builtin(n, 0, s, ask=f"-n {n}")]
    loaded = scan(domain, source, fields, min_tests)
    return loaded, loaded.of_split(split)


def resolve_domain(domain: str | None, source: str) -> str:
    return domain or default_domain(source) or "number"


def problem_json(p: dict, split: str | None = None) -> str:
    row = {k: p[k] for k in ("problem_id", "domain", "source", "question", "answer", "answer_type")}
    row["split"] = split or split_of(p["problem_id"])
    row["tests"] = json.loads(p["tests"]) if p["tests"] else None
    row["meta"] = json.loads(p["meta"])
    return json.dumps(row, ensure_ascii=False)


def _short(text: str, k: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= k else one[:k - 3] + "..."


def problem_lines(domain: str, source: str, split: str, fields: tuple = (), min_tests: int = -1, n: int | None = None,
                  as_json: bool = False) -> tuple[list[str], list[str]]:
    """(lines for stdout, warnings). JSON: one object per problem of the split (the first n if n is given)."""
    if split not in SPLITS:
        raise UsageError(f"--split {split}: expected test, train or all")
    loaded, problems = _problems(domain, source, split, fields, min_tests, n or 5)
    warnings = loaded.warnings if loaded else []
    if as_json:
        return [problem_json(p, loaded.split(p) if loaded else None)
                for p in (problems if n is None else problems[:n])], warnings
    n = 5 if n is None else n
    lines = [f"source: {source}   domain: {domain}   split: {split}"]
    if loaded is not None:
        per = {s: sum(loaded.split(p) == s for p in loaded.problems) for s in ("test", "train")}
        lines.append(f"rows read: {loaded.rows}   loaded: {len(loaded.problems)} (test {per['test']}, "
                     f"train {per['train']}; split: {loaded.split_rule()})")
        skips = ", ".join(f"{v} {k}" for k, v in loaded.skipped.most_common())
        lines.append(f"skipped: {skips or 'none'}")
    lines.append(f"first {min(n, len(problems))} of {len(problems)} problems in split {split}:")
    for i, p in enumerate(problems[:n], 1):
        meta = json.loads(p["meta"])
        keys = ("task_id", "entry_point", "unique_id", "id", "Record ID", "level", "row")
        ids = {k: meta[k] for k in keys if k in meta}
        gold = p["answer"] if p["answer_type"] != "code" else \
            f"{len(json.loads(p['tests']))} tests" + (f", {meta['n_asserts']} asserts" if "n_asserts" in meta else "")
        lines.append(f"[{i}] {_short(p['question'], 110)}")
        lines.append(f"    gold: {_short(gold, 80)} ({p['answer_type']})   {json.dumps(ids, ensure_ascii=False)}")
    return lines, warnings
