"""Table 4's files (sveb.experiment.table4): the per-state estimates (estimates.parquet, so the tables can be
scored again without running an estimator), scores.csv, interaction.csv, domains.csv, timing.csv and table4.md."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np

from sveb import store
from sveb.core.errors import EvalError
from sveb.estimators import BASELINE
from sveb.evaluate.protocols import PROTOCOLS
from sveb.present import scope
from sveb.present import table4 as t4
from sveb.present.report_format import md_table
from sveb.present.table4 import cost_markdown
from sveb.score import power
from sveb.score.pool_checks import Allow, check_builds
from sveb.score.replicates import default_params
from sveb.store.export import TABLES


def size_mb(path: Path) -> float:
    """An export's size: its manifest, README and tables, not what scoring it wrote beside them (estimates,
    hidden states, ... which git ignores there)."""
    keep = [path / "manifest.json", path / "README.md", *(p for t in TABLES for p in (path / t).rglob("*"))]
    return sum(p.stat().st_size for p in keep if p.is_file()) / 1e6


def shown_source(source: str | None) -> str | None:
    """A source as a reader's table shows it: a local file as its last two path parts, not this machine's path."""
    if not source or "=" not in source:
        return source
    name, path = source.split("=", 1)
    return f"{name}=" + "/".join(Path(path).parts[-2:])


def write_csv(path: Path, rows: list[dict], fields: tuple[str, ...] = ()) -> None:
    """`rows` as CSV; with none, the header of `fields` alone (a table whose runs recorded no timing)."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else list(fields))
        w.writeheader()
        w.writerows(rows)


ESTIMATE_FIELDS = ("domain", "build_fp", "state_id", "estimator", "params_fp", "protocol", "value", "provenance",
                   "training")
# `training`: a trained estimator's replicate training seed (its settings are the default's but for `seed`);
# None for every estimate at the default settings (older files have no column: all None).


def training_of(record: dict):
    return record.get("training")


def _key(r: dict) -> tuple:
    return r["domain"], r["estimator"], r["protocol"], r["build_fp"], -1 if r.get("training") is None else \
        int(r["training"]), r["state_id"]


def write_estimates(path: Path, records: list[dict]) -> None:
    """Every cell's per-state estimates (ESTIMATE_FIELDS), sorted, so that --from-exports can score them again."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    key = {_key(r): r for r in records}  # one per cell x build x training x state
    rows = [key[k] for k in sorted(key)]
    table = pa.table({f: pa.array([r.get(f) for r in rows], type=pa.int64() if f == "training" else None)
                      for f in ESTIMATE_FIELDS})
    buf = pa.BufferOutputStream()
    pq.write_table(table, buf, compression="zstd")
    store.atomic_write_bytes(Path(path), buf.getvalue().to_pybytes())  # a run stopped mid-write keeps the last


def read_estimates(path: Path) -> list[dict]:
    """The stored per-state estimates, each under the name its reading has today (current_name)."""
    if not path.exists():
        raise SystemExit(f"{path}: no stored per-state estimates; run without --from-exports first (or pass "
                         f"--estimates)")
    import pyarrow.parquet as pq
    return [{"training": None} | r | {"estimator": current_name(r)} for r in pq.read_table(path).to_pylist()]


def current_name(record: dict) -> str:
    """An estimate scored under a name whose reading has been registered under another name since (numca before
    2026-11-25 is numca-sveb today) carries today's name in its provenance: "... registered as NAME since", or
    "sveb eval NAME <params_fp>" from the run that scored it. Today's name puts it in today's Holm family."""
    prov = record.get("provenance") or ""
    found = re.search(r"registered as (\S+) since", prov) or re.match(r"sveb eval (\S+) ", prov)
    return found.group(1) if found else record["estimator"]


def merge_estimates(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` with every (domain, estimator, protocol) cell that `new` holds on a build (and training) replaced by
    new's rows there; the cell's rows on the domain's other builds (seeds) and other trainings stay."""
    def cell(r):
        return r["domain"], r["estimator"], r["protocol"], r["build_fp"], r.get("training")
    cells = {cell(r) for r in new}
    return [r for r in old if cell(r) not in cells] + list(new)


def eval_stage(name: str, seed: int | None, protocol: str) -> str:
    """The stage an estimator's evaluation is timed under in timing.json (a replicate training: with its seed)."""
    return f"eval {name} ({protocol})" if seed is None else f"eval {name} seed {seed} ({protocol})"


