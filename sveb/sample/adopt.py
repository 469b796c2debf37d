"""A new build starts from the shards of a build beside it that shares its early stages. The build folder is named
by the last stage's fingerprint, so a changed `--mc`, or a revision of a later stage's rule, is a new folder; the
candidates, screens, rollouts and states it shares with an earlier build need not be sampled again. Only shards
are copied, and only from a build whose manifest records the same fingerprint for their stage; the pipeline then
checks every shard's own fingerprint as on any resume, so a shard that does not fit is sampled afresh."""

from __future__ import annotations

import shutil
from pathlib import Path

from sveb import store

# table -> the stage whose fingerprint its shards derive from
TABLES = {"candidates": "problems", "screens": "rollouts", "rollouts": "rollouts", "states": "states"}


def adopt(bdir: Path, fps: dict[str, str]) -> tuple[Path, int] | None:
    """Copy into the new build `bdir` the shards of the sibling build sharing the most stages with it; (that
    build, shards copied), or None when none shares its rollouts."""
    if (bdir / "manifest.json").exists() or not bdir.parent.is_dir():
        return None
    best, best_tables = None, []
    for sib in sorted(p for p in bdir.parent.iterdir() if p.is_dir() and p != bdir):
        try:
            theirs = store.load_manifest(sib).fingerprints
        except store.StoreError:
            continue
        if not isinstance(theirs, dict) or theirs.get("rollouts") != fps["rollouts"]:
            continue
        tables = [t for t, stage in TABLES.items() if theirs.get(stage) == fps[stage]]
        if len(tables) > len(best_tables):
            best, best_tables = sib, tables
    if best is None:
        return None
    n = 0
    for table in best_tables:
        for part in sorted((best / table).glob("part-*.parquet")):
            (bdir / table).mkdir(parents=True, exist_ok=True)
            shutil.copy2(part, bdir / table / part.name)
            n += 1
    return best, n
