"""The read side of the store: find builds, load one for evaluation, turn its rows into estimator inputs,
sum one up (the share cut off by the token budget, the one-line description).

Everything that reads a finished build (evaluate, estimators that train on another build, reports)
goes through here; only `sveb.sample.pipeline` writes builds. The training build an estimator learns on:
train_builds.py.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rich.console import Console

from sveb import store
from sveb.core import schema
from sveb.core.config import NOT_IN_FP, BuildConfig
from sveb.core.errors import EvalError, SvebError, UsageError, did_you_mean, path_like
from sveb.core.models import cache_dir

# group_for lives with the records now (estimators build groups without the store); its old home still exports it
from sveb.core.records import BuildData, ProblemGroup, Rollout, State, group_for  # noqa: F401
from sveb.data_builders import DOMAINS
from sveb.store.export import verify
from sveb.store.handle import Build
from sveb.store.hub import import_build, local_name
from sveb.store.integrity import check_structure
from sveb.store.manifest import Manifest


def load_rollouts(bdir: Path, problem_ids: set[str] | None = None) -> dict[str, list[dict]]:
    """Rollouts grouped by problem, ordered by rollout_idx."""
    out: dict[str, list[dict]] = {}
    for path in sorted((bdir / "rollouts").glob("part-*.parquet")):
        for row in store.read_shard(path).to_pylist():
            if problem_ids is None or row["problem_id"] in problem_ids:
                out.setdefault(row["problem_id"], []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["rollout_idx"])
    return out


def find_build(root: str | Path, model_slug: str | None, domain: str | None, build: str | None = None,
               console: Console | None = None) -> Path:
    """The build to evaluate: `--build` if given (a fingerprint prefix under root, a build or export folder, or
    hub:ID), else the newest complete test-split build of the model and domain. locate_build: the same as a
    Build handle."""
    return locate_build(root, model_slug, domain, build, console).path


def locate_build(root: str | Path, model_slug: str | None, domain: str | None, build: str | None = None,
                 console: Console | None = None) -> Build:
    """find_build's build as a handle: its manifest parsed once here and handed on with it."""
    check_domain(domain)
    if build is not None and (build.startswith("hub:") or path_like(build) or "/" in build):
        return _open(build, root)  # a folder: its own one-line errors (missing, a file, no manifest.json)
    builds = [b for b in map(Build, store.list_builds(root)) if _is_of(b, model_slug, domain)
              and (build is None or b.name.startswith(build) or _fp(b).startswith(build))]
    done = [b for b in builds if b.manifest.complete]
    if build is None:  # the benchmark is the test split; train builds are for critics
        done = [b for b in done if b.manifest.config.split == "test"]
    if not done:
        what = f"model={model_slug} domain={domain}" + (f" build={build}" if build else "")
        raise EvalError(f"no complete build under {root} for {what}; run `sveb build` first (see `sveb ls builds`)"
                        + frozen_hint(domain))
    if len(done) > 1 and console is not None and build is None:
        console.print(f"[dim]using the newest build {_shown(done[-1].path, root)} of {len(done)}; pass --build to "
                      f"choose[/]")
    return done[-1]


def _is_of(b: Build | Path, model_slug: str | None, domain: str | None) -> bool:
    """Whether a build listed under a root (`sveb ls builds`) is of the model and domain: by its place
    (ROOT/<model>/<domain>/<fp>, as `sveb build` stores it) or by its manifest (an export anywhere)."""
    from sveb.core.models import model_slug as slug_of
    b = Build.of(b)
    place = b.path.parent
    if (model_slug is None or place.parent.name == model_slug) and (domain is None or place.name == domain):
        return True
    try:
        m = b.manifest
        return (model_slug is None or slug_of(str(m.model)) == model_slug) and (domain is None or m.domain == domain)
    except (OSError, ValueError, SvebError):
        return False


def _shown(b: Path, root) -> str:
    try:
        return str(b.relative_to(root))
    except ValueError:
        return str(b)


def _fp(b: Build) -> str:
    try:
        return str(b.manifest.build_fp or "")
    except (OSError, ValueError, SvebError):
        return ""


FROZEN = Path("results") / "table4" / "exports"  # the committed frozen builds, in a clone's top folder


