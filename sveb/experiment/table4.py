"""Table 4 (benchmarks/table4.py, `make table4`): per domain, the powered preset's benchmark and train builds
sampled and exported (or a committed export restored), every estimator scored under both protocols, and the
tables written (sveb.experiment.table4_files). `a` is benchmarks/table4.py's parsed flags."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from sveb import store
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.core.cost import BUILD_STAGES
from sveb.core.device import describe
from sveb.core.models import model_slug
from sveb.estimators import entry, is_variant
from sveb.estimators import names as registered
from sveb.evaluate.protocols import PROTOCOLS
from sveb.experiment import partial
from sveb.experiment.runner import Sampler, estimator_list, evaluate_all, needs_train
from sveb.experiment.table4_files import (
    domain_exports,
    eval_stage,
    export_name,
    merge_estimates,
    read_estimates,
    recorded_machine,
    shown_source,
    size_mb,
    timing_rows,
    write_estimates,
    write_tables,
)
from sveb.lm.hidden import HiddenStates
from sveb.present.table4 import scoring_seconds
from sveb.sample.jobs import dtype_of, stage_clock
from sveb.sample.paper import PRESET as PAPER
from sveb.sample.paper import preset_for
from sveb.sample.rules import locate
from sveb.score.replicates import default_params
from sveb.store.builds import load_build
from sveb.store.export import check_weights, export_build, verify


def configs(domain: str, a, source: str, seed: int | None = None) -> tuple[BuildConfig, BuildConfig]:
    """The powered preset's benchmark and train builds (sveb.experiment.presets), so the number column is the
    powered run's seed-0 build: the same fingerprint, never sampled twice. The benchmark build takes `seed`
    (default a.seed); the train build takes a.train_seed whatever the benchmark's seed, so every seed of a
    domain shares one train build and what was trained on it (its problems are another split: disjoint)."""
    acc = (a.min_acc, a.max_acc)
    if a.preset == "paper" and acc == (PAPER["min_acc"], PAPER["max_acc"]):  # the preset's range: the domain's tiers'
        acc = tuple(preset_for(domain)[k] for k in ("min_acc", "max_acc"))
    base = dict(domain=domain, model=a.model, source=source, oversample=a.oversample, rollouts=a.rollouts,
                min_acc=acc[0], max_acc=acc[1], min_novel_numbers=a.min_novel_numbers,
                engine=a.engine, sampling=SamplingConfig(max_tokens=a.max_tokens), dtype=getattr(a, "dtype", "auto"),
                **({"protocol": "paper", "screen": PAPER["screen"]} if a.preset == "paper" else {}))
    test = BuildConfig(problems=a.problems, states_per_problem=a.states, mc=a.mc, mc_extra=a.mc_extra,
                       step_pairs=a.step_pairs, seed=a.seed if seed is None else seed, **base)
    train = BuildConfig(split="train", problems=a.train_problems, states_per_problem=a.train_states, mc=a.train_mc,
                        mc_extra=0, step_pairs=a.step_pairs, seed=getattr(a, "train_seed", a.seed), **base)
    return test, train


def restore(export: Path, root: Path) -> Path:
    """The export as a build under ROOT (a copy: the committed export gets no estimates or hidden states)."""
    m = store.load_manifest(export)
    bdir = store.build_dir(root, model_slug(m.model), m.domain, m.build_fp + ".export")
    if not (bdir / "manifest.json").exists():
        tmp = bdir.with_name(bdir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(export, tmp)
        tmp.rename(bdir)
    return bdir


def exported(exp: Path, key: str, console) -> bool:
    """Whether an export is already there (verified: a damaged one is an error, not a reason to resample)."""
    if not (exp / "manifest.json").exists():
        return False
    verify(exp)
    console.print(f"{key}: export {exp} exists; not sampled again")
    return True


def timed_build(sampler: Sampler, cfg, root: Path, console) -> tuple[Path, dict[str, float]]:
    """A build and the seconds of each stage this run spent sampling it ({} when every shard was found done)."""
    timing: dict[str, float] = {}
    sampler.ready(cfg, root)  # the engine's start is not the build's cost
    t0 = time.perf_counter()
    with stage_clock(timing):
        bdir = sampler.build(cfg, root, console)
    timing["build wall"] = time.perf_counter() - t0
    if not set(timing) & set(BUILD_STAGES):
        timing = {}  # every shard was already sampled by an earlier run: this run's clock says nothing of its cost
    return bdir, timing


def export_train(sampler: Sampler, cfg, root: Path, exp: Path, console, model_dir) -> None:
    """The train build sampled and exported to `exp` unless exported already: one for every seed (and setting)
    that shares it."""
    if not (exp / "manifest.json").exists():
        export_build(sampler.build(cfg, root, console), exp, model_dir)


def build_domain(domain: str, a, sampler: Sampler, console, model_dir, seed: int | None = None,
                 record=None) -> None:
    """Build (timed per stage) and export a domain's benchmark build of `seed` (default a.seed), and its train
    build unless exported already (one for every seed). The benchmark build is exported, and its timing passed
    to `record(name, timing)` ({} if this run found it already sampled: no stage timed), before the train
    build samples: a run cut off there keeps both."""
    seed = a.seed if seed is None else seed
    exp = Path(a.exports) / export_name(domain, seed)
    texp = Path(a.exports) / f"{domain}-train"
    test, train = configs(domain, a, a.source.get(domain, "builtin"), seed)
    if not exported(exp, exp.name, console):
        for key, cfg in ((exp.name, test), *([(texp.name, train)] if a.train else [])):
            carry_in(a, key, cfg, console)
        found = len(partial.shards(locate(test, Path(a.root))))
        bdir, timing = timed_build(sampler, test, Path(a.root), console)
        if timing and found:  # this run's seconds cover only what the shards found left
            timing["shards found"] = found
        export_build(bdir, exp, model_dir)
        _drop_partial(a, exp.name)  # exported: the export is what is committed from now on
        if record is not None:
            record(exp.name, timing)
    if a.train and not (texp / "manifest.json").exists():
        carry_in(a, texp.name, train, console)
        export_train(sampler, train, Path(a.root), texp, console, model_dir)
        _drop_partial(a, texp.name)


def _drop_partial(a, key: str) -> None:
    if getattr(a, "partial", "") and (Path(a.exports) / key / "manifest.json").exists():
        shutil.rmtree(Path(a.partial) / key, ignore_errors=True)


def carry_in(a, key: str, cfg, console) -> None:
    """An unexported build's shards saved by an earlier session (--save-partial, committed under PARTIAL/KEY),
    put under ROOT before it samples: the build keeps those whose fingerprints match and samples the rest."""
    carried = Path(a.partial) / key if getattr(a, "partial", "") else None
    if carried is None or (Path(a.exports) / key / "manifest.json").exists():
        return
    partial.take(carried, Path(a.root), dtype_of(cfg), console, key)


def unexported(a, domains: list[str], seeds: list[int]) -> dict[str, BuildConfig]:
    """The builds a run over `domains` x `seeds` still has to sample, by export name: each seed's, and the
    domain's train build when something trains."""
    todo = {}
    for d in domains:
        for seed in seeds:
            test, train = configs(d, a, a.source.get(d, "builtin"), seed)
            todo[export_name(d, seed)] = test
            if a.train:
                todo[f"{d}-train"] = train
    return {k: cfg for k, cfg in todo.items() if not (Path(a.exports) / k / "manifest.json").exists()}


