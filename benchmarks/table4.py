"""Table 4 on the embedded default: one build per domain, every estimator, both protocols -> results/table4/.

Resumable domain by domain: a domain whose export exists in EXPORTS is not sampled again; its export is restored
under ROOT (beside the builds, as `<build_fp>.export`) and scored there, so the numbers are those anyone gets from
`sveb eval --build <export>`. Scores already computed are kept (evaluate caches them). Writes table4.md (held-out
first, then in-group, the paper's protocol), scores.csv, domains.csv (states, accuracy, truncation, wall times,
export size), timing.csv (seconds per state of each stage: screening, rollouts, references, hidden pass, each
estimator), each naming the machine's CPU flags, interaction.csv (per estimator and protocol: is its Δ vs grpo the
same in every domain? Cochran's Q, sveb.score.power) and estimates.parquet (every cell's per-state estimates, so the
tables can be scored again without running an estimator).

scores.csv has one row per cell (domain x estimator x protocol): MAE [CI]; Δ of squared error vs grpo [CI], its
CR1 standard error and G - 1 df; p (cluster-robust t); the Holm family, its size m and the Holm p; the verdict;
and beside each "no difference" the minimum detectable Δ at 80% power at alpha / m (sveb.score.power.mde). Every Δ,
CI and p comes from sveb.score.pooling.paired / sveb.score.scoring; table4.md shows MAE with the marks, then per protocol
the numbers behind each mark, then the interaction test.

--from-exports scores again without sampling or running any estimator: each domain's states and references
from its export, the per-state estimates from --estimates (default OUT/estimates.parquet, committed: the
exports' own estimates/ folders are git-ignored), the timings from OUT/timing.json. A cell with no stored
per-state estimates keeps the MAE [CI] of OUT/scores.csv, marked † and untested. This is the command that
regenerates results/table4/{table4.md,scores.csv,domains.csv,timing.csv,interaction.csv} after a change to
the scoring code:

    python benchmarks/table4.py --from-exports

Each domain's builds are the powered preset's (50 problems x 4 states in step pairs, G = 16, MCS@20 + 4 extras,
seed 0; a train build of 60 problems x 2 states, MC@4), so the number column is the powered run's seed-0 build.

    python benchmarks/table4.py                       # the five domains (hours on 2 cores; rerun to resume)
    python benchmarks/table4.py --domains number --problems 8 --states 2
    python benchmarks/table4.py --from-exports        # rescore the committed estimates: seconds, no engine
    python benchmarks/table4.py --preset paper        # the Hista/Numca authors' protocol (sveb/sample/paper.py): G = 32,
                                                      # one state per problem, equal tiers -> results/table4-paper/
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from sveb import store
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.data_builders import declared
from sveb.sample.paper import PRESET as PAPER
from sveb.present.report_format import md_table
from sveb.score import power
from sveb.present import table4 as t4
from sveb.present.table4 import cost_markdown, stage_timer

DOMAINS = list(declared())  # every declared domain, in order (sveb.data_builders.Domain)
# Per domain: the builtin generator unless a real dataset puts >= 30% of its screened candidates inside the band
# on the default model (docs/domains.md: gsm8k, math500 and humaneval 0.12, mbpp 0, arc-challenge 0.88,
# mmlu-stem 0.62). Science takes mmlu-stem: its file has no split of its own, so halves by id give a disjoint
# train build offline (the ARC copy here holds only ARC's test split, so trained estimators would have none).
MMLU = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "mmlu_stem" / "test.jsonl"
SOURCES = {d: "builtin" for d in DOMAINS} | {"science": f"mmlu-stem={MMLU.resolve()}" if MMLU.exists() else "mmlu-stem"}
PROTOCOLS = ["held-out", "in-group"]


def configs(domain: str, a, source: str) -> tuple[BuildConfig, BuildConfig]:
    """The powered preset's benchmark and train builds (sveb/experiment/demo.py), so the number column is the powered
    run's seed-0 build: the same fingerprint, never sampled twice."""
    base = dict(domain=domain, model=a.model, source=source, oversample=a.oversample, rollouts=a.rollouts,
                min_acc=a.min_acc, max_acc=a.max_acc, min_novel_numbers=a.min_novel_numbers, seed=a.seed,
                engine=a.engine, sampling=SamplingConfig(max_tokens=a.max_tokens),
                **({"protocol": "paper", "screen": PAPER["screen"]} if a.preset == "paper" else {}))
    test = BuildConfig(problems=a.problems, states_per_problem=a.states, mc=a.mc, mc_extra=a.mc_extra,
                       step_pairs=a.step_pairs, **base)
    train = BuildConfig(split="train", problems=a.train_problems, states_per_problem=a.train_states, mc=a.train_mc,
                        mc_extra=0, step_pairs=a.step_pairs, **base)
    return test, train