def frozen_hint(domain: str | None) -> str:
    """Where no build is found: the committed frozen build of the domain, when this folder is a clone that has it
    (scoring an estimator on it takes seconds, with no model load for the group-based ones)."""
    d = FROZEN / (domain or "number")
    if not (d / "manifest.json").exists():
        return ""
    return (f"; or score the committed frozen build: --build {d} (all of them: `sveb ls builds --root "
            f"{FROZEN.parent.parent}`)")


def check_domain(domain: str | None, flag: str = "--domain") -> None:
    """A domain flag names one of SVEB's domains; a near miss gets a did-you-mean."""
    if domain is not None and domain not in DOMAINS:
        raise UsageError(f"{flag} {domain}: unknown domain{did_you_mean(domain, DOMAINS)}")


def check_root(root: str | Path) -> None:
    """A data root to read must be a folder that exists (an empty listing of a mistyped root misleads)."""
    r = Path(root).expanduser()
    if not r.exists():
        raise UsageError(f"--root {root}: no such folder")
    if not r.is_dir():
        raise UsageError(f"--root {root}: is a file, not a data folder")


def open_build(spec: str, root: str | Path) -> Path:
    """A build named by a folder (a build made here, or an export: its tables checked against their hashes) or
    by hub:ID (an export published on the Hugging Face hub, imported once under ROOT/hub/)."""
    return _open(spec, root).path


def open_handle(spec: str | Path | Build, root: str | Path) -> Build:
    """open_build's build as a handle; a Build given is checked as it is (its manifest, parsed once, kept)."""
    return _checked(spec, str(spec)) if isinstance(spec, Build) else _open(str(spec), root)


def _open(spec: str, root: str | Path) -> Build:
    if spec.startswith("hub:"):
        bdir = Path(root) / "hub" / local_name(spec[4:]) / "build"
        if not (bdir / "manifest.json").exists():
            import_build(spec[4:], bdir)
    else:
        bdir = Path(spec).expanduser()
        if not bdir.exists():
            raise EvalError(f"--build {spec}: no such folder (a build or export folder, a fingerprint prefix, "
                            f"or hub:ID)")
        if not bdir.is_dir():
            raise EvalError(f"--build {spec}: is a file, not a build or export folder")
    if not (bdir / "manifest.json").exists():
        raise EvalError(f"--build {spec}: {bdir} holds no manifest.json (not a build or an export folder)")
    return _checked(Build(bdir), spec)


def _checked(build: Build, spec: str) -> Build:
    """A complete build or an export whose tables match their hashes (a one-line error naming `spec` if not)."""
    if build.manifest.is_export:
        verify(build)
    elif not build.manifest.complete:
        raise EvalError(f"--build {spec}: the build is not complete; rerun its `sveb build`")
    check_build(build)
    return build


def check_build(bdir: Build | Path, manifest: dict | None = None) -> Manifest:
    """What every reader of a complete build relies on, checked before anything is scored: the manifest's labels;
    an export's tables against their hashes, or else tables written by `sveb build` here (an export whose
    `export` section was deleted is not a build made here). Returns the manifest."""
    build = Build.of(bdir) if manifest is None else Build(bdir, Manifest.of(manifest))
    m = build.manifest
    for key in ("model", "domain", "build_fp", "status"):
        if not isinstance(m.get(key), str) or not m[key]:  # the labels' own check: typed only where present
            raise EvalError(f"{bdir}/manifest.json: no {key}; not a build or an export")
    if m.is_export:
        return verify(build)
    for t in store.CONTENT_TABLES:
        for path in sorted((Path(bdir) / t).glob("part-*.parquet")):
            if store.shard_fp(path) is None:
                raise EvalError(f"{bdir}: manifest.json has no export table hashes (export.tables) and table {t} was "
                                f"not written by `sveb build`; refused (an export keeps its manifest whole: export "
                                f"or import it again)")
    return m


