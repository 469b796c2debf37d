"""The refusals of a table over builds (sveb.score.pooling.pools calls `check` on each group): seeds that are not
replicates of one problem population (their level or answer-type mixes differ, sveb.score.composition) and parts
of different compute dtypes (the builds' sampling dtype from their manifests; the model-reading estimates' compute
dtype where `sveb eval` recorded it). A flag (`Allow`) lets either through, and the views then carry the note that
every table over them prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sveb.core import schema
from sveb.core.errors import EvalError
from sveb.score import composition
from sveb.store import Build


@dataclass(frozen=True)
class Allow:
    """What a table may mix when told so (`--allow-mixed-dtype`, `--allow-unequal-seeds`); the table then says so."""
    mixed_dtype: bool = False
    unequal_seeds: bool = False


def check(group: list, allow: Allow = Allow()) -> None:
    """One table's refusals (sveb.score.composition): its seeds' level and answer-type mixes must not differ
    (p < 0.01) and its builds must be sampled, and its model-reading estimates computed, in one dtype each."""
    what = f"{group[0].model}/{group[0].domain} ({', '.join(v.bdir.name for v in group)})"
    hidden = {f"{k[0]} {k[2]}" + (f" [{v.bdir.name}]" if len(group) > 1 else ""): computed_in(v.bdir, k)
              for v in group for k in v.est}
    notes = verdict(what, [v.build for v in group], [v.seeds[0] for v in group], allow, hidden,
                    [set(v.pid.tolist()) for v in group])
    for v in group:
        v.notes = list(dict.fromkeys([*v.notes, *notes]))


def check_builds(what: str, bdirs: list[Path], seeds: list, allow: Allow = Allow()) -> list[str]:
    """The same refusals for a table that pools build (or export) folders itself, as Table 4 does: every problem
    of each build, and the builds' sampling dtypes. Returns the notes the table must print."""
    return verdict(what, bdirs, seeds, allow, {}, [None] * len(bdirs))


def verdict(what: str, bdirs: list, seeds: list, allow: Allow, hidden: dict, keep: list) -> list[str]:
    """EvalError (one line, naming the flag) for the first refusal not allowed; else the notes of those allowed."""
    found = []
    if len(bdirs) > 1 and len(set(seeds)) > 1:
        rows = composition.composition(seeds, [problems_of(b, k) for b, k in zip(bdirs, keep)])
        found.append((composition.seed_refusal(what, rows), allow.unequal_seeds, "--allow-unequal-seeds"))
    sampled = {f"seed {s} [{b.name}]": Build.of(b).manifest.dtype for b, s in zip(bdirs, seeds)}
    found.append((composition.dtype_refusal(f"{what}: sampling", sampled), allow.mixed_dtype, "--allow-mixed-dtype"))
    found.append((composition.dtype_refusal(f"{what}: estimates", hidden), allow.mixed_dtype, "--allow-mixed-dtype"))
    notes = []
    for line, allowed, flag in found:
        if line and not allowed:
            raise EvalError(f"{line}; pass {flag} to pool them anyway (the table then says so)")
        if line:
            notes.append(f"{line} (let through by {flag})")
    return notes


def problems_of(bdir: Build | Path, keep: set | None = None) -> list[dict]:
    """A build's problems (those in `keep` when given: the ones with states), each as its level (from meta) and
    answer_type, for the composition test."""
    t = Build.of(bdir).table("problems", schema.PROBLEMS)
    out = []
    for pid, at, meta in zip(*(t.column(c).to_pylist() for c in ("problem_id", "answer_type", "meta"))):
        if keep is None or pid in keep:
            try:
                m = json.loads(meta or "{}")
            except json.JSONDecodeError:
                m = {}
            out.append({"answer_type": at, "level": m.get("level") if isinstance(m, dict) else None})
    return out


def computed_in(bdir: Path, key: tuple) -> str | None:
    """Where and in which dtype an estimate's model passes ran ("cpu-bfloat16"), as `sveb eval` records it beside
    the estimates of an estimator that reads the model (timings/KEY.json); None when not recorded."""
    path = bdir / "timings" / f"{key[0]}-{key[1]}-{key[2]}.json"
    try:
        got = json.loads(path.read_text()).get("compute")
    except (OSError, ValueError, AttributeError):
        return None
    return got if isinstance(got, str) else None
