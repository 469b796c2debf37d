"""Per-state views of scored builds, builds pooled over seeds, and the paired comparisons against the baseline.

A View holds one build's (or one pool's) per-state references and every stored estimate. Builds that share
model, domain and config except `seed` (and the speed-only knobs) form a pool: the pooled view concatenates
their states, and its clusters are the problems themselves (a problem two seeds drew is one cluster). Paired Δ of
squared error, its test and the Holm-adjusted verdicts need every estimator's per-state estimates, so they are
computed here, never stored in the scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sveb import store
from sveb.core import schema
from sveb.core.errors import EvalError
from sveb.estimators import BASELINE
from sveb.estimators.families import ALONE, family_of, family_size
from sveb.score import scoring, trainings
from sveb.score.pool_checks import Allow, check
from sveb.score.replicates import REPLICATE, default_params, seed_of
from sveb.score.rows import score_row
from sveb.store import Build
from sveb.store.builds import pool_key


@dataclass
class View:
    """One build or one pool: per-state arrays plus every stored estimate, keyed (estimator, params_fp, protocol)."""
    bdir: Path
    model: str
    domain: str
    status: str
    scores: list[dict]
    problem: np.ndarray  # per state, in states-table order: the cluster id (the problem id, pooled or not)
    ref: np.ndarray
    pos: np.ndarray      # t / T
    est: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)  # (estimator, params_fp) -> params JSON
    col: str = ""
    pid: np.ndarray | None = None      # the problem id itself
    rollout: np.ndarray | None = None  # rollout_idx
    t: np.ndarray | None = None
    shift: dict = field(default_factory=dict)  # same keys as est: own_shift per state
    bdirs: list = field(default_factory=list)  # the builds behind it (several when pooled)
    bidx: np.ndarray | None = None     # index into bdirs per state
    seeds: list = field(default_factory=list)
    n_ref: int = 20
    own: np.ndarray | None = None      # the final reward of each state's own rollout (AUROC of the own outcome)
    notes: list = field(default_factory=list)  # what a table over it must say (a refusal let through by a flag)
    builds: list = field(default_factory=list)  # bdirs as Build handles (their manifests parsed once), when known

    @property
    def fp(self) -> str:
        return "+".join(b.name for b in self.bdirs) if len(self.bdirs) > 1 else self.bdir.name

    @property
    def build(self) -> Build:
        """The view's (first) build as a handle: the one it was loaded from, its manifest already parsed."""
        return self.builds[0] if self.builds else Build(self.bdir)

    @property
    def pooled(self) -> bool:
        return len(self.bdirs) > 1


def read_scores(bdir: Build | Path) -> list[dict]:
    """A build's score rows; rows written by an older scores version lack the newer columns (None there)."""
    rows = []
    for path in sorted((bdir / "scores").glob("part-*.parquet")):
        shard = [{c: r.get(c) for c in schema.SCORES.names} for r in store.read_shard(path).to_pylist()]
        for i, r in enumerate(shard):  # a shard of another table's columns: named here, not a traceback later
            bad = next((c for c in ("estimator", "params_fp", "protocol") if not isinstance(r[c], str)), None)
            if bad:
                raise store.StoreError(f"{path}: row {i} has no {bad} (not a scores shard, or a damaged one)")
        rows += shard
    return rows


def load_view(bdir: Build | Path, scores: list[dict]) -> View:
    """A build's per-state view with every estimate the build stores."""
    view, index = base_view(bdir, scores)
    bdir = view.bdir
    if (bdir / "estimates").exists():
        add_estimates(view, index, store.read_table(bdir / "estimates", schema.ESTIMATES))
    for r in scores:
        view.params.setdefault((r["estimator"], r["params_fp"]), r["params"])
    stored: dict[tuple, list[dict]] = {}
    for r in scores:
        stored.setdefault((r["estimator"], r["params_fp"], r["protocol"]), []).append(r)
    view.scores = rescore(view, stored)
    return view


def add_estimates(view: View, index: dict[str, int], table) -> None:
    """Per-state estimates (a table with ESTIMATES' state_id, estimator, params_fp, params, protocol, value and
    own_shift) into a one-build view; rows of states the build does not hold are skipped."""
    n = len(index)
    cols = ("state_id", "estimator", "params_fp", "params", "protocol", "value", "own_shift")
    for sid, name, pfp, pj, proto, v, d in zip(*(table.column(c).to_pylist() for c in cols)):
        if sid in index:
            arr = view.est.setdefault((name, pfp, proto), np.full(n, np.nan))
            arr[index[sid]] = np.nan if v is None else v
            view.shift.setdefault((name, pfp, proto), np.full(n, np.nan))[index[sid]] = np.nan if d is None else d
            view.params[(name, pfp)] = pj


