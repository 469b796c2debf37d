"""Problem sources per domain: `builtin` (offline, seeded), `hub` (datasets.load_dataset) or a local file/dir.

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
import random
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

DOMAINS = ("number", "math", "science", "general", "programming")


class SkipRow(Exception):
    """A dataset row that cannot become a problem; the message is the reason counted in the log."""


class SourceError(RuntimeError):
    pass


def domain_module(domain: str):
    if domain not in DOMAINS:
        raise SourceError(f"--domain {domain}: unknown domain (known: {', '.join(DOMAINS)})")
    return importlib.import_module(f"sveb.data_builders.{domain}")


def problem_id(domain: str, source: str, question: str) -> str:
    return hashlib.sha256(f"{domain}\x00{source}\x00{question}".encode()).hexdigest()[:16]


def split_of(pid: str) -> str:
    """Disjoint train/test halves by a hash bit of the problem id."""
    return "train" if int(pid[-1], 16) % 2 else "test"


def make_problem(domain: str, source: str, question: str, answer: str, answer_type: str,
                 tests: list | None = None, meta: dict | None = None) -> dict[str, Any]:
    return {
        "problem_id": problem_id(domain, source, question),
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
            raise ValueError(f"builtin {domain}: only {len(out)} distinct {split} problems found, {n} asked")
        p = make(rng.choices(kept, weights)[0], rng)
        if split_of(p["problem_id"]) == split and p["problem_id"] not in seen:
            seen.add(p["problem_id"])
            out.append(p)
    return out


def _read_local(path: Path) -> Iterable[tuple[str, dict]]:
    """(position, row) of every row of a file or of every data file under a directory."""
    import pyarrow.parquet as pq
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".parquet", ".jsonl", ".json"))
        if not files:
            raise SourceError(f"--source {path}: no .parquet, .jsonl or .json files found")
    elif path.suffix not in (".parquet", ".jsonl", ".json"):
        raise SourceError(f"--source {path}: not a .parquet, .jsonl or .json file")
    else:
        files = [path]
    for f in files:
        if f.suffix == ".parquet":
            n = 0
            for batch in pq.ParquetFile(f).iter_batches(batch_size=1024):  # bounded memory on big shards
                for row in batch.to_pylist():
                    n += 1
                    yield f"{f} row {n}", row
        elif f.suffix == ".jsonl":
            with open(f, "rb") as fh:
                for lineno, raw in enumerate(fh, 1):
                    # a bad line is skipped and counted, not fatal: one broken row must not stop a build
                    try:
                        line = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        yield f"{f}:{lineno}", SkipRow("line is not valid UTF-8")
                        continue
                    if line.strip():
                        try:
                            yield f"{f}:{lineno}", json.loads(line)
                        except json.JSONDecodeError:
                            yield f"{f}:{lineno}", SkipRow("line is not valid JSON")
        else:
            try:
                data = json.loads(f.read_bytes().decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise SourceError(f"{f}: not valid UTF-8 JSON ({e})") from None
            rows = data if isinstance(data, list) else data.get("data", data.get("rows", []))
            for i, row in enumerate(rows, 1):
                yield f"{f} item {i}", row


def _read_hub(mod) -> Iterable[tuple[str, dict]]:
    try:
        import datasets
        ds = datasets.load_dataset(mod.HUB_ID, mod.HUB_CONFIG, split=mod.HUB_SPLIT)
    except Exception as e:  # the hub raises many kinds; all mean "not reachable here"
        raise SourceError(
            f"cannot load {mod.HUB_ID} from the Hugging Face hub ({type(e).__name__}); "
            f"download it and pass --source <file or dir>, or use --source builtin") from None
    for i, row in enumerate(ds):
        yield f"{mod.HUB_ID} row {i}", row


def load_problems(domain: str, source: str, n: int, seed: int, split: str) -> tuple[list[dict], dict[str, int]]:
    """Up to n candidate problems of the split, seeded; also the count of skipped rows per reason."""
    mod = domain_module(domain)
    if source == "builtin":
        return mod.builtin(n, seed, split), {}
    if source != "hub" and not Path(source).exists():
        raise SourceError(f"--source {source}: no such file or directory (use builtin, hub, or a path)")
    rows = _read_hub(mod) if source == "hub" else _read_local(Path(source))
    problems, skipped, seen = [], Counter(), set()
    for where, rec in rows:
        try:
            if isinstance(rec, SkipRow):
                raise rec
            if not isinstance(rec, dict):
                raise SkipRow("row is not an object")
            p = mod.from_record(rec)
        except SkipRow as e:
            skipped[str(e)] += 1
            continue
        except Exception as e:  # a bug or an unforeseen row shape: name the row
            raise SourceError(f"{where}: cannot read this {domain} row ({type(e).__name__}: {e})") from None
        if p["problem_id"] in seen:
            skipped["duplicate question"] += 1
            continue
        seen.add(p["problem_id"])
        if split_of(p["problem_id"]) == split:
            problems.append(p)
    problems.sort(key=lambda p: p["problem_id"])
    random.Random(seed).shuffle(problems)
    return problems[:n], dict(skipped)