def recorded_machine(md: Path) -> str:
    """The CPU flags line of the run whose timings the tables show (a rescore measures nothing itself)."""
    found = re.search(r"CPU flags: [^.\n]*", md.read_text()) if md.exists() else None
    return found.group(0) if found else "CPU flags: not recorded"


def timing_rows(domain: str, timing: dict[str, float], states) -> list[dict]:
    n = states or 1
    return [{"build": domain, "stage": k, "seconds": round(s, 2), "seconds per state": round(s / n, 4)}
            for k, s in timing.items()]


def domain_states(export: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A domain's state ids (states-table order), their MC references and their problems (the clusters)."""
    states = store.read_table(export / "states").to_pylist()
    refs = {r["state_id"]: r["value"] for r in store.read_table(export / "references").to_pylist()}
    ids = [s["state_id"] for s in states]
    ref = np.array([np.nan if refs.get(i) is None else refs[i] for i in ids], dtype=float)
    return ids, ref, np.array([s["problem_id"] for s in states], dtype=object)


def export_arrays(key: str, export: Path, names: list[str], records: list[dict]):
    """An export's state ids, references, problems and arrs[(protocol, estimator, training)] (NaN where none),
    from the ESTIMATES records of `key` (a domain, or a protocol study's setting) on that export's build;
    `training` is None for the default settings, a replicate's training seed otherwise."""
    ids, ref, groups = domain_states(export)
    fp = store.load_manifest(export).build_fp
    index = {sid: i for i, sid in enumerate(ids)}
    arrs: dict[tuple, np.ndarray] = {}
    for r in records:
        if r["domain"] == key and r["build_fp"] == fp and r["estimator"] in names and r["protocol"] in PROTOCOLS \
                and r["state_id"] in index:
            t = training_of(r)
            arr = arrs.setdefault((r["protocol"], r["estimator"], None if t is None else int(t)),
                                  np.full(len(ids), np.nan))
            arr[index[r["state_id"]]] = np.nan if r["value"] is None else r["value"]
    return ids, ref, groups, arrs


def split_trainings(arrs: dict[tuple, np.ndarray], names: list[str]) -> tuple[dict, dict]:
    """est[protocol][estimator] (the default settings, in `names` order) and reps[protocol][estimator][seed] (the
    replicate trainings, seeds ascending) from export_arrays's arrs."""
    est = {p: {n: arrs[(p, n, None)] for n in names if (p, n, None) in arrs} for p in PROTOCOLS}
    reps: dict = {p: {} for p in PROTOCOLS}
    for (p, n, t), arr in sorted(((k, v) for k, v in arrs.items() if k[2] is not None), key=lambda kv: kv[0][2]):
        reps[p].setdefault(n, {})[t] = arr
    return est, reps


def export_estimates(key: str, export: Path, names: list[str], records: list[dict]):
    """An export's state ids, references, problems and est[protocol][estimator] (the default settings; NaN where
    none): export_arrays without the replicate trainings."""
    ids, ref, groups, arrs = export_arrays(key, export, names, records)
    return ids, ref, groups, split_trainings(arrs, names)[0]


def export_name(domain: str, seed: int) -> str:
    """A benchmark build's export under EXPORTS: the domain for seed 0 (the single-seed table's name), else
    `<domain>-seed<k>`."""
    return domain if seed == 0 else f"{domain}-seed{seed}"


def seed_of(name: str) -> int:
    """The seed of an export name (export_name's inverse)."""
    return int(name.rsplit("-seed", 1)[1]) if "-seed" in name else 0


def domain_exports(exports: Path, domain: str) -> list[str]:
    """The export names of a domain's benchmark builds present under EXPORTS, seed 0 first: the builds its
    pooled cells cover."""
    found = [p.parent.name for p in Path(exports).glob(f"{domain}*/manifest.json")
             if p.parent.name == domain or re.fullmatch(rf"{re.escape(domain)}-seed\d+", p.parent.name)]
    return sorted(found, key=seed_of)


def pooled_estimates(domain: str, exports: Path, names: list[str], records: list[dict]):
    """A domain's references, problems (the clusters: a problem two seeds share is one cluster),
    est[protocol][estimator] and reps[protocol][estimator][training seed] (split_trainings), over every seed's
    export of the domain (domain_exports), states in export order, NaN where an estimator (or a training) has no
    estimate for a state (say, a seed not scored)."""
    parts = [export_arrays(domain, exports / n, names, records) for n in domain_exports(exports, domain) or [domain]]
    ref = np.concatenate([p[1] for p in parts])
    groups = np.concatenate([p[2] for p in parts])
    keys = dict.fromkeys(k for p in parts for k in p[3])
    arrs = {k: np.concatenate([p[3].get(k, np.full(len(p[0]), np.nan)) for p in parts]) for k in keys}
    return (ref, groups, *split_trainings(arrs, names))


def domain_builds(exports: Path, domain: str) -> str:
    """The fingerprints of a domain's pooled builds, seed 0 first, "+"-joined: scores.csv's `builds`."""
    names = domain_exports(exports, domain) or [domain]
    return "+".join(store.load_manifest(Path(exports) / n).build_fp
                    for n in names if (Path(exports) / n / "manifest.json").exists())


def table_cells(a, domains: list[str], names: list[str], records: list[dict], previous: Path) -> list[dict]:
    """Every cell from the stored per-state estimates (sveb.present.table4.cells). A cell without them keeps the
    MAE [CI] of the previous scores.csv if that row names its builds and each is still one of the domain's
    (a domain sampled again drops its old scores; its n_states and builds say which states it covers), and
    gets no test."""
    old = {(r["domain"], r["estimator"], r["protocol"]): r for r in csv.DictReader(open(previous))} \
        if previous.exists() else {}
    rows = []
    for d in domains:
        ref, groups, est, reps = pooled_estimates(d, Path(a.exports), names, records)
        builds = domain_builds(Path(a.exports), d)
        got = {(r["estimator"], r["protocol"]): r
               for r in t4.cells(d, est, BASELINE, ref, groups, builds, n_ref=int(a.mc), trainings=reps)}
        for n in names:
            for p in PROTOCOLS:
                if (n, p) in got:
                    rows.append(got[(n, p)])
                elif (d, n, p) in old and still_pooled(old[(d, n, p)].get("builds") or "", builds):
                    o = old[(d, n, p)]
                    rows.append({c: "" for c in t4.COLUMNS} | {k: o[k] for k in ("domain", "estimator", "protocol",
                                "n_states", "mae", "mae_ci_low", "mae_ci_high", "builds")}
                                | {"verdict": "n/a" if n != BASELINE else "", "estimates": STORED_MAE_ONLY})
    return rows


def still_pooled(old: str, builds: str) -> bool:
    """A stored score's builds are all among the domain's current ones (a row that names none is not kept)."""
    return bool(old) and set(old.split("+")) <= set(builds.split("+"))


STORED_MAE_ONLY = "MAE only (no per-state estimates stored)"


COST_FIELDS = ("build", "sampling s", "scoring s", "hidden pass s", "ratio", "dearest")


def keq_section(a, out: Path, domains: list[str], names: list[str], rows: list[dict], drows: list[dict],
                timings: dict, builds: list[str]) -> list[str]:
    """table4.md's rollout-equivalents (k_eq [CI] · the estimator's seconds per state, per protocol) and keq.png
    (k_eq against seconds per state, the MCS@k line at the references' seconds per continuation), keq-DOMAIN.png
    (one domain's k_eq per estimator)."""
    from sveb.present.cost_plot import keq_dots, keq_plot, mcs_k  # matplotlib
    states = {b: int(r["states"] or 0) for b, r in zip(builds, drows)}
    of_domain = {d: [b for b in builds if b == d or b.startswith(f"{d}-seed")] for d in domains}
    secs = t4.eval_seconds_per_state(timings, states, of_domain)
    draws = int(a.mc) + int(getattr(a, "mc_extra", 0) or 0)
    per_rollout = {d: t4.rollout_seconds(timings, states, of_domain[d], draws) for d in domains}
    for (d, name, p) in list(secs):  # MCS@k reads stored draws: its cost is sampling k continuations
        k = mcs_k(name)
        if k:
            secs[(d, name, p)] = k * per_rollout[d] if per_rollout[d] else None
    points = {d: [{**r, "seconds": secs.get((d, r["estimator"], "held-out"))} for r in rows
                  if r["domain"] == d and r["protocol"] == "held-out" and r.get("k_eq") not in (None, "")]
              for d in domains}
    keq_plot(points, per_rollout, "held-out: worth k rollouts against seconds per state", out / "keq.png")
    for d in domains:  # one domain a picture, estimators named on the axis (the README shows number's)
        keq_dots(points[d], f"{d}, held-out: what each estimate is worth in rollouts", out / f"keq-{d}.png")
    md = ["## Worth k rollouts", "",
          "k_eq: the number of fresh Monte-Carlo continuations whose mean has the estimator's expected squared "
          "error against the true value, E[V(1-V)] / debiased MSE (sveb.score.rollout_eq; [95% CI]: Fieller's "
          "for 1/k_eq with the cluster-robust covariance over problems; \">x\": no finite k matches, the debiased "
          "MSE is <= 0, x its lower bound). Beside it the estimator's own seconds per state (training included, "
          "the shared hidden-state pass not; see the stage table below). One Monte-Carlo continuation took "
          + ", ".join(f"{d} {v:.3g} s" if v else f"{d} -" for d, v in per_rollout.items())
          + " (the references stage over its continuations; -: not recorded); MCS@k's seconds are k of them (it reads "
          "stored draws, so its own time is not its cost). keq.png: k_eq against seconds per state with the MCS@k "
          "line.", ""]
    for protocol in PROTOCOLS:
        md += [f"### {protocol}", "", t4.keq_markdown(rows, domains, protocol, names, secs), ""]
    return md


def seed_checks(a, domains: list[str]) -> list[str]:
    """Table 4 pools each domain's seeds itself, so it runs the pooling refusals (sveb.score.pool_checks) on the
    domain's exports: seeds of different level or answer-type mixes, builds sampled in different dtypes. `a`'s
    allow_unequal_seeds / allow_mixed_dtype let them through; the returned notes go into table4.md."""
    allow = Allow(bool(getattr(a, "allow_mixed_dtype", False)), bool(getattr(a, "allow_unequal_seeds", False)))
    notes = []
    for d in domains:
        names = domain_exports(Path(a.exports), d)
        if names:
            try:
                notes += check_builds(f"{getattr(a, 'model', '')}/{d}", [Path(a.exports) / n for n in names],
                                      [seed_of(n) for n in names], allow)
            except EvalError as e:  # a script's bad input: one line, no traceback
                raise SystemExit(str(e)) from None
    return notes


def one_training(rows: list[dict]) -> list[str]:
    """What a trained estimator's tests rest on: the cells tested over several trainings (their SE carries the
    between-training spread, sveb.score.trainings), and those that rest on one training (no spread), said so."""
    tested = [r for r in rows if r.get("verdict") not in ("", None)
              and "seed" in json.loads(default_params(r["estimator"]) or "{}")]
    many = sorted({(r["estimator"], int(r["trainings"])) for r in tested if _int(r.get("trainings")) > 1})
    one = list(dict.fromkeys(r["estimator"] for r in tested if _int(r.get("trainings")) <= 1))
    out = []
    if many:
        shown = ", ".join(f"{n} ({k})" for n, k in dict(many).items())
        out += [f"Over trainings: {shown} trainings (training seeds on one train build); each such cell's test is "
                "of the mean Δ over its trainings and its MAE the mean over them, each with the between-training "
                "spread in its SE and CI (columns trainings, "
                "training_sd in scores.csv; docs/statistics.md, \"Over trainings\").", ""]
    if one:
        out += [f"One training: {', '.join(one)} (their verdicts carry no between-training spread; "
                "docs/statistics.md, \"Over trainings\").", ""]
    return out


def _int(x) -> int:
    try:
        return int(float(x))
    except (TypeError, ValueError):
        return 0


def pooled_line(domain: str, drows: list[dict]) -> str:
    """"number: seeds 0, 1, 2 (600 states)" from domains.csv's rows of the domain."""
    rows = [r for r in drows if r["domain"] == domain]
    seeds = ", ".join(str(r.get("seed", 0)) for r in rows)
    return f"{domain}: seed{'s' if len(rows) > 1 else ''} {seeds} ({sum(int(r['states'] or 0) for r in rows)} states)"


def write_tables(a, out: Path, domains: list[str], names: list[str], records: list[dict], drows: list[dict],
                 trows: list[dict], timings: dict, machine: str, console, builds: list[str] | None = None) -> None:
    """scores.csv, interaction.csv, domains.csv, timing.csv and table4.md from the per-state estimates;
    `builds`: the export names whose stage costs the cost table shows (default: the domains)."""
    builds = builds or domains
    caveats = seed_checks(a, domains)  # refused here, before any file is written, unless a flag allows it
    rows = table_cells(a, domains, names, records, out / "scores.csv")
    tested = [r for r in rows if r["estimates"] == "per state" and r["delta_sq_se"] != ""]
    inter = power.interaction(tested)
    write_csv(out / "scores.csv", rows)
    write_csv(out / "interaction.csv", inter or [{"protocol": ""}])
    write_csv(out / "domains.csv", drows)
    write_csv(out / "timing.csv", trows, ("build", "stage", "seconds", "seconds per state"))
    cost = t4.scoring_vs_sampling(timings, builds)
    write_csv(out / "cost.csv", cost)
    untested = sorted({(r["domain"], r["estimator"], r["n_states"], r["builds"]) for r in rows
                       if r["estimates"] == STORED_MAE_ONLY})
    md = [f"# Table 4: MAE against MCS@{a.mc} [95% CI], paired verdict vs {BASELINE}", "",
          f"▲ better, ▼ worse, = no difference: the paired difference of squared error against {BASELINE} on the "
          f"same states, its cluster-robust (CR1, problems as clusters) t-test, Holm over each estimator family "
          f"(main, MCS@k scale) of one domain and protocol (sveb.score.pooling.paired). The numbers behind every mark "
          f"are below each table and in scores.csv. Timings: {machine}.", ""]
    exports = [Path(a.exports) / n for d in domains for n in domain_exports(Path(a.exports), d)]
    md += ["Scope:", "", *(f"- {x}" for x in scope.caption(scope.of_builds(exports)).splitlines()), ""] if exports \
        else []
    md += ["Builds pooled in each domain's cells (seeds of one config; a problem two seeds share is one cluster): "
           + "; ".join(pooled_line(d, drows) for d in domains) + ".", "", *(f"Caveat: {c}.\n" for c in caveats),
           *one_training(rows)]
    if untested:
        md += [f"† no per-state estimates stored for this cell: its MAE [CI] is the run's score (its CI as computed "
               f"then), not tested "
               f"({len(untested)} domain x estimator pairs: "
               + ", ".join(f"{d} {n} on {k} states of build {b}" for d, n, k, b in untested) + ").", ""]
    total = {d: sum(int(r["states"] or 0) for r in drows if r["domain"] == d) for d in domains}
    partial = sorted({(r["domain"], r["estimator"], r["n_states"]) for r in rows if r["estimates"] == "per state"
                      and int(r["n_states"]) < total.get(r["domain"], 0)})
    if partial:
        md += ["Cells on part of their domain's states (an estimator not yet scored on every seed): "
               + ", ".join(f"{d} {n} ({k} of {total[d]})" for d, n, k in partial) + ".", ""]
    for protocol in PROTOCOLS:
        label = "held-out (the headline)" if protocol == "held-out" else "in-group (the paper's protocol)"
        md += [f"## {label}", "", t4.markdown(rows, domains, protocol, names), "",
               f"### {protocol}: the numbers behind each mark", "",
               f"Δ sq err: mean over states of (estimate - reference)² - ({BASELINE} - reference)²; < 0: closer "
               f"than {BASELINE}. [95% CI] and p: sveb.score.scoring's, cluster-robust over problems. Holm p: within "
               f"the family of m comparisons. MDE 80%: beside each \"no difference\", the smallest |Δ| the test would "
               f"detect with 80% power at the family's strictest level 0.05 / m, (t(1 - 0.05 / 2m, G - 1) + "
               f"t(0.8, G - 1)) · se (sveb.score.power.mde).", "",
               t4.details_markdown(rows, domains, protocol, names), ""]
    md += ["## Does an estimator's Δ differ between domains?", "",
           f"Per estimator and protocol: Cochran's Q over its per-domain Δ sq err vs {BASELINE}, weighted by 1 / se² "
           f"(chi-square on D - 1 df), I² the share of the spread beyond the domains' own noise, Holm over the "
           f"estimators of one protocol (a family of its own). Domains: those with per-state estimates. "
           f"interaction.csv holds the same (sveb.score.power.interaction).", "",
           t4.interaction_markdown(inter), ""]
    md += keq_section(a, out, domains, names, rows, drows, timings, builds)
    md += ["## Domains", "", md_table(list(drows[0]), [list(r.values()) for r in drows], right_from=4), "",
           "## Seconds per state of each stage", "",
           "Build stages from the run that sampled the domain (none for a build resumed or sampled before per-stage "
           "timing); estimators: estimation plus their recorded training, from the run that computed them.", "",
           cost_markdown({b: timings.get(b, {}) for b in builds},
                         {b: r["states"] for b, r in zip(builds, drows)}, builds), "",
           "## Scoring against sampling, per build", "",
           "Sampling: screening + rollouts + references of the run that sampled the build; scoring: the shared "
           "hidden-state pass and every estimator under both protocols, each as recorded by the run that computed "
           "it. A domain's seeds share one train build, so only the first build scored pays the training "
           "(ppo-1, probe, pacs, hidden-align's calibration); '-': not recorded. cost.csv holds the same.", "",
           md_table(list(COST_FIELDS), [["-" if r[k] is None else r[k] for k in COST_FIELDS] for r in cost],
                    right_from=1), ""]
    (out / "table4.md").write_text("\n".join(md))
    console.print(f"wrote {out / 'table4.md'}")