def check_values(bdir: Path, rollouts: dict[str, list[dict]], refs: dict[str, dict]) -> None:
    """Every reward and reference value a score is computed from: a finite number in [0, 1] (one line naming the
    first that is not), before any estimator runs or any score is written."""
    import math

    def bad(x) -> bool:
        return not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x) or not 0 <= x <= 1
    for pid, rows in rollouts.items():
        for r in rows:
            if bad(r.get("reward")):
                raise EvalError(f"{bdir}: rollout {r.get('rollout_idx')} of problem {pid} has reward "
                                f"{r.get('reward')}, not a finite number in [0, 1]; refused")
    for sid, r in refs.items():
        if bad(r.get("value")):
            raise EvalError(f"{bdir}: the reference of state {sid} is {r.get('value')}, not a finite number in "
                            f"[0, 1]; refused")
        n = r.get("n_ref")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise EvalError(f"{bdir}: the reference of state {sid} has n_ref {n}; expected at least 1")
        for field in ("mc_rewards", "extra_rewards"):
            xs = r.get(field) or []
            if any(bad(x) for x in xs):
                x = next(x for x in xs if bad(x))
                raise EvalError(f"{bdir}: {field} of state {sid} holds {x}, not a finite number in [0, 1]; refused")


# What scoring writes into a build folder; kept out of a read-only build's mirror as links (hidden states and
# critics are caches: recomputed there rather than copied)
RESULTS = ("scores", "estimates", "diagnostics", "timings", "hidden", "critics")
COPIED = ("scores", "estimates", "diagnostics", "timings")


def results_view(bdir: Build | Path, console: Console | None = None, create: bool = True,
                 build: Build | None = None) -> Build | Path:
    """The folder a build's scores are written to: the build itself, or, when it is read-only (a frozen export on
    read-only storage), a writable mirror of it under the cache (`SVEB_CACHE`, default ~/.cache/sveb): its tables
    linked, the scores stored so far copied, keyed on the content hash and the manifest. create=False: the mirror
    only if it already exists (a reader), else the build itself. A Build given: a Build returned."""
    import hashlib
    import shutil

    if isinstance(bdir, Build):  # a handle in, the mirror's handle out (its manifest is the build's)
        return bdir.at(results_view(bdir.path, console, create, bdir))
    bdir = Path(bdir)
    if store.writable(bdir):
        return bdir
    key = f"{content_hash_of(build or bdir)}-{hashlib.sha256((bdir / 'manifest.json').read_bytes()).hexdigest()[:8]}"
    mirror = cache_dir() / "readonly" / key / bdir.resolve().name
    if not (mirror / "manifest.json").exists():
        if not create:
            return bdir
        store.check_writable(mirror, f"{bdir} is read-only and its scores go to the cache:")
        with store.staged_dir(mirror) as tmp:
            for p in sorted(bdir.iterdir()):
                if p.name in COPIED and p.is_dir():
                    shutil.copytree(p, tmp / p.name)
                elif p.name not in RESULTS and not p.name.startswith("."):
                    (tmp / p.name).symlink_to(p.resolve())
            (tmp / "READ-ONLY-SOURCE").write_text(f"{bdir.resolve()}\n")
    if console is not None:
        console.print(f"[dim]{bdir} is read-only: its scores go to {mirror}[/]", soft_wrap=True)
    return mirror


def content_hash_of(bdir: Build | Path) -> str:
    """A build's content hash: an export's (its tables verified against it), else computed from the tables."""
    m = check_build(bdir)
    return m.content_hash if m.is_export else store.content_hash(Path(bdir))


def check_expected(bdirs: list[Build] | list[Path], expect: str | None) -> None:
    """`--expect HASH`: every build scored must have this content hash (a prefix of 8 or more characters)."""
    if expect is None:
        return
    e = expect.strip().lower()
    if len(e) < 8 or not all(c in "0123456789abcdef" for c in e):
        raise UsageError(f"--expect {expect}: expected a content hash (8 to 16 hex characters; `sveb export` and "
                         f"the dataset card print it)")
    for b in bdirs:
        got = content_hash_of(b)
        if not got.startswith(e):
            raise EvalError(f"--expect {expect}: build {b} has content hash {got}; refused (not the build you pinned)")


def pool_key(bdir: Build | Path) -> str:
    """Builds with the same key differ only in their seed (or in knobs that never change results)."""
    build = Build.of(bdir)
    m = build.manifest
    if not m.recorded_config:  # no config recorded: a build pools with nothing
        return build.name
    # every field but the seed, typed (a key an older version did not write takes its default, so builds of
    # different protocols never pool: sveb/sample/paper.py); the engine draws the samples (it is in the rollout
    # fingerprint): two engines' builds do not pool
    cfg = {k: v for k, v in dataclasses.asdict(m.config).items()
           if k != "seed" and (k == "engine" or k not in NOT_IN_FP)}
    # a re-reference (sveb.sample.rereference) holds another model's rollouts: it pools only with re-references of
    # the same source policy, never with builds its own model sampled
    moved = [{"states_from": {k: m.states_from.get(k) for k in ("model", "model_weights_sha256", "engine", "dtype")}}
             ] if m.states_from else []
    return json.dumps([m.model, m.domain, cfg, *moved], sort_keys=True, default=str)