def rescore(view: View, stored: dict[tuple, list[dict]]) -> list[dict]:
    """Score rows recomputed from the view's per-state estimates with today's procedure (sveb.score.scoring), so a
    row stored by an older version shows the same statistics as a fresh one; rows of several builds (a pool)
    are summed in seconds. A stored row without estimates (nothing to recompute from) is kept as stored when
    the view is one build, and dropped from a pool."""
    out = []
    for key, rows in stored.items():
        if key not in view.est:
            if not view.pooled:
                out += rows[:1]
            continue
        ok = np.isfinite(view.est[key]) & np.isfinite(view.ref)
        row = score_row({**rows[0], "build_fp": view.fp if view.pooled else rows[0].get("build_fp")},
                        view.est[key][ok], view.ref[ok], view.n_ref, view.problem[ok], rollouts=view.rollout[ok],
                        t=view.t[ok], shift=view.shift[key][ok],
                        seconds=float(sum(r.get("seconds") or 0.0 for r in rows)),
                        own=None if view.own is None else view.own[ok], pos=view.pos[ok])
        row["n_builds"] = len({view.bidx[i] for i in np.flatnonzero(ok)})
        out.append(row)
    return out


def base_view(bdir: Build | Path, scores: list[dict]) -> tuple[View, dict[str, int]]:
    """A build's per-state view without estimates (references, clusters, positions), and state_id -> index:
    a board fills it with the bundles' estimates only."""
    build = Build.of(bdir)
    bdir = build.path
    st = build.table("states", schema.STATES)
    index = {s: i for i, s in enumerate(st.column("state_id").to_pylist())}
    n, ref = len(index), np.full(len(index), np.nan)
    refs = build.table("references", schema.REFERENCES)
    n_ref = refs.column("n_ref").to_pylist()[:1]
    for sid, v in zip(*(refs.column(c).to_pylist() for c in ("state_id", "value"))):
        if sid in index:
            ref[index[sid]] = np.nan if v is None else v
    t, T = (np.array(st.column(c).to_pylist(), dtype=float) for c in ("t", "T"))
    pos = np.divide(t, T, out=np.full(n, np.nan), where=T > 0)
    m = build.manifest  # an imported hista-json build records no seed: None, not BuildConfig's 0
    pid = np.array(st.column("problem_id").to_pylist(), dtype=object)
    place = bdir.parent  # a manifest without model or domain: the store's <model>/<domain>/<fp> names them
    view = View(bdir, str(m.model if m.model is not None else place.parent.name),
                str(m.domain if m.domain is not None else place.name), str(m.status if m.status is not None else "?"),
                scores, pid, ref, pos, pid=pid,
                rollout=np.array(st.column("rollout_idx").to_pylist()), t=t, bdirs=[bdir], bidx=np.zeros(n, int),
                seeds=[m.seed], n_ref=int(n_ref[0]) if n_ref else 20, builds=[build])
    view.own = _own_rewards(bdir, pid, view.rollout)
    return view, index


def _own_rewards(bdir: Path, pid: np.ndarray, rollout: np.ndarray) -> np.ndarray | None:
    """Per state, its own rollout's final reward from the rollouts table (None when the build has none)."""
    if not (bdir / "rollouts").is_dir():
        return None
    import pyarrow.parquet as pq
    reward = {}
    for path in sorted((bdir / "rollouts").glob("part-*.parquet")):
        t = pq.read_table(path, columns=["problem_id", "rollout_idx", "reward"])
        reward.update(zip(zip(*(t.column(c).to_pylist() for c in ("problem_id", "rollout_idx"))),
                          t.column("reward").to_pylist()))
    own = np.array([reward.get((p, int(r))) for p, r in zip(pid, rollout)], dtype=float)
    return own if np.isfinite(own).all() else None


def _content(bdir: Build | Path) -> str:
    """What a build holds: an export's content hash, else its fingerprint (copies of one build share both)."""
    build = Build.of(bdir)
    m = build.manifest
    return str(m.content_hash or m.build_fp or build.name)


