"""Run one estimator over a build under one protocol, store its estimates and scores."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.progress import track

from sveb import schema, scoring, store
from sveb.config import fingerprint
from sveb.errors import SvebError
from sveb.estimators import make, params_fp, params_json
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.pipeline import load_rollouts

PROTOCOLS = ("held-out", "in-group")  # held-out is the headline; in-group is the paper's protocol
PROTOCOL_LABELS = {"held-out": "held-out", "in-group": "in-group (paper; sees own outcome)"}


class EvalError(SvebError, RuntimeError):
    pass


def find_build(root: str | Path, model_slug: str | None, domain: str | None, build: str | None = None,
               console: Console | None = None) -> Path:
    """The build to evaluate: `--build` if given, else the newest complete test-split build of the model
    and domain."""
    builds = [b for b in store.list_builds(root)
              if (model_slug is None or b.parent.parent.name == model_slug)
              and (domain is None or b.parent.name == domain)
              and (build is None or b.name.startswith(build))]
    complete = [b for b in builds if store.read_manifest(b).get("status") == "complete"]
    if build is None:  # the benchmark is the test split; train builds are for critics
        complete = [b for b in complete if store.read_manifest(b).get("config", {}).get("split", "test") == "test"]
    if not complete:
        what = f"model={model_slug} domain={domain}" + (f" build={build}" if build else "")
        raise EvalError(f"no complete build under {root} for {what}; run `sveb build` first (see `sveb ls builds`)")
    if len(complete) > 1 and console is not None and build is None:
        console.print(f"[dim]using the newest build {complete[-1].name} of {len(complete)}; pass --build to choose[/]")
    return complete[-1]


@dataclass
class BuildData:
    bdir: Path
    manifest: dict
    problems: dict[str, dict]
    rollouts: dict[str, list[dict]]
    states: list[dict]
    references: dict[str, dict] = field(default_factory=dict)


def load_build(bdir: Path) -> BuildData:
    manifest = store.read_manifest(bdir)
    problems = {p["problem_id"]: p for p in store.read_table(bdir / "problems", schema.PROBLEMS).to_pylist()}
    states = store.read_table(bdir / "states", schema.STATES).to_pylist()
    refs = {r["state_id"]: r for r in store.read_table(bdir / "references", schema.REFERENCES).to_pylist()}
    missing = [s["state_id"] for s in states if s["state_id"] not in refs]
    if missing:
        raise EvalError(f"{bdir}: {len(missing)} states have no reference (build incomplete; rerun `sveb build`)")
    return BuildData(bdir, manifest, problems, load_rollouts(bdir, set(problems)), states, refs)


def group_for(data: BuildData, pid: str, hidden_fn=None) -> ProblemGroup:
    rolls = tuple(Rollout(r["rollout_idx"], tuple(r["prompt_token_ids"]), tuple(r["response_token_ids"]),
                          r["response_text"], float(r["reward"])) for r in data.rollouts[pid])
    return ProblemGroup(data.problems[pid], rolls, rolls, hidden_fn)


def state_for(data: BuildData, s: dict) -> State:
    extra = tuple(float(x) for x in data.references[s["state_id"]]["extra_rewards"])
    return State(s["state_id"], s["problem_id"], s["rollout_idx"], s["t"], s["prefix_text"], extra)


def flip_own(group: ProblemGroup, rollout_idx: int) -> ProblemGroup:
    """The group with one rollout's final reward flipped (r -> 1 - r), wherever it appears."""
    def flip(rolls):
        return tuple(replace(r, reward=1.0 - r.reward) if r.rollout_idx == rollout_idx else r for r in rolls)
    return replace(group, rollouts=flip(group.rollouts), all_rollouts=flip(group.all_rollouts or group.rollouts))


def check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        raise EvalError(f"--protocol {protocol}: unknown (known: {', '.join(PROTOCOLS)})")