def save_partial(a, domains: list[str], seeds: list[int], console) -> None:
    """`--save-partial`: what each unexported build (a seed's, a domain's train build) has sampled under ROOT,
    copied to PARTIAL/<export name>/ to be committed, for a later session's fresh clone to resume from."""
    partial.save_unexported(unexported(a, domains, seeds), Path(a.root), Path(a.partial), console)


def _defaults(name: str) -> dict:
    return json.loads(default_params(name) or "{}")


def trained(names: list[str]) -> list[str]:
    """The estimators among `names` that train: their default settings have a training `seed` (a plugin's too)."""
    return [n for n in names if "seed" in _defaults(n)]


def replicate_seeds(name: str, trainings: int) -> list[int]:
    """The training seeds of a trained estimator's replicates: the trainings - 1 seeds after its default one."""
    first = int(_defaults(name)["seed"])
    return list(range(first + 1, first + max(1, int(trainings))))


def eval_domain(domain: str, a, names: list[str], console, name: str | None = None, stored: list[dict] = (),
                save=None) -> tuple[list[dict], dict[str, float]]:
    """Every estimator on a domain's export `name` (default: the domain's, seed 0) under both protocols
    (sveb.evaluate, cached), and each trained one again with `a.trainings` - 1 more training seeds (its
    replicates: the same settings but `seed`); returns its per-state estimates as ESTIMATES records (a
    replicate's with its `training` seed) and the seconds of each stage. An estimator (or replicate) whose
    estimates with today's parameters are in `stored` under both protocols is not run again (a fresh clone has
    none of sveb.evaluate's caches); `save(records, timing)` is called after each one, so that a run cut off
    keeps every estimator it finished."""
    bdir = restore(Path(a.exports) / (name or domain), Path(a.root))
    if a.train and (Path(a.exports) / f"{domain}-train").exists():
        restore(Path(a.exports) / f"{domain}-train", Path(a.root))
    timing: dict[str, float] = {}
    data = load_build(bdir)
    fp = data.manifest.build_fp
    have = {(r["estimator"], r["params_fp"], r["protocol"], r.get("training")) for r in stored
            if r["domain"] == domain and r["build_fp"] == fp}
    jobs = [(n, None) for n in names] + [(n, seed) for n in trained(names)
                                         for seed in replicate_seeds(n, getattr(a, "trainings", 1))]
    todo = [(n, seed) for n, seed in jobs if not {(n, _params_fp(n, seed), p, seed) for p in PROTOCOLS} <= have]
    if len(todo) < len(jobs):
        console.print(f"{name or domain}: {len(jobs) - len(todo)} of {len(jobs)} estimator runs found in the stored "
                      f"estimates; not run again")
    if any(entry(n).needs_hidden or entry(n).needs_training for n, _ in todo):
        check_weights(bdir, data.manifest)
        hs = HiddenStates(bdir, data.manifest.model)
        seconds = hidden_pass(hs, data, console)
        if seconds is not None:
            timing["hidden pass"] = seconds
        elif (est := cached_pass_seconds(hs.dir)) is not None:
            # found cached by a run that did not record it (stopped before writing timing.json)
            timing["hidden pass (from cache file times)"] = est
    records = []
    for n, seed in todo:
        params, label = ({}, None) if seed is None else ({"seed": str(seed)}, f"training seed {seed}")
        rows = []
        for row, wall in evaluate_all(bdir, [n], console, label, params):
            stage = eval_stage(n, seed, row["protocol"])
            timing[stage] = eval_seconds(bdir, row, wall)
            rows.append(row)
        est_rows = store.read_table(bdir / "estimates").to_pylist()
        new = []
        for r in rows:
            ident = (r["estimator"], r["params_fp"], r["protocol"])
            how = f"sveb eval {r['estimator']} {r['params_fp']}" + (f" --param seed={seed}" if seed is not None else "")
            new += [{"domain": domain, "build_fp": fp, "state_id": e["state_id"], "estimator": e["estimator"],
                     "params_fp": e["params_fp"], "protocol": e["protocol"], "value": e["value"], "provenance": how,
                     "training": seed} for e in est_rows if (e["estimator"], e["params_fp"], e["protocol"]) == ident]
        records += new
        if save is not None:
            save(new, timing)
    return records, timing