def restore(export: Path, root: Path) -> Path:
    """The export as a build under ROOT (a copy: the committed export gets no estimates or hidden states)."""
    m = store.read_manifest(export)
    from sveb.core.models import model_slug
    bdir = store.build_dir(root, model_slug(m["model"]), m["domain"], m["build_fp"] + ".export")
    if not (bdir / "manifest.json").exists():
        tmp = bdir.with_name(bdir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(export, tmp)
        tmp.rename(bdir)
    return bdir


def size_mb(path: Path) -> float:
    """An export's size: its manifest, README and tables, not what scoring it wrote beside them (estimates,
    hidden states, ... which git ignores there)."""
    from sveb.store.export import TABLES
    keep = [path / "manifest.json", path / "README.md", *(p for t in TABLES for p in (path / t).rglob("*"))]
    return sum(p.stat().st_size for p in keep if p.is_file()) / 1e6


def build_domain(domain: str, a, engine, console, model_dir) -> dict | None:
    """Build (timed per stage) and export a domain's benchmark and training builds; None if its export exists,
    {} if this run found it already sampled (no stage timed)."""
    from sveb.store.export import export_build, verify
    from sveb.sample.pipeline import build
    exp = Path(a.exports) / domain
    if (exp / "manifest.json").exists():
        verify(exp)
        console.print(f"{domain}: export {exp} exists; not sampled again")
        return None
    test, train = configs(domain, a, a.source.get(domain, SOURCES[domain]))
    timing: dict[str, float] = {}
    t0 = time.perf_counter()
    with stage_timer(timing):
        bdir = build(test, a.root, engine=engine, console=console)
    timing["build wall"] = time.perf_counter() - t0
    if not set(timing) & {"screening", "rollouts", "references"}:
        timing = {}  # every shard was already sampled by an earlier run: this run's clock says nothing of its cost
    if a.train:
        export_build(build(train, a.root, engine=engine, console=console), Path(a.exports) / f"{domain}-train",
                     model_dir)
    export_build(bdir, exp, model_dir)
    return timing


def eval_domain(domain: str, a, names: list[str], console) -> tuple[list[dict], dict[str, float]]:
    """Every estimator on a domain's export under both protocols (sveb.evaluate, cached); returns its per-state
    estimates as ESTIMATES records and the seconds of each stage."""
    from sveb.store.builds import load_build
    from sveb.estimators import entry
    from sveb.evaluate import evaluate
    bdir = restore(Path(a.exports) / domain, Path(a.root))
    if a.train and (Path(a.exports) / f"{domain}-train").exists():
        restore(Path(a.exports) / f"{domain}-train", Path(a.root))
    timing: dict[str, float] = {}
    data = load_build(bdir)
    if any(entry(n).needs_hidden or entry(n).needs_training for n in names):
        from sveb.store.export import check_weights
        from sveb.lm.hidden import HiddenStates
        check_weights(bdir, data.manifest)
        hs = HiddenStates(bdir, data.manifest["model"])
        seconds = hidden_pass(hs, data)
        if seconds is not None:
            timing["hidden pass"] = seconds
        elif (est := cached_pass_seconds(hs.dir)) is not None:
            # found cached by a run that did not record it (stopped before writing timing.json)
            timing["hidden pass (from cache file times)"] = est
    rows = []
    for name in names:
        for protocol in PROTOCOLS:
            t0 = time.perf_counter()
            row = evaluate(bdir, name, {}, protocol, console=console)
            timing[f"eval {name} ({protocol})"] = eval_seconds(bdir, row, time.perf_counter() - t0)
            rows.append(row)
    est_rows = store.read_table(bdir / "estimates").to_pylist()
    records = []
    for r in rows:
        ident = (r["estimator"], r["params_fp"], r["protocol"])
        records += [{"domain": domain, "build_fp": data.manifest["build_fp"], "state_id": e["state_id"],
                     "estimator": e["estimator"], "params_fp": e["params_fp"], "protocol": e["protocol"],
                     "value": e["value"], "provenance": f"sveb eval {e['estimator']} {e['params_fp']}"}
                    for e in est_rows if (e["estimator"], e["params_fp"], e["protocol"]) == ident]
    return records, timing


def eval_seconds(bdir: Path, row: dict, wall: float) -> float:
    """What an estimator's evaluation cost when it ran: its scores' estimation seconds plus its recorded
    prepare() seconds (training), both stored beside the scores, so a rerun that finds them cached reports the
    run that computed them rather than the seconds it took to read them."""
    key = f"{row['estimator']}-{row['params_fp']}-{row['protocol']}"
    path = bdir / "timings" / f"{key}.json"
    prep = json.loads(path.read_text()).get("prepare_seconds", 0.0) if path.exists() else 0.0
    est = row.get("seconds")
    return float(est) + float(prep) if est is not None and np.isfinite(est) else wall


def hidden_pass(hs, data) -> float | None:
    """Seconds of the shared hidden-state pass every hidden-state consumer reads, or None when this run found
    all of it cached (HiddenStates.ensure returns None for a cached group)."""
    t0 = time.perf_counter()
    computed = [hs.ensure(pid, data.rollouts[pid]) is not None for pid in sorted(data.problems)]
    return time.perf_counter() - t0 if any(computed) else None


def cached_pass_seconds(cache: Path) -> float | None:
    """The wall time of a cached hidden pass, read from its per-problem files' write times: the span from the
    first file to the last covers n - 1 problems, so it is scaled by n / (n - 1). None below two files."""
    times = sorted(p.stat().st_mtime for p in Path(cache).glob("*.npz"))
    if len(times) < 2:
        return None
    return (times[-1] - times[0]) * len(times) / (len(times) - 1)


def shown_source(source: str | None) -> str | None:
    """A source as a reader's table shows it: a local file as its last two path parts, not this machine's path."""
    if not source or "=" not in source:
        return source
    name, path = source.split("=", 1)
    return f"{name}=" + "/".join(Path(path).parts[-2:])


def domain_row(domain: str, a, timing: dict, eval_s: float) -> dict:
    exp = Path(a.exports) / domain
    m = store.read_manifest(exp)
    acc = m.get("candidate_accuracy") or {}
    cfg = m.get("config", {})
    band = [v for v in acc.values() if cfg.get("min_acc", 0.1) <= v <= cfg.get("max_acc", 0.8)]
    rolls = store.read_table(exp / "rollouts").to_pylist()
    kept = set(store.read_table(exp / "problems").column("problem_id").to_pylist())
    rewards = [r["reward"] for r in rolls if r["problem_id"] in kept]
    tr = m.get("truncated") or {}
    return {"domain": domain, "source": shown_source(cfg.get("source")), "problems": m.get("n_problems"), "states": m.get("n_states"),
            "accuracy": round(float(np.mean(rewards)), 4) if rewards else None,
            "band share": round(len(band) / len(acc), 4) if acc else None,
            "rollouts cut off": tr.get("rollouts"), "references cut off": tr.get("references"),
            # the builds' own records (a resumed build's manifest keeps the run that sampled it; this run's wall
            # clock would be the seconds it took to find every shard done)
            "build s": m.get("seconds"), "train build s": _seconds(Path(a.exports) / f"{domain}-train"),
            "eval s": round(eval_s, 1), "export MB": round(size_mb(exp), 2)}


def _seconds(export: Path):
    return store.read_manifest(export).get("seconds") if (export / "manifest.json").exists() else None


def write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--domains", default=" ".join(DOMAINS))
    p.add_argument("--source", action="append", default=[], help="DOMAIN=SOURCE (default: builtin)")
    p.add_argument("--estimators", default="", help="comma-separated (default: every registered one)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--engine", default="vllm")
    p.add_argument("--root", default="sveb_data")
    p.add_argument("--exports", default="results/table4/exports")
    p.add_argument("--out", default="results/table4")
    from sveb.experiment.demo import BASE, PRESETS
    size, train = PRESETS["powered"]
    for k, v in (("problems", size["problems"]), ("states", size["states_per_problem"]), ("rollouts", size["rollouts"]),
                 ("mc", BASE["mc"]), ("mc-extra", BASE["mc_extra"]), ("oversample", BASE["oversample"]),
                 ("max-tokens", BASE["sampling"].max_tokens), ("train-problems", train["problems"]),
                 ("train-states", train["states_per_problem"]), ("train-mc", train["mc"]),
                 ("seed", 0), ("min-novel-numbers", -1)):
        p.add_argument(f"--{k}", type=int, default=v)
    p.add_argument("--min-acc", type=float, default=BASE["min_acc"])
    p.add_argument("--max-acc", type=float, default=BASE["max_acc"])
    p.add_argument("--no-step-pairs", dest="step_pairs", action="store_false",
                   help="cut states independently (default: in pairs t1 < t2 of one rollout, as the powered preset)")
    p.add_argument("--no-train", dest="train", action="store_false", help="skip the training builds (ppo-1 needs one)")
    p.add_argument("--from-exports", action="store_true",
                   help="score the stored per-state estimates (--estimates) on the exports' states and references: "
                        "no sampling, no estimator run, no engine")
    p.add_argument("--estimates", default="", help="per-state estimates for --from-exports (default OUT/estimates.parquet)")
    p.add_argument("--preset", choices=["sveb", "paper"], default="sveb",
                   help="paper: the Hista/Numca authors' protocol (G 32, one space cut per problem, full-budget "
                        "continuations, 20 screens in equal tiers; --max-tokens as given), into results/table4-paper")
    if p.parse_known_args(argv)[0].preset == "paper":
        p.set_defaults(rollouts=PAPER["rollouts"], states=1, train_states=1, mc=PAPER["mc"], mc_extra=PAPER["mc_extra"],
                       min_acc=PAPER["min_acc"], max_acc=PAPER["max_acc"], step_pairs=False,
                       exports="results/table4-paper/exports", out="results/table4-paper")
    a = p.parse_args(argv)
    a.source = dict(s.split("=", 1) for s in a.source)
    return a


def main(argv: list[str] | None = None, engine=None, model_dir=None) -> Path:
    """`engine`, `model_dir`: a passed-in engine (tests: the scripted one) and the weights to hash."""
    a = parse(argv)
    console = Console(stderr=True)
    from sveb.estimators import BASELINE, entry, names as registered
    names = [n.strip() for n in a.estimators.split(",") if n.strip()] or registered()
    names = [BASELINE] + [n for n in names if n != BASELINE]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    domains = a.domains.replace(",", " ").split()
    timing_path = out / "timing.json"
    timings = json.loads(timing_path.read_text()) if timing_path.exists() else {}
    if a.from_exports:
        records = read_estimates(Path(a.estimates or out / "estimates.parquet"))
        machine = recorded_machine(out / "table4.md")
        drows, trows = [], []
        for d in domains:
            spent = sum(v for k, v in timings.get(d, {}).items() if k.startswith(("eval ", "hidden pass")))
            drows.append(domain_row(d, a, timings.get(d, {}), spent))
            trows += timing_rows(d, timings.get(d, {}), drows[-1]["states"])
        write_tables(a, out, domains, names, records, drows, trows, timings, machine, console)
        return out
    a.train = a.train and any(entry(n).train_split for n in names)
    if engine is None and any(not (Path(a.exports) / d / "manifest.json").exists() for d in domains):
        from sveb.engines import make_engine
        from sveb.core.models import resolve
        from sveb.sample.jobs import dtype_of
        cfg = configs(domains[0], a, "builtin")[0]
        engine = make_engine(a.engine, resolve(a.model), a.seed, dtype=dtype_of(cfg))  # one engine for every domain
    records, drows, trows = [], [], []
    for d in domains:
        built = build_domain(d, a, engine, console, model_dir)
        if built is not None:
            timings[d] = built
            timing_path.write_text(json.dumps(timings, indent=1))
    if engine is not None and hasattr(engine, "close"):
        engine.close()  # free its memory before hidden states and critics
    for d in domains:
        t0 = time.perf_counter()
        recs, ev = eval_domain(d, a, names, console)
        records += recs
        timings.setdefault(d, {}).update(ev)
        if "hidden pass" in timings[d]:  # a recorded time beats the cache files' estimate
            timings[d].pop("hidden pass (from cache file times)", None)
        timing_path.write_text(json.dumps(timings, indent=1))  # each domain's as soon as it is scored
        spent = sum(v for k, v in timings[d].items() if k.startswith(("eval ", "hidden pass")))
        drows.append(domain_row(d, a, timings[d], spent or time.perf_counter() - t0))
        trows += timing_rows(d, timings[d], drows[-1]["states"])
    timing_path.write_text(json.dumps(timings, indent=1))
    write_estimates(out / "estimates.parquet", records)
    from sveb.lm.device import describe
    write_tables(a, out, domains, names, records, drows, trows, timings, f"CPU flags: {describe()}", console)
    return out


ESTIMATE_FIELDS = ("domain", "build_fp", "state_id", "estimator", "params_fp", "protocol", "value", "provenance")


def write_estimates(path: Path, records: list[dict]) -> None:
    """Every cell's per-state estimates (ESTIMATE_FIELDS), sorted, so that --from-exports can score them again."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    key = {(r["domain"], r["estimator"], r["protocol"], r["state_id"]): r for r in records}  # one per cell x state
    rows = [key[k] for k in sorted(key)]
    table = pa.table({f: [r[f] for r in rows] for f in ESTIMATE_FIELDS})
    pq.write_table(table, path, compression="zstd")


def read_estimates(path: Path) -> list[dict]:
    if not path.exists():
        raise SystemExit(f"{path}: no stored per-state estimates; run without --from-exports first (or pass "
                         f"--estimates)")
    import pyarrow.parquet as pq
    return pq.read_table(path).to_pylist()


def recorded_machine(md: Path) -> str:
    """The CPU flags line of the run whose timings the tables show (a rescore measures nothing itself)."""
    found = re.search(r"CPU flags: [^.\n]*", md.read_text()) if md.exists() else None
    return found.group(0) if found else "CPU flags: not recorded"


def timing_rows(domain: str, timing: dict[str, float], states) -> list[dict]:
    n = states or 1
    return [{"domain": domain, "stage": k, "seconds": round(s, 2), "seconds per state": round(s / n, 4)}
            for k, s in timing.items()]


def domain_states(export: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A domain's state ids (states-table order), their MC references and their problems (the clusters)."""
    states = store.read_table(export / "states").to_pylist()
    refs = {r["state_id"]: r["value"] for r in store.read_table(export / "references").to_pylist()}
    ids = [s["state_id"] for s in states]
    ref = np.array([np.nan if refs.get(i) is None else refs[i] for i in ids], dtype=float)
    return ids, ref, np.array([s["problem_id"] for s in states], dtype=object)


def table_cells(a, domains: list[str], names: list[str], records: list[dict], previous: Path) -> list[dict]:
    """Every cell from the stored per-state estimates (sveb.present.table4.cells). A cell without them keeps the
    MAE [CI] of the previous scores.csv, if it has one, and no test."""
    from sveb.estimators import BASELINE
    old = {(r["domain"], r["estimator"], r["protocol"]): r for r in csv.DictReader(open(previous))} \
        if previous.exists() else {}
    rows = []
    for d in domains:
        export = Path(a.exports) / d
        fp = store.read_manifest(export)["build_fp"]
        ids, ref, groups = domain_states(export)
        index = {sid: i for i, sid in enumerate(ids)}
        est: dict[str, dict[str, np.ndarray]] = {p: {} for p in PROTOCOLS}
        for r in records:
            if r["domain"] == d and r["build_fp"] == fp and r["estimator"] in names and r["protocol"] in est \
                    and r["state_id"] in index:
                arr = est[r["protocol"]].setdefault(r["estimator"], np.full(len(ids), np.nan))
                arr[index[r["state_id"]]] = np.nan if r["value"] is None else r["value"]
        for p in PROTOCOLS:
            est[p] = {n: est[p][n] for n in names if n in est[p]}
        got = {(r["estimator"], r["protocol"]): r
               for r in t4.cells(d, est, BASELINE, ref, groups)}
        for n in names:
            for p in PROTOCOLS:
                if (n, p) in got:
                    rows.append(got[(n, p)])
                elif (d, n, p) in old:
                    o = old[(d, n, p)]
                    rows.append({c: "" for c in t4.COLUMNS} | {k: o[k] for k in ("domain", "estimator", "protocol",
                                "n_states", "mae", "mae_ci_low", "mae_ci_high")}
                                | {"verdict": "n/a" if n != BASELINE else "", "estimates": STORED_MAE_ONLY})
    return rows


STORED_MAE_ONLY = "MAE only (no per-state estimates stored)"


def write_tables(a, out: Path, domains: list[str], names: list[str], records: list[dict], drows: list[dict],
                 trows: list[dict], timings: dict, machine: str, console) -> None:
    """scores.csv, interaction.csv, domains.csv, timing.csv and table4.md from the per-state estimates."""
    from sveb.estimators import BASELINE
    rows = table_cells(a, domains, names, records, out / "scores.csv")
    tested = [r for r in rows if r["estimates"] == "per state" and r["delta_sq_se"] != ""]
    inter = power.interaction(tested)
    write_csv(out / "scores.csv", rows)
    write_csv(out / "interaction.csv", inter or [{"protocol": ""}])
    write_csv(out / "domains.csv", drows)
    write_csv(out / "timing.csv", trows)
    untested = sorted({(r["domain"], r["estimator"]) for r in rows if r["estimates"] == STORED_MAE_ONLY})
    md = [f"# Table 4: MAE against MCS@{a.mc} [95% CI], paired verdict vs {BASELINE}", "",
          f"▲ better, ▼ worse, = no difference: the paired difference of squared error against {BASELINE} on the "
          f"same states, its cluster-robust (CR1, problems as clusters) t-test, Holm over each estimator family "
          f"(main, MCS@k scale) of one domain and protocol (sveb.score.pooling.paired). The numbers behind every mark "
          f"are below each table and in scores.csv. Timings: {machine}.", ""]
    if untested:
        md += [f"† no per-state estimates stored for this cell: its MAE [CI] is the run's score (its CI as computed "
               f"then), not tested "
               f"({len(untested)} domain x estimator pairs: "
               + ", ".join(f"{d} {n}" for d, n in untested) + ").", ""]
    renamed = {r["estimator"]: m.group(1) for r in records
               if (m := re.search(r"registered as (\S+) since", r.get("provenance") or ""))}
    if renamed:
        md += ["Rows scored with an estimator's reading of the run that built them, registered under another name "
               "since (estimates.parquet's provenance): " + ", ".join(f"{n} = today's {m}" for n, m in renamed.items())
               + "; tested in the family they were in then.", ""]
    for protocol in PROTOCOLS:
        label = "held-out (the headline)" if protocol == "held-out" else "in-group (the paper's protocol)"
        md += [f"## {label}", "", t4.markdown(rows, domains, protocol, names), "",
               f"### {protocol}: the numbers behind each mark", "",
               f"Δ sq err: mean over states of (estimate - reference)² - ({BASELINE} - reference)²; < 0: closer "
               f"than {BASELINE}. [95% CI] and p: sveb.score.scoring's, cluster-robust over problems. Holm p: within the "
               f"family of m comparisons. MDE 80%: beside each \"no difference\", the smallest |Δ| the test would "
               f"detect with 80% power at the family's strictest level 0.05 / m, (t(1 - 0.05 / 2m, G - 1) + "
               f"t(0.8, G - 1)) · se (sveb.score.power.mde).", "",
               t4.details_markdown(rows, domains, protocol, names), ""]
    md += ["## Does an estimator's Δ differ between domains?", "",
           f"Per estimator and protocol: Cochran's Q over its per-domain Δ sq err vs {BASELINE}, weighted by 1 / se² "
           f"(chi-square on D - 1 df), I² the share of the spread beyond the domains' own noise, Holm over the "
           f"estimators of one protocol (a family of its own). Domains: those with per-state estimates. "
           f"interaction.csv holds the same (sveb.score.power.interaction).", "",
           t4.interaction_markdown(inter), ""]
    md += ["## Domains", "", md_table(list(drows[0]), [list(r.values()) for r in drows], right_from=2), "",
           "## Seconds per state of each stage", "",
           "Build stages from the run that sampled the domain (none for a build resumed or sampled before per-stage "
           "timing); estimators: estimation plus their recorded training, from the run that computed them.", "",
           cost_markdown({d: timings.get(d, {}) for d in domains}, {r["domain"]: r["states"] for r in drows},
                         domains), ""]
    (out / "table4.md").write_text("\n".join(md))
    console.print(f"wrote {out / 'table4.md'}")


if __name__ == "__main__":
    main()
