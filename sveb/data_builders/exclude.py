"""`--exclude PATH`: problems a build must not draw, because an earlier build (an analysis already looked at) holds
them. A PATH is a build or export folder (its problems/ table), a folder searched for such folders (every one below
it), or a text file of problem ids (one a line; `#` comments). A problem is excluded when its id or its normalised
question matches one of them: ids are a hash of (domain, normalised question), so the text match only adds
safety against an id rule that changed (the committed exports' ids were checked against today's rule: all match).

The exclusion is applied after the seed slots are dealt (sveb.data_builders.seeds.partition_draw), so no other
seed's problems move; the build's problems fingerprint holds the excluded set's content (`identity`), not the paths.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sveb.core.errors import UsageError

ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class Exclusion:
    ids: frozenset
    questions: frozenset  # normalised (sveb.data_builders.normalise_question)
    builds: int           # build or export folders read (0 for id files)

    def __contains__(self, problem: dict) -> bool:
        from sveb.data_builders import normalise_question
        return problem["problem_id"] in self.ids or normalise_question(problem["question"]) in self.questions

    def __bool__(self) -> bool:
        return bool(self.ids or self.questions)


def _problem_tables(folder: Path) -> list[Path]:
    """The problems/ tables of a build folder, or of every build or export below a folder."""
    if (folder / "problems").is_dir():
        return [folder / "problems"]
    return sorted(p for p in folder.rglob("problems") if p.is_dir() and (p.parent / "manifest.json").exists())


def _read_table(table: Path) -> tuple[set, set]:
    import pyarrow.parquet as pq

    from sveb.data_builders import normalise_question
    ids, questions = set(), set()
    for shard in sorted(table.glob("part-*.parquet")):
        t = pq.read_table(shard, columns=["problem_id", "question"])
        ids.update(t.column("problem_id").to_pylist())
        questions.update(normalise_question(q) for q in t.column("question").to_pylist())
    return ids, questions


def _read_ids(path: Path) -> set:
    ids = set()
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if not ID.match(text):
            raise UsageError(f"--exclude {path} line {i}: {text[:40]!r} is not a problem id (16 hex digits); "
                             f"a file holds one id a line, or pass a build or export folder")
        ids.add(text)
    return ids


def read(paths: tuple[str, ...]) -> Exclusion:
    """Every problem the paths name; a one-line UsageError naming a path that is missing or holds none."""
    return _read(tuple(str(p) for p in paths), tuple(_stamp(Path(p)) for p in paths))


def _stamp(path: Path) -> tuple:
    """What keys the cache: a path's files' sizes and times (an export committed later is read again)."""
    if not path.exists():
        raise UsageError(f"--exclude {path}: no such file or directory")
    if path.is_file():
        st = path.stat()
        return (st.st_size, st.st_mtime_ns)
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns)
                 for t in _problem_tables(path) for f in sorted(t.glob("part-*.parquet")))


@lru_cache(maxsize=16)
def _read(paths: tuple[str, ...], stamps: tuple) -> Exclusion:
    ids, questions, builds = set(), set(), 0
    for text in paths:
        path = Path(text)
        if path.is_file():
            ids |= _read_ids(path)
            continue
        tables = _problem_tables(path)
        if not tables:
            raise UsageError(f"--exclude {path}: holds no build or export (no problems/ table in it or below it); "
                             f"pass a build or export folder, a folder of them, or a file of problem ids")
        for t in tables:
            i, q = _read_table(t)
            ids |= i
            questions |= q
        builds += len(tables)
    return Exclusion(frozenset(ids), frozenset(questions), builds)


def identity(paths: tuple[str, ...]) -> dict:
    """What the problems fingerprint keeps of --exclude: the excluded set's sizes and content hash, never the paths:
    the same folders give the same build wherever they lie, and a folder that gains an export gives another build
    (so a pre-registered run names a committed file of ids)."""
    ex = read(paths)
    h = hashlib.sha256()
    for part in (sorted(ex.ids), sorted(ex.questions)):
        h.update("\n".join(part).encode() + b"\0")
    return {"ids": len(ex.ids), "questions": len(ex.questions), "sha256": h.hexdigest()[:16]}