def _params_fp(name: str, seed: int | None) -> str:
    from sveb.estimators import make, params_fp
    return params_fp(make(name, {} if seed is None else {"seed": str(seed)}))


def eval_seconds(bdir: Path, row: dict, wall: float) -> float:
    """What an estimator's evaluation cost when it ran: its scores' estimation seconds plus its recorded
    prepare() seconds (training), both stored beside the scores, so a rerun that finds them cached reports the
    run that computed them rather than the seconds it took to read them."""
    key = f"{row['estimator']}-{row['params_fp']}-{row['protocol']}"
    path = bdir / "timings" / f"{key}.json"
    prep = json.loads(path.read_text()).get("prepare_seconds", 0.0) if path.exists() else 0.0
    est = row.get("seconds")
    return float(est) + float(prep) if est is not None and np.isfinite(est) else wall


def hidden_pass(hs, data, console=None) -> float | None:
    """Seconds of the shared hidden-state pass every hidden-state consumer reads, or None when this run found
    all of it cached (HiddenStates.ensure returns None for a cached group). A bar per problem: on a large build
    (200 problems x 32 rollouts) the pass runs for minutes before the first estimator prints."""
    from rich.progress import track
    t0 = time.perf_counter()
    pids = sorted(data.problems)
    if console is not None:  # a log file gets no live bar: this line says what the silence is
        console.print(f"hidden states: shared pass over {len(pids)} problems (cached ones are read)")
    computed = [hs.ensure(pid, data.rollouts[pid]) is not None
                for pid in track(pids, description="hidden states (shared pass)", console=console, transient=True)]
    return time.perf_counter() - t0 if any(computed) else None