def estimate_all(est, data: BuildData, protocol: str, hidden_provider=None,
                 own: bool = False, progress: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """One value per state of the build, in data.states order, and (with own=True) how far each value
    moves when the state's own rollout's final reward is flipped (NaN without it), and the seconds the
    estimator spent on the values alone.

    The own-outcome shift is measured, not assumed: the estimator is run again on the group with the
    state's own reward flipped, under the same protocol (held-out removes that rollout after the flip).
    """
    check_protocol(protocol)
    by_problem: dict[str, list[int]] = {}
    for i, s in enumerate(data.states):
        by_problem.setdefault(s["problem_id"], []).append(i)
    values, shift = np.full(len(data.states), np.nan), np.full(len(data.states), np.nan)
    seconds = 0.0
    groups = list(by_problem.items())
    for pid, idx in track(groups, description=f"{est.name} ({protocol})", transient=True) if progress else groups:
        hidden_fn = hidden_provider(pid, data.rollouts[pid]) if hidden_provider else None
        group = group_for(data, pid, hidden_fn)
        states = [state_for(data, data.states[i]) for i in idx]
        if protocol == "in-group":
            t0 = time.perf_counter()
            values[idx] = est.estimate(group, states)
            seconds += time.perf_counter() - t0
            if own:  # one re-run per rollout that has states: all its states share the flip
                by_roll: dict[int, list[int]] = {}
                for j, s in enumerate(states):
                    by_roll.setdefault(s.rollout_idx, []).append(j)
                for r_idx, js in by_roll.items():
                    moved = est.estimate(flip_own(group, r_idx), [states[j] for j in js])
                    for j, v in zip(js, moved):
                        shift[idx[j]] = abs(v - values[idx[j]])
        else:
            for i, s in zip(idx, states):
                t0 = time.perf_counter()
                values[i] = est.estimate(group.without(s.rollout_idx), [s])[0]
                seconds += time.perf_counter() - t0
                if own:
                    shift[i] = abs(est.estimate(flip_own(group, s.rollout_idx).without(s.rollout_idx), [s])[0]
                                   - values[i])
    if np.isnan(values).any():
        raise EvalError(f"estimator {est.name} returned NaN for {int(np.isnan(values).sum())} states")
    return values, shift, seconds


def own_measurable(est, protocol: str) -> bool:
    """Whether flipping a reward in the group shows the estimator's whole dependence on it. Not for a
    critic trained on the benchmark's own rollouts under in-group: its dependence is in its weights."""
    return not (protocol == "in-group" and getattr(est, "trains_on_benchmark", False))


def evaluate(bdir: Path, name: str, params: dict[str, str] | None = None, protocol: str = "held-out",
             n_boot: int = 2000, seed: int = 0, force: bool = False, console: Console | None = None,
             hidden_options: dict | None = None, ray=None) -> dict:
    """Score one estimator; `ray` (sveb.distributed.RayOptions): hidden states and estimates per problem
    group on Ray actors (the same values: each group's estimate depends on that group alone)."""
    console = console or Console(stderr=True)
    check_protocol(protocol)
    est = make(name, params)
    pfp = params_fp(est)
    manifest = store.read_manifest(bdir)
    extra = est.cache_key(bdir, manifest) if hasattr(est, "cache_key") else ""  # e.g. ppo-1's training build
    fp = fingerprint(manifest["build_fp"], name, pfp, protocol, n_boot, seed, extra, schema.SCHEMA_VERSION)
    key = f"{name}-{pfp}-{protocol}"
    score_path = store.shard_path(bdir / "scores", key)
    if not force and store.shard_done(score_path, fp):
        return store.read_shard(score_path).to_pylist()[0]
    data = load_build(bdir)
    if hasattr(est, "prepare"):
        est.prepare(data, console)
    provider = None
    hidden = getattr(est, "needs_hidden", False)
    if ray is not None:
        from functools import partial
        from sveb.distributed import estimate_on_ray
        from sveb.hidden import HiddenStates
        factory = partial(HiddenStates, bdir.absolute(), manifest["model"], layer=getattr(est, "layer", -1),
                          **(hidden_options or {})) if hidden else None
        values, shift, seconds = estimate_on_ray(est, data, protocol, own_measurable(est, protocol), factory, ray,
                                                 console)
    elif hidden:
        from sveb.hidden import HiddenStates
        hs = HiddenStates(bdir, manifest["model"], layer=getattr(est, "layer", -1), **(hidden_options or {}))
        # extract (or find cached) before the clock starts: `seconds` is the estimator's own cost
        for pid in track(sorted(data.problems), description="hidden states", console=console):
            hs.ensure(pid, data.rollouts[pid])  # cached groups are not loaded twice
        provider = hs.provider(console)
    if ray is None:
        values, shift, seconds = estimate_all(est, data, protocol, provider, own=own_measurable(est, protocol))
    ref = np.array([data.references[s["state_id"]]["value"] for s in data.states])
    n_ref = int(data.references[data.states[0]["state_id"]]["n_ref"]) if data.states else 20
    groups = np.array([s["problem_id"] for s in data.states])
    pj = params_json(est)
    est_rows = [{"state_id": s["state_id"], "problem_id": s["problem_id"], "estimator": name, "params_fp": pfp,
                 "params": pj, "protocol": protocol, "value": float(v), "own_shift": float(d)}
                for s, v, d in zip(data.states, values, shift)]
    store.write_shard(store.shard_path(bdir / "estimates", key), pa.Table.from_pylist(est_rows, schema=schema.ESTIMATES), fp)
    row = {"model": manifest["model"], "domain": manifest["domain"], "build_fp": manifest["build_fp"],
           "estimator": name, "params_fp": pfp, "params": pj, "protocol": protocol,
           **scoring.score(values, ref, n_ref, groups, n_boot, seed),
           "own_share": float(shift.mean()) if len(shift) and not np.isnan(shift).any() else float("nan"),
           "seconds": seconds}
    store.write_shard(score_path, pa.Table.from_pylist([row], schema=schema.SCORES), fp)
    return row


def print_build_info(bdir: Path, console: Console) -> None:
    """What a reader of the scores must know about the build: its size and how much the budget cut off."""
    m = store.read_manifest(bdir)
    tr = m.get("truncated") or {}
    cut = ", ".join(f"{tr[k]:.1%} of {k}" for k in ("rollouts", "references") if isinstance(tr.get(k), (int, float)))
    console.print(f"build {bdir.name}: {m.get('n_problems')} problems, {m.get('n_states')} states"
                  + (f"; cut off by the token budget: {cut}" if cut else ""))


def params_dict(pairs: list[str]) -> dict[str, str]:
    """`-P key=value` flags -> dict, with a clear error for a malformed one."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise EvalError(f"-P {p}: expected key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def load_scores(root: str | Path) -> list[dict]:
    rows = []
    for bdir in store.list_builds(root):
        rows += store.read_table(bdir / "scores", schema.SCORES).to_pylist() if (bdir / "scores").exists() else []
    return rows