def pools(views: list[View], allow: Allow = Allow()) -> list[list[View]]:
    """Views grouped by pool key, each group in seed order; groups in order of first appearance. Each group is
    checked (`check`): seeds of different problem mixes, or parts of different compute dtypes, are refused
    (EvalError, one line) unless `allow` lets them through, and then every view of the group carries the note."""
    groups: dict[str, list[View]] = {}
    for v in views:
        groups.setdefault(pool_key(v.build), []).append(v)
    for g in groups.values():  # one seed twice (a copied build, or two builds of it) is one draw counted twice
        seen: dict = {}
        for v in g:  # a build with no seed (imported from the authors' files) is one draw per fingerprint
            s = v.seeds[0]
            key = ("seed", s) if s is not None else ("build", _content(v.build))
            if key in seen:
                what = f"both seed {s} of one config" if s is not None else f"one build ({key[1][:16]}) twice"
                raise EvalError(f"builds {seen[key].bdir} and {v.bdir} are {what}: they cannot be pooled as "
                                f"independent seeds; keep one of them (move the other out of the root)")
            seen[key] = v
    out = [sorted(g, key=lambda v: (str(v.seeds[0]), v.fp)) for g in groups.values()]
    for g in out:
        check(g, allow)
    return out


def merge(views: list[View]) -> View:
    """One view of several seeds' builds: states concatenated, clusters by problem identity, score rows
    recomputed on the pooled states (an estimator missing on some seeds: pooled over those it has)."""
    if len(views) == 1:
        return views[0]
    cat = np.concatenate
    n = [len(v.ref) for v in views]
    keys = list(dict.fromkeys(k for v in views for k in v.est))

    def stack(d_of):
        return {k: cat([d_of(v).get(k, np.full(len(v.ref), np.nan)) for v in views]) for k in keys}
    first = views[0]
    out = View(first.bdir, first.model, first.domain, ",".join(sorted({v.status for v in views})), [],
               cat([v.pid for v in views]),
               cat([v.ref for v in views]), cat([v.pos for v in views]),
               est=stack(lambda v: v.est), params={k: p for v in views for k, p in v.params.items()},
               pid=cat([v.pid for v in views]), rollout=cat([v.rollout for v in views]), t=cat([v.t for v in views]),
               shift=stack(lambda v: v.shift), bdirs=[v.bdir for v in views], builds=[v.build for v in views],
               bidx=np.repeat(np.arange(len(views)), n), seeds=[v.seeds[0] for v in views], n_ref=first.n_ref,
               own=None if any(v.own is None for v in views) else cat([v.own for v in views]),
               notes=list(dict.fromkeys(x for v in views for x in v.notes)))
    stored: dict[tuple, list[dict]] = {}
    for v in views:
        for r in v.scores:
            stored.setdefault((r["estimator"], r["params_fp"], r["protocol"]), []).append(r)
    out.scores = rescore(out, stored)
    return out


def family(key: tuple[str, str], params_json=None) -> str:
    """The declared Holm family of an (estimator, params_fp) row: main, scale, variant or alone
    (sveb.estimators.families); the same whatever is installed."""
    return family_of(key[0], params_json)


def paired(v: View, protocol: str) -> dict[tuple[str, str], dict]:
    """(estimator, params_fp) -> paired Δ of squared error against the baseline on the same states, its
    CR1 t-interval and p, the Holm-adjusted p and interval, the verdict and the family. Holm families are
    declared (sveb.estimators.families): main, scale, variant, each corrected for its declared size; any other
    setting (a non-default, a training-seed replicate, a plugin) is tested alone. A training-seed replicate's
    verdict is REPLICATE ("replicate"): its p is its own, unadjusted, and says nothing of the estimator, whose
    default row is tested over its trainings (`_trainings`)."""
    base = sorted(k for k in v.est if k[0] == BASELINE and k[2] == protocol)
    if not base:
        return {}
    b = v.est[base[0]]
    out = {}
    for k in sorted(k for k in v.est if k[2] == protocol and k[0] != BASELINE):
        ok = np.isfinite(v.est[k]) & np.isfinite(b) & np.isfinite(v.ref)
        res = scoring.paired_sq_diff(v.est[k][ok], b[ok], v.ref[ok], v.problem[ok])
        out[k[:2]] = {**res, "n_states": int(ok.sum()), "n_problems": len(set(v.problem[ok])),
                      "mae": float(np.abs(v.est[k][ok] - v.ref[ok]).mean()) if ok.any() else float("nan"),
                      "mae_grpo": float(np.abs(b[ok] - v.ref[ok]).mean()) if ok.any() else float("nan"),
                      "family": family(k[:2], v.params.get(k[:2])), "trainings": None,
                      "training_sd": float("nan"), "training_seeds": None, "mae_training_sd": float("nan"),
                      "replicate_of": None, "training_seed": None}
    _trainings(v, protocol, b, out)
    groups: dict[str, list] = {}
    for k, r in out.items():  # each row alone is a family of its own
        groups.setdefault(r["family"] if r["family"] != ALONE else f"{ALONE}:{k}", []).append(k)
    for fam_name, fam in groups.items():
        m = family_size(fam_name) if not fam_name.startswith(ALONE) else 1
        for k, p in zip(fam, scoring.holm([out[k]["p_delta"] for k in fam], m)):
            r = out[k]
            r["p_holm"] = float(p)
            r["verdict"] = scoring.verdict(r["delta_sq"], p)
            r["delta_sq_holm_low"], r["delta_sq_holm_high"] = scoring.holm_interval(
                r["delta_sq"], r["delta_sq_se"], r["df"], r["p_delta"], r["p_holm"])
    for r in out.values():  # tested alone, as a spread: not a verdict of the estimator
        if r["replicate_of"] is not None:
            r["verdict"] = REPLICATE
    return out