def cached_pass_seconds(cache: Path) -> float | None:
    """The wall time of a cached hidden pass, read from its per-problem files' write times: the span from the
    first file to the last covers n - 1 problems, so it is scaled by n / (n - 1). None below two files."""
    times = sorted(p.stat().st_mtime for p in Path(cache).glob("*.npz"))
    if len(times) < 2:
        return None
    return (times[-1] - times[0]) * len(times) / (len(times) - 1)


def domain_row(domain: str, a, timing: dict, eval_s: float, name: str | None = None) -> dict:
    """One build's row of domains.csv: `name` is its export (default the domain's seed-0 export)."""
    exp = Path(a.exports) / (name or domain)
    m = store.load_manifest(exp)
    acc = m.candidate_accuracy
    cfg = BuildConfig.from_manifest(m)
    band = [v for v in acc.values() if cfg.min_acc <= v <= cfg.max_acc]
    rolls = store.read_table(exp / "rollouts").to_pylist()
    kept = set(store.read_table(exp / "problems").column("problem_id").to_pylist())
    rewards = [r["reward"] for r in rolls if r["problem_id"] in kept]
    tr = m.truncated
    return {"domain": domain, "seed": cfg.seed, "build": m.build_fp, "source": shown_source(cfg.source),
            "problems": m.n_problems, "states": m.n_states,
            "accuracy": round(float(np.mean(rewards)), 4) if rewards else None,
            "band share": round(len(band) / len(acc), 4) if acc else None,
            "rollouts cut off": tr.get("rollouts"), "references cut off": tr.get("references"),
            # the builds' own records (a resumed build's manifest keeps the run that sampled it; this run's wall
            # clock would be the seconds it took to find every shard done)
            "build s": m.seconds, "train build s": _seconds(Path(a.exports) / f"{domain}-train"),
            "eval s": round(eval_s, 1) if eval_s else None, "export MB": round(size_mb(exp), 2)}


def _seconds(export: Path):
    return store.load_manifest(export).seconds if (export / "manifest.json").exists() else None


def variants() -> list[str]:
    """SVEB's earlier readings (numca-sveb, ...): shown where the stored estimates hold them."""
    return [n for n in registered(variants=True) if is_variant(n)]


def seeds_of(a) -> list[int]:
    """The benchmark seeds a run samples and scores: --seeds, else --seed."""
    return [int(x) for x in str(getattr(a, "seeds", "") or "").replace(",", " ").split()] or [a.seed]


def tables(a, out: Path, domains: list[str], names: list[str], records: list[dict], timings: dict,
           machine: str, console) -> None:
    """Every table from the per-state estimates: a domain's cells pool every seed's export found under EXPORTS
    (domain_exports); domains.csv and the cost table have a row or column per export. SVEB's earlier readings
    (variants) are shown where the estimates hold them."""
    names = names + [n for n in variants() if n not in names and any(r["estimator"] == n for r in records)]
    drows, trows, shown = [], [], []
    for d in domains:
        for name in domain_exports(Path(a.exports), d) or [d]:
            t = timings.get(name, {})
            drows.append(domain_row(d, a, t, scoring_seconds(t), name))
            trows += timing_rows(name, t, drows[-1]["states"])
            shown.append(name)
    write_tables(a, out, domains, names, records, drows, trows, timings, machine, console, shown)


def run(a, engine=None, model_dir=None) -> Path:
    """Table 4 (see _run); with --dtype pinned, the model-reading estimators' `auto` on a CPU means it too (the
    hidden states then share the builds' dtype; a GPU reads in bfloat16 whatever the builds')."""
    pinned = getattr(a, "dtype", "auto")
    if pinned == "auto":
        return _run(a, engine, model_dir)
    before = os.environ.get("SVEB_CPU_DTYPE")
    os.environ["SVEB_CPU_DTYPE"] = pinned
    try:
        return _run(a, engine, model_dir)
    finally:
        if before is None:
            os.environ.pop("SVEB_CPU_DTYPE", None)
        else:
            os.environ["SVEB_CPU_DTYPE"] = before


