"""The protocol sensitivity study (benchmarks/protocols.py, `make protocols`, issue 31; docs/protocols.md): per
domain, SVEB's preset and the paper's preset; on the choice domains, SVEB's preset with one of the paper's choices
switched at a time. Each build is sampled, exported as soon as it is done and scored from its export with
every estimator under both evaluation protocols, as Table 4 does (sveb.experiment.table4); the tables are
sveb.experiment.protocols_files'. `a` is benchmarks/protocols.py's parsed flags.

Pairing: the single-choice builds draw from SVEB's candidates with SVEB's seeds. Tiers and the cut are marked on
the states fingerprint and the continuation on the references (sveb.sample.paper.choice_parts), so a build
starts from SVEB's shards and keeps every one whose fingerprint matches (`share`): the continuation setting has
SVEB's very states; the cut and tiers settings share problems and per-draw seeds, and a shard holding other
problems than SVEB's is sampled again, where batch numerics can make a draw differ (docs/protocols.md, Pairing).
G changes the rollout seeds: it shares problems, not draws."""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

from sveb import store
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.core.device import describe as cpu
from sveb.engines import EngineOptions, start, uses_model
from sveb.experiment import partial
from sveb.experiment.runner import Sampler
from sveb.experiment.table4 import eval_domain, export_train, exported, restore, timed_build
from sveb.sample import paper
from sveb.sample.jobs import dtype_of
from sveb.sample.rules import locate
from sveb.store.export import export_build


@dataclass(frozen=True)
class Setting:
    key: str     # its export's folder name and its column: number-sveb, number-cut, ...
    domain: str
    group: str   # "sveb" or "paper": the root its builds share (one train build per domain and root)
    label: str   # what departs from SVEB's preset
    change: dict = field(default_factory=dict)  # the BuildConfig fields it switches
    scored_as: str = ""  # "ref": no build of its own, SVEB's scored with the authors' MCS@k rows

    @property
    def base(self) -> str:
        """The setting it is compared with: SVEB's preset of its domain."""
        return f"{self.domain}-sveb"


CHOICES = ("cut", "continuation", "G", "mcs", "tiers")  # the single-choice settings, in the tables' order


def settings(a) -> list[Setting]:
    """Every setting of the study, SVEB's preset of each domain first."""
    out = []
    for d in a.domains:
        out += [Setting(f"{d}-sveb", d, "sveb", "SVEB's preset"),
                Setting(f"{d}-paper", d, "paper", "the paper's preset (every choice theirs)",
                        {**paper.preset_for(d), "rollouts": a.paper_rollouts, "problems": a.paper_problems})]
        if d not in a.choice_domains:
            continue
        one = {"cut": ("cut at a space of the first rollout, re-tokenised; one state per problem",
                       {"cut": "space", "states_per_problem": 1, "step_pairs": False, "problems": a.choice_problems}),
               "continuation": ("continuations get the full budget on top of the prefix", {"continuation": "full"}),
               "G": (f"G = {a.paper_rollouts}", {"rollouts": a.paper_rollouts}),
               "mcs": ("MCS@k: k of the same reference draws (exact over subsets)", {}),
               "tiers": (f"screening: {paper.SCREEN} samples, equal tiers, the paper's number rule",
                         {"tiers": "paper", "screen": paper.SCREEN, "min_acc": paper.tiers_for(d)[0][0],
                          "max_acc": paper.tiers_for(d)[-1][1]})}
        out += [Setting(f"{d}-{c}", d, "sveb", one[c][0], one[c][1], "ref" if c == "mcs" else "")
                for c in CHOICES if c in a.choices]
    if not a.settings:
        return out
    asked = [s for s in out if s.key in a.settings]  # with SVEB's preset of their domain: the comparisons' base
    return [s for s in out if s in asked or any(t.base == s.key for t in asked)]


def run_order(todo: list[Setting]) -> list[Setting]:
    """The order the settings are sampled and scored in (the tables keep `settings`'): per domain SVEB's preset,
    then the single choices, cheapest first, then the paper's preset (the dearest: 20 screens, G 32), so that a run
    cut off by the clock has finished as many comparisons as it could."""
    rank = {"sveb": 0, "mcs": 1, "continuation": 2, "cut": 3, "G": 4, "tiers": 5, "paper": 6}
    domains = list(dict.fromkeys(s.domain for s in todo))
    return sorted(todo, key=lambda s: (domains.index(s.domain), rank.get(s.key.split("-", 1)[1], 9)))


