"""The training build an estimator learns on (a trained estimator: its entry's train_split): found by flag or under
the benchmark build's root, and refused when it shares a problem with the benchmark build. `who` names the
estimator (or the reader) that needs it, in every message."""

from __future__ import annotations

import shlex
from pathlib import Path

from sveb import store
from sveb.core.errors import EvalError
from sveb.core.records import BuildData
from sveb.store.handle import Build
from sveb.store.manifest import Manifest


def train_build_command(manifest: dict, root: Path) -> str:
    manifest = Manifest.of(manifest)
    cfg = manifest.config
    args = ["sveb", "build", "--split", "train", "--domain", manifest.domain, "--model", manifest.model,
            "--source", cfg.source, "--rollouts", str(cfg.rollouts),
            "--max-tokens", str(cfg.sampling.max_tokens), "--root", str(root)]
    return " ".join(shlex.quote(a) for a in args)


WHO = "the estimator"  # neutral: every caller in SVEB passes the estimator's own name


def find_train_build(bdir: Path, manifest: dict, spec: str = "", who: str = WHO, console=None) -> Path:
    """The training build for an estimator that learns on disjoint problems: `spec` (a build dir or fp
    prefix), else the newest complete `--split train` build of the same model and domain under the
    benchmark build's root. train_build_of: the same from a Build to a Build."""
    return train_build_of(Build(bdir, Manifest.of(manifest)), spec, who, console).path


def train_build_of(build: Build, spec: str = "", who: str = WHO, console=None,
                   known: dict[Path, Build] | None = None) -> Build:
    """find_train_build between handles: the train build returned with its manifest parsed (once). `known`:
    handles the caller holds already (resolved folder -> Build), used instead of parsing those builds again."""
    manifest = build.manifest
    root = build.path.parent.parent.parent
    if spec:
        if (Path(spec).expanduser() / "manifest.json").exists():
            found = [Path(spec).expanduser().resolve()]
        else:
            found = [b for b in store.list_builds(root) if b.name.startswith(spec)]
        if len(found) != 1:
            raise EvalError(f"{who}: train_build={spec} matches {len(found)} builds under {root}; "
                            f"pass a build directory")
        tb = Build(found[0])
        m = tb.manifest
        if not m.complete:
            raise EvalError(f"{who}: training build {tb} is not complete; rerun its `sveb build`")
        if m.model != manifest.model and console is not None:
            console.print(f"[yellow]{who}: training build {tb.name} was sampled by {m.model}, "
                          f"the benchmark by {manifest.model}[/]")
        return tb
    held = {**(known or {}), build.path.resolve(): build}  # the benchmark build itself may be listed: its handle
    listed = [held.get(b.resolve()) or Build(b) for b in store.list_builds(root)]
    found = [b for b in listed if (m := b.manifest).complete
             and m.model == manifest.model and m.domain == manifest.domain and m.config.split == "train"]
    if not found:
        raise EvalError(f"{who} needs a training build of disjoint problems; none under {root}: "
                        f"run `{train_build_command(manifest, root)}` (or pass -P train_build=<dir>)")
    return found[-1]


def disjoint_problems(tb: Build | Path, data: BuildData, who: str) -> list[str]:
    """The training build's problem ids, refusing one that shares a problem with the benchmark build."""
    pids = set(Build.of(tb).table("problems").column("problem_id").to_pylist())
    overlap = sorted(pids & set(data.problems))
    if overlap:
        raise EvalError(f"{who}: training build {tb} shares {len(overlap)} problems with the benchmark build "
                        f"{data.bdir} (e.g. {overlap[0]}); it must not see benchmark problems "
                        f"(make the training build with --split train)")
    if not pids:
        raise EvalError(f"{who}: training build {tb} has no problems")
    return sorted(pids)