OVER_TRAININGS = ("mae", "mae_ci_low", "mae_ci_high")


def over_trainings_row(c: dict) -> dict:
    """The columns a score row shows from its paired result `c` instead of its own when `paired` tested it over
    its trainings (trainings > 1): MAE and its 95% CI, of the mean over the trainings (Table 4's MAE); {} for a
    row tested on one training. Every other metric of the row stays the default training's."""
    return {k: c[k] for k in OVER_TRAININGS} if (c.get("trainings") or 0) > 1 else {}


def _trainings(v: View, protocol: str, b: np.ndarray, out: dict) -> None:
    """A trained estimator (one whose default settings have a training `seed`) scored with several training seeds
    on these states: its default row's test becomes the test over trainings (sveb.score.trainings: the mean Δ over
    trainings, its SE with the between-training variance), on the states every training scored, and its MAE the
    mean over trainings of each training's MAE there, with the CI of the same test over trainings applied to the
    absolute errors (sveb.score.trainings.over_trainings: the between-training spread in its SE; `mae_training_sd`
    the sd of the per-training MAEs). Every row of a trained estimator says how many trainings its test rests on
    (`trainings`: 1 = one training, no spread in it); a replicate (a non-default seed) names the estimator it
    replicates (`replicate_of`) and its `training_seed`; other estimators have none."""
    by_name: dict[str, dict] = {}
    for k in out:
        d = default_params(k[0])
        pj = v.params.get(k)  # none recorded (Table 4's arrays): the row is at its default settings
        seed = seed_of(d if pj is None else pj, d) if d is not None else None
        if seed is not None:
            by_name.setdefault(k[0], {})[seed] = k
    for name, by_seed in by_name.items():
        first = seed_of(default_params(name), default_params(name))
        for seed, k in by_seed.items():
            out[k]["trainings"] = 1
            if seed != first:
                out[k].update(replicate_of=name, training_seed=seed)
        default = by_seed.get(first)
        if default is None or len(by_seed) < 2:
            continue
        seeds = sorted(by_seed, key=str)
        arrs = [v.est[(*by_seed[s], protocol)] for s in seeds]
        ok = np.isfinite(b) & np.isfinite(v.ref) & np.logical_and.reduce([np.isfinite(a) for a in arrs])
        d = np.stack([(a[ok] - v.ref[ok]) ** 2 - (b[ok] - v.ref[ok]) ** 2 for a in arrs])
        res = trainings.over_trainings(d, v.problem[ok])
        acc = trainings.mae_over_trainings([a[ok] for a in arrs], v.ref[ok], v.problem[ok])
        out[default].update({c: res[c] for c in ("delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p_delta",
                                                 "delta_sq_se", "df", "trainings", "training_sd")},
                            n_states=int(ok.sum()), n_problems=len(set(v.problem[ok])),
                            mae=acc["delta_sq"], mae_ci_low=acc["delta_sq_ci_low"],
                            mae_ci_high=acc["delta_sq_ci_high"], mae_training_sd=acc["training_sd"],
                            mae_grpo=float(np.abs(b[ok] - v.ref[ok]).mean()),
                            training_seeds=",".join(map(str, seeds)))