def configs(s: Setting, a) -> tuple[BuildConfig, BuildConfig | None]:
    """A setting's benchmark build and, for a preset, its train build (the single choices train on SVEB's, so a
    choice changes the benchmark build alone). Every build of a domain draws from its `candidates`."""
    base = dict(domain=s.domain, model=a.model, source=a.source.get(s.domain, "builtin"), problems=a.problems,
                rollouts=a.rollouts, states_per_problem=a.states, step_pairs=a.step_pairs, mc=a.mc,
                mc_extra=a.mc_extra, min_acc=a.min_acc, max_acc=a.max_acc, min_novel_numbers=a.min_novel_numbers,
                seed=a.seed, engine=a.engine, dtype=getattr(a, "dtype", "auto"),
                sampling=SamplingConfig(max_tokens=a.max_tokens))
    test = BuildConfig(**{**base, **s.change})
    test = replace(test, oversample=max(1, a.candidates[s.domain] // test.problems))
    if s.key != f"{s.domain}-{s.group}":
        return test, None
    return test, replace(test, split="train", problems=a.train_problems, mc=a.train_mc, mc_extra=0,
                         states_per_problem=1 if test.choice("cut") == "space" else a.train_states,
                         oversample=a.train_oversample)


def root_of(s: Setting, a) -> Path:
    return Path(a.root) / f"{s.domain}-{s.group}"


def share(src: Path, dst: Path) -> None:
    """Start a new build from another's shards: the pipeline keeps those whose fingerprint is the one it would
    write and samples the rest. A shard is kept whole or not at all: one that would hold other problems is
    sampled again with the same per-draw seeds, where batch numerics can make a draw differ."""
    if (dst / "manifest.json").exists() or not (src / "manifest.json").exists() or not store.complete(src):
        return
    for table in ("candidates", "screens", "rollouts", "states"):
        for part in sorted((src / table).glob("part-*.parquet")):
            (dst / table).mkdir(parents=True, exist_ok=True)
            shutil.copy2(part, dst / table / part.name)


def build_setting(s: Setting, a, sampler: Sampler, console, model_dir) -> dict | None:
    """Sample and export a setting's builds; None if its export exists (or it has no build), else the seconds of
    each build stage this run spent ({} when every shard was found done). The benchmark build is exported before
    its train build is sampled, so it can be committed while that runs; a run that finds the export but not the
    train export samples the train build alone."""
    exp = Path(a.exports) / s.key
    if s.scored_as:
        return None
    test, train = configs(s, a)
    texp = Path(a.exports) / f"{s.key}-train"
    need_train = train is not None and a.train and not (texp / "manifest.json").exists()
    root = root_of(s, a)
    timing = None
    carried = Path(a.partial) / s.key if getattr(a, "partial", "") else None
    if carried is not None and not ((exp / "manifest.json").exists() and not need_train):
        partial.take(carried, root, dtype_of(test), console, s.key)  # an earlier session's (--save-partial)
    if not exported(exp, s.key, console):
        if s.group == "sveb" and s.key != s.base:
            share(locate(configs(Setting(s.base, s.domain, "sveb", ""), a)[0], root), locate(test, root))
        found = len(partial.shards(locate(test, root)))  # carried in, shared, or left by an earlier run here
        bdir, timing = timed_build(sampler, test, root, console)
        if timing and found:  # this run's seconds cover only what those shards left
            timing["shards found"] = found
        export_build(bdir, exp, model_dir)
    if need_train:
        export_train(sampler, train, root, texp, console, model_dir)
    if carried is not None and carried.exists():  # exported: the export is what is committed from now on
        shutil.rmtree(carried)
    return timing


def preflight(a, todo: list[Setting]) -> None:
    """Every build the run will sample draws its candidates first, before any engine starts: a setting whose
    pool exceeds its seed's slot is a one-line error now, not a traceback hours into the study."""
    from sveb.sample.pipeline import check_draw
    for s in todo:
        if s.scored_as:
            continue
        test, train = configs(s, a)
        if not (Path(a.exports) / s.key / "manifest.json").exists():
            check_draw(test, root_of(s, a))
        if train is not None and a.train and not (Path(a.exports) / f"{s.key}-train" / "manifest.json").exists():
            check_draw(train, root_of(s, a))


def save_partial(a, todo: list[Setting], console) -> None:
    """`--save-partial`: what each setting not yet exported has sampled, copied to PARTIAL/<key>/ to be committed
    (sveb.experiment.partial), for a later session's fresh clone to resume from."""
    for s in todo:
        if s.scored_as:
            continue
        test, train = configs(s, a)
        done = [Path(a.exports) / k / "manifest.json" for k in (s.key, *([f"{s.key}-train"] if train else []))]
        if all(m.exists() for m in done):
            continue
        root = root_of(s, a)
        bdirs = [b for b in (locate(test, root), train and locate(train, root)) if b and b.exists()]
        saved = {"dtype": dtype_of(test), "cpu_flags": cpu()}
        n = partial.save(bdirs, root, Path(a.partial) / s.key, saved) if bdirs else 0
        console.print(f"{s.key}: {n} sampled shards saved to {Path(a.partial) / s.key}" if n else
                      f"{s.key}: nothing sampled yet under {root}")


def eval_setting(s: Setting, a, names: list[str], console) -> list[dict]:
    """Every estimator on a setting's export under both protocols (cached by sveb.evaluate): its per-state
    estimates, each record's `domain` the setting's key. The single choices find SVEB's train build in their root."""
    if s.scored_as:
        return []
    ns = argparse.Namespace(exports=a.exports, root=str(root_of(s, a)), train=a.train)
    train = Path(a.exports) / f"{s.base}-train"
    if a.train and s.group == "sveb" and (train / "manifest.json").exists():
        restore(train, root_of(s, a))
    return eval_domain(s.key, ns, names, console)[0]


def already_scored(s: Setting, a, names: list[str], records: list[dict]) -> bool:
    """Whether the stored estimates hold every estimator, with today's parameters, under both protocols on this
    setting's export. A fresh clone has none of the estimators' caches (sveb_data/ is not committed): without
    this a resumed study would score every finished setting again before it samples the next one."""
    from sveb.estimators import make, params_fp
    from sveb.evaluate.protocols import PROTOCOLS
    exp = Path(a.exports) / s.key
    if s.scored_as or not (exp / "manifest.json").exists():
        return False
    fp = store.load_manifest(exp).build_fp
    have = {(r["estimator"], r["params_fp"], r["protocol"]) for r in records
            if r["domain"] == s.key and r["build_fp"] == fp}
    return all((n, params_fp(make(n)), p) in have for n in names for p in PROTOCOLS)


def weights_for(a, model_dir):
    """The weights an export hashes: the model's own, or a placeholder for a model-free engine (scripted: none)."""
    if model_dir is not None or uses_model(a.engine):
        return model_dir
    path = Path(a.root) / "scripted-weights"
    path.mkdir(parents=True, exist_ok=True)
    (path / "scripted.safetensors").write_bytes(b"no weights: the scripted engine (sveb/engines/scripted.py)\n")
    return path


def run(a, engine=None, model_dir=None) -> Path:
    """The study into `a.out`: every setting's builds sampled and exported (skipped where the export exists),
    scored (cached), then the tables. With `a.from_exports`: the tables from the stored per-state estimates
    (OUT/estimates.parquet) and the exports alone, no engine, no estimator."""
    from rich.console import Console

    from sveb.experiment.protocols_files import write_tables
    from sveb.experiment.runner import estimator_list, needs_train
    from sveb.experiment.table4_files import merge_estimates, read_estimates, write_estimates
    console = Console(stderr=True)
    names = estimator_list(a.estimators)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = settings(a)
    study = settings(argparse.Namespace(**{**vars(a), "settings": []}))  # --settings picks what runs, not the tables
    path = out / "estimates.parquet"
    if a.from_exports:
        write_tables(out, study, Path(a.exports), names, read_estimates(path), console)
        return out
    if getattr(a, "save_partial", False):
        save_partial(a, todo, console)
        return out
    a.train = a.train and needs_train(names)
    if engine is None and not uses_model(a.engine):  # a model-free engine (scripted): one for every setting
        engine = start(a.engine, EngineOptions(""))
    model_dir = weights_for(a, model_dir)
    timings_path = out / "timing.json"
    timings = json.loads(timings_path.read_text()) if timings_path.exists() else {}
    preflight(a, todo)
    sampler = Sampler(a.engine, engine)
    records = read_estimates(path) if path.exists() else []
    # Setting by setting: sampled, then scored and the tables written, so that every finished setting's
    # results stand (and can be committed) while the next is sampled. The engine is closed while the
    # estimators run (its memory) and started again for the next build that samples.
    for s in run_order(todo):
        try:
            spent = build_setting(s, a, sampler, console, model_dir)
        finally:
            sampler.close()
        if spent:
            timings[s.key] = spent
            timings_path.write_text(json.dumps(timings, indent=1))
        if already_scored(s, a, names, records):
            console.print(f"{s.key}: every estimator's estimates are in {path}; not scored again")
            new = []
        else:
            new = eval_setting(s, a, names, console)
        if new:
            records = merge_estimates(records, new)
            write_estimates(path, records)
        write_tables(out, study, Path(a.exports), names, records, console)
    return out