def _run(a, engine=None, model_dir=None) -> Path:
    """Table 4 into `a.out`; `engine`, `model_dir`: a passed-in engine (tests: the scripted one) and the weights
    to hash. With `a.from_exports`, scored again from the stored per-state estimates: no sampling, no estimator.
    A sampling run scores the seeds it is given and keeps every other stored estimate, so seeds can be added
    one run at a time."""
    console = Console(stderr=True)
    names = estimator_list([n.strip() for n in a.estimators.split(",") if n.strip()])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    domains = a.domains.replace(",", " ").split()
    timing_path = out / "timing.json"
    timings = json.loads(timing_path.read_text()) if timing_path.exists() else {}
    est_path = Path(a.estimates or out / "estimates.parquet")
    if a.from_exports or a.add:
        records = read_estimates(est_path)
        if a.add:  # score these on the committed exports and put their cells beside the stored ones
            asked = [n.strip() for n in a.add.split(",") if n.strip()]
            add = [n for n in estimator_list(asked) if n in asked]  # validated; the baseline only if asked
            for d in (a.add_domains.replace(",", " ").split() or domains):
                for name in _add_exports(a, d):
                    records = merge_estimates(records, eval_domain(d, a, add, console, name)[0])
            names += [n for n in add if n not in names]
            write_estimates(out / "estimates.parquet", records)
        tables(a, out, domains, names, records, timings, recorded_machine(out / "table4.md"), console)
        return out
    a.train = a.train and needs_train(names)
    seeds = seeds_of(a)
    if getattr(a, "save_partial", False):
        save_partial(a, domains, seeds, console)
        return out
    preflight(a, domains, seeds)
    sampler = Sampler(a.engine, engine)  # started for a build with sampling left, closed before the scoring
    records = read_estimates(est_path) if est_path.exists() else []

    def write_timings() -> None:
        store.atomic_write_bytes(timing_path, json.dumps(timings, indent=1).encode())

    def record(name: str, built: dict) -> None:
        timings[name] = built
        write_timings()

    for d in domains:  # domain by domain: a run cut off by a session's end leaves whole domains scored
        for seed in seeds:
            build_domain(d, a, sampler, console, model_dir, seed, record=record)
        sampler.close()
        for seed in seeds:
            name = export_name(d, seed)

            def save(new: list[dict], ev: dict, name=name) -> None:  # after each estimator: a cut-off run keeps it
                nonlocal records  # over the file as it is now: cells an `--add` run wrote meanwhile stay
                on_disk = out / "estimates.parquet"
                records = merge_estimates(merge_estimates(read_estimates(on_disk) if on_disk.exists() else [],
                                                          records), new)
                timings.setdefault(name, {}).update(ev)
                if "hidden pass" in timings[name]:  # a recorded time beats the cache files' estimate
                    timings[name].pop("hidden pass (from cache file times)", None)
                write_timings()
                write_estimates(out / "estimates.parquet", records)
            eval_domain(d, a, names, console, name, stored=records, save=save)
    tables(a, out, table_domains(a, domains, records), names, records, timings, f"CPU flags: {describe()}", console)
    return out


def table_domains(a, run: list[str], records: list[dict]) -> list[str]:
    """The domains a sampling run's tables show: its own, and every other domain already scored into the same
    estimates with exports under --exports (domain by domain, a later run must not drop an earlier one's column);
    in the benchmark's domain order, unknown names after it."""
    from sveb.data_builders import DOMAINS
    have = {r["domain"] for r in records}
    keep = set(run) | {d for d in have if domain_exports(Path(a.exports), d)}
    return [d for d in DOMAINS if d in keep] + [d for d in run if d not in DOMAINS]


def preflight(a, domains: list[str], seeds: list[int]) -> None:
    """Every build this run will sample draws its candidates first (no engine): a seed its source cannot fill, or
    carried shards (--partial) of another dtype, is a one-line error now, not after the domains before it have
    sampled for hours."""
    from sveb.sample.pipeline import check_draw
    for key, cfg in unexported(a, domains, seeds).items():
        check_draw(cfg, Path(a.root))
        if getattr(a, "partial", ""):  # carried shards of another dtype would all be sampled anew
            partial.check_dtype(Path(a.partial) / key, dtype_of(cfg))


def _add_exports(a, domain: str) -> list[str]:
    """The exports --add scores on a domain: --seeds's, if given, else every one present."""
    if getattr(a, "seeds", ""):
        return [export_name(domain, s) for s in seeds_of(a)]
    return domain_exports(Path(a.exports), domain) or [domain]