def config_of(bdir: Build | Path) -> BuildConfig:
    """The build's config, typed (BuildConfig.from_manifest)."""
    return Build.of(bdir).manifest.config


def find_seed_builds(root: str | Path, model_slug: str | None, domain: str | None, seeds: list[int],
                     build: str | None = None) -> list[Path]:
    """The newest complete test-split build of each seed (`--seeds`), all of one config but the seed."""
    return [b.path for b in locate_seed_builds(root, model_slug, domain, seeds, build)]


def locate_seed_builds(root: str | Path, model_slug: str | None, domain: str | None, seeds: list[int],
                       build: str | None = None) -> list[Build]:
    """find_seed_builds' builds as handles (each manifest parsed once here and handed on)."""
    found, listed = [], [Build(b) for b in store.list_builds(root)]
    for seed in seeds:
        done = [b for b in listed if _is_of(b, model_slug, domain)
                and (build is None or b.name.startswith(build) or _fp(b).startswith(build)) and b.manifest.complete
                and (c := b.manifest.config).split == "test" and c.seed == seed]
        if not done:
            raise EvalError(f"no complete build of seed {seed} under {root} for model={model_slug} domain={domain}; "
                            f"run `sveb build --seeds ...` first")
        found.append(done[-1])
    if len({pool_key(b) for b in found}) > 1:
        raise EvalError(f"--seeds: the newest builds of seeds {seeds} differ in more than their seed "
                        f"({', '.join(b.name for b in found)}); pass --build or clean the root")
    return found


def load_build(bdir: Build | Path, references: bool = True) -> BuildData:
    """A build's tables in memory; references=False for a training build (no reference needed)."""
    build = Build.of(bdir)
    bdir = build.path
    manifest = check_build(build)  # a frozen export: its rows must be the ones its card hashed
    plist = build.table("problems", schema.PROBLEMS).to_pylist()
    problems = {p["problem_id"]: p for p in plist}
    states = build.table("states", schema.STATES).to_pylist()
    refs, rlist = {}, None
    if references:
        rlist = build.table("references", schema.REFERENCES).to_pylist()
        refs = {r["state_id"]: r for r in rlist}
        missing = [s["state_id"] for s in states if s["state_id"] not in refs]
        if missing:
            raise EvalError(f"{bdir}: {len(missing)} states have no reference (build incomplete; rerun `sveb build`)")
    rollouts = load_rollouts(bdir, set(problems))
    check_structure(bdir, plist, states, rollouts, rlist)
    check_values(bdir, rollouts, refs)
    extras = {sid: tuple(float(x) for x in r["extra_rewards"] or ()) for sid, r in refs.items()}
    return BuildData(bdir, manifest, problems, rollouts, states, refs, extras)


def state_for(data: BuildData, s: dict) -> State:
    return State(s["state_id"], s["problem_id"], s["rollout_idx"], s["t"], s["prefix_text"],
                 data.extras.get(s["state_id"], ()))


def truncation(bdir: Path, problem_ids: set[str]) -> dict[str, float]:
    """Share of the benchmark's rollouts and reference continuations cut off by the token budget."""
    rolls = [r["finish_reason"] for rows in load_rollouts(bdir, problem_ids).values() for r in rows]
    conts: list[str] = []
    for path in sorted((bdir / "references").glob("part-*.parquet")):
        t = store.read_shard(path)
        if "finish_reasons" in t.column_names:
            for fr, n in zip(t.column("finish_reasons").to_pylist(), t.column("n_ref").to_pylist()):
                conts += fr[:n]

    def share(xs):
        return round(sum(x == "length" for x in xs) / len(xs), 4) if xs else None
    return {"rollouts": share(rolls), "references": share(conts)}


def describe(bdir: Build | Path) -> str:
    """The manifest's headline fields as one JSON line."""
    return json.dumps(Build.of(bdir).manifest.headline())
