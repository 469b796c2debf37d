"""The refusals of a table over builds (sveb.score.pooling.pools calls `check` on each group): seeds that are not
replicates of one problem population (their level or answer-type mixes differ, sveb.score.composition) and parts
of different compute dtypes (the builds' sampling dtype from their manifests; the model-reading estimates' compute
dtype where `sveb eval` recorded it). A flag (`Allow`) lets either through, and the views then carry the note that
every table over them prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sveb import store
from sveb.core import schema
from sveb.core.errors import EvalError
from sveb.score import composition


@dataclass(frozen=True)
class Allow:
    """What a table may mix when told so (`--allow-mixed-dtype`, `--allow-unequal-seeds`); the table then says so."""
    mixed_dtype: bool = False
    unequal_seeds: bool = False


def check(group: list, allow: Allow = Allow()) -> None:
    """One table's refusals (sveb.score.composition): its seeds' level and answer-type mixes must not differ
    (p < 0.01) and its builds must be sampled, and its model-reading estimates computed, in one dtype each."""
    what = f"{group[0].model}/{group[0].domain} ({', '.join(v.bdir.name for v in group)})"
    found = []
    if len(group) > 1 and len({v.seeds[0] for v in group}) > 1:
        rows = composition.composition([v.seeds[0] for v in group], [_problems(v) for v in group])
        found.append((composition.seed_refusal(what, rows), allow.unequal_seeds, "--allow-unequal-seeds"))
    sampled = {f"seed {v.seeds[0]} [{v.bdir.name}]": store.read_manifest(v.bdir).get("dtype") for v in group}
    found.append((composition.dtype_refusal(f"{what}: sampling", sampled), allow.mixed_dtype, "--allow-mixed-dtype"))
    hidden = {f"{k[0]} {k[2]}" + (f" [{v.bdir.name}]" if len(group) > 1 else ""): computed_in(v.bdir, k)
              for v in group for k in v.est}
    found.append((composition.dtype_refusal(f"{what}: estimates", hidden), allow.mixed_dtype, "--allow-mixed-dtype"))
    for line, allowed, flag in found:
        if line and not allowed:
            raise EvalError(f"{line}; pass {flag} to pool them anyway (the table then says so)")
        if line:
            for v in group:
                v.notes = list(dict.fromkeys([*v.notes, f"{line} (let through by {flag})"]))


def _problems(v: View) -> list[dict]:
    """The view's problems (those with states): level (from meta) and answer_type, for the composition test."""
    keep = set(v.pid.tolist())
    t = store.read_table(v.bdir / "problems", schema.PROBLEMS)
    out = []
    for pid, at, meta in zip(*(t.column(c).to_pylist() for c in ("problem_id", "answer_type", "meta"))):
        if pid in keep:
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
