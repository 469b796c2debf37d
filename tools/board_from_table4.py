"""A leaderboard board made from a Table 4 folder's stored per-state estimates and its frozen builds, without
running any estimator again (issue 56: every board and site from the same estimates as the table):

    python tools/board_from_table4.py results/table4 --out results/board [--site results/site]
        [--domains number,math]

(`--site S` then writes the static site, as `sveb leaderboard html --board BOARD --out S` does.)

TABLE4/estimates.parquet holds one row per (domain, build_fp, state, estimator, params_fp, protocol, training);
TABLE4/exports/<domain>[-seedN|-train]/ the builds (found by their manifest's build_fp). Each reading, i.e.
(domain, build_fp, estimator, params_fp, training), becomes one result bundle (sveb/board/bundle.py) holding its
held-out and in-group rows, and every bundle goes onto the board through `sveb leaderboard add`'s own checks
(sveb.board.add_all: all or nothing; a second run adds only new readings, e.g. a domain finished since, and
prints `unchanged` for the rest). The board recomputes every score from the bundles and the builds' references.

A trained estimator's replicate trainings (training = N) are bundles of their own with params `seed` = N, as
`sveb eval NAME -P seed=N` names them (their params_fp is that run's): the board scores them as separate rows
(tested alone, verdict "replicate"), its default row's paired test becomes the test over the trainings and its
MAE the mean over them, as Table 4's (sveb.score.pooling). They never replace or mix into the default training's
bundle.

Where each bundle.json field comes from:
- estimator.name: estimates.parquet's estimator, under today's name (table4_files.current_name: the provenance's
  "sveb eval NAME" or "registered as NAME since"); target, role, needs_hidden, needs_training, reads_references,
  provenance (kind builtin, distribution sveb, the version installed here): today's registry entry;
- estimator.params, params_fp: the registry's estimator made with {} (or {"seed": N} for training N), its params
  resolved; refused when that params_fp differs from the row's (the registry's defaults changed since the run);
- build: the export's identity (content hash, per-table hashes, build_fp, model, domain, states);
- estimates.parquet: state_id, protocol, value as stored; own_shift NaN (not kept by Table 4: the board's
  own-outcome share is blank);
- machine.cpu_flags: TABLE4/table4.md's "CPU flags:" line (cpu and gpu null: not recorded);
- sveb_version: the version installed here (the table records none); created, wall_seconds: null (not known);
- cost.<protocol>.seconds: TABLE4/timing.json[<export>]["eval NAME[ seed N] (<protocol>)"], which Table 4
  records as the estimate seconds plus prepare() seconds (sveb.experiment.table4.eval_seconds); it is the own
  seconds only for an estimator whose class keeps Estimator.prepare (nothing is prepared), so only those get it;
  every other (training, fitting, loading a model in prepare) gets seconds and prepare_seconds null, with the
  summed figure kept in source.timing (not read by the board);
- cost.<protocol>.train_tokens: forward tokens of the training data as `sveb submit` counts them (a train-split
  estimator: the domain's `-train` export's rollouts; ppo-n: the build's own), null for untrained estimators;
- cost.<protocol>'s other figures (extra and forward tokens per state): sveb.core.cost.cost_figures on the build,
  as `sveb submit` writes them (the board recomputes them itself);
- source: where the bundle came from (the Table 4 folder as given, the row's provenance, training, timing key).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sveb.core.errors import SvebError  # noqa: E402

PROTOCOLS = ("held-out", "in-group")
COLUMNS = ("domain", "build_fp", "state_id", "estimator", "params_fp", "protocol", "value", "provenance")


class Table4Error(SvebError, ValueError):
    pass


# ---- pure mapping -------------------------------------------------------------------------------------------------

def today_name(row: dict) -> str:
    """The reading's name today, by the rule Table 4 itself reads its estimates with (one rule, not two)."""
    from sveb.experiment.table4_files import current_name
    return current_name(row)


def readings(rows: list[dict], where: str, domains: list[str] | None = None) -> dict[tuple, list[tuple[int, dict]]]:
    """(domain, build_fp, estimator, params_fp, training) -> [(row number, row)]: one bundle each. A row with a
    missing field, an unknown protocol or a state twice under a protocol is refused naming its row."""
    out: dict[tuple, list[tuple[int, dict]]] = {}
    seen: set[tuple] = set()
    for i, r in enumerate(rows):
        if domains is not None and r.get("domain") not in domains:
            continue
        gone = next((c for c in COLUMNS[:-1] if r.get(c) is None), None)
        if gone:
            raise Table4Error(f"{where}: row {i}: no {gone}")
        if r["protocol"] not in PROTOCOLS:
            raise Table4Error(f"{where}: row {i}: unknown protocol {r['protocol']!r} (known: {', '.join(PROTOCOLS)})")
        training = None if r.get("training") is None else int(r["training"])
        key = (r["domain"], r["build_fp"], today_name(r), r["params_fp"], training)
        if (*key, r["protocol"], r["state_id"]) in seen:
            raise Table4Error(f"{where}: row {i}: state {r['state_id']} twice for {key[2]} ({r['protocol']}, "
                              f"training {training}) on build {r['build_fp']}")
        seen.add((*key, r["protocol"], r["state_id"]))
        out.setdefault(key, []).append((i, r))
    return out


def estimate_rows(key: tuple, rows: list[tuple[int, dict]], states: list[str], where: str,
                  export: str) -> list[dict]:
    """The bundle's estimates in the build's state order per protocol; a state not in the build, a value that is
    not a number or a state missing under a protocol is refused naming the row (or the reading)."""
    order = {s: j for j, s in enumerate(states)}
    by: dict[str, dict[str, float]] = {}
    for i, r in rows:
        if r["state_id"] not in order:
            raise Table4Error(f"{where}: row {i}: state {r['state_id']} ({key[2]}, {r['protocol']}) is not a state "
                              f"of build {key[1]} ({export})")
        v = r["value"]
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            raise Table4Error(f"{where}: row {i}: value {v!r} ({key[2]}, {r['protocol']}) is not a finite number")
        by.setdefault(r["protocol"], {})[r["state_id"]] = float(v)
    out = []
    for proto in (p for p in PROTOCOLS if p in by):
        missing = [s for s in states if s not in by[proto]]
        if missing:
            raise Table4Error(f"{where}: {key[2]} {key[3]} (training {key[4]}) on build {key[1]} has no {proto} "
                              f"estimate of state {missing[0]} ({len(missing)} of {len(states)} missing)")
        # own_shift: Table 4 does not keep it; NaN is the bundle format's "not measured"
        out += [{"state_id": s, "protocol": proto, "value": by[proto][s], "own_shift": float("nan")} for s in states]
    return out


def reported_cost(timing: dict, export: str, name: str, training: int | None, protocols: list[str],
                  prepares: bool) -> tuple[dict, dict]:
    """(cost figures the bundle reports per protocol, what timing.json said): seconds only where the recorded
    figure is the estimator's own seconds (it does not prepare); never a guess."""
    from sveb.experiment.table4_files import eval_stage
    cost, said = {}, {}
    for p in protocols:
        k = eval_stage(name, training, p)  # the stage Table 4's timing.json records it under
        x = (timing.get(export) or {}).get(k)
        ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
        said[p] = {"key": f"{export}: {k}", "seconds_incl_prepare": float(x) if ok else None}
        cost[p] = {"seconds": float(x) if ok and not prepares else None, "prepare_seconds": None}
    return cost, said


def params_for(training: int | None) -> dict[str, str]:
    return {} if training is None else {"seed": str(training)}


# ---- the registry and the builds -----------------------------------------------------------------------------------

def estimator_meta(name: str, training: int | None, params_fp_stored: str, where: str) -> tuple[dict, object, object]:
    """bundle.json's estimator part from today's registry, its params_fp checked against the stored one."""
    from sveb.board.bundle import provenance
    from sveb.estimators import entry, make, params_fp, params_of
    from sveb.estimators.base import Estimator
    try:
        e = entry(name)
        est = make(name, params_for(training))
    except SvebError as err:
        raise Table4Error(f"{where}: estimator {name}: {err}") from None
    pfp = params_fp(est)
    if pfp != params_fp_stored:
        raise Table4Error(f"{where}: {name} (training {training}) has params_fp {params_fp_stored}, today's registry "
                          f"makes {pfp}: its defaults changed since the run; rerun it or convert with the old SVEB")
    meta = {"name": name, "target": e.target, "params": json.loads(json.dumps(params_of(est), default=str)),
            "params_fp": pfp, "role": e.role, "needs_hidden": bool(est.needs_hidden),
            "needs_training": e.needs_training, "reads_references": bool(e.reads_references),
            "provenance": provenance(e)}
    prepares = type(est).prepare is not Estimator.prepare
    return meta, e, prepares


def exports_by_fp(exports: Path) -> dict[str, tuple[str, Path, dict]]:
    """build_fp -> (export name, folder, manifest) for every export folder under EXPORTS."""
    out = {}
    for m in sorted(Path(exports).glob("*/manifest.json")):
        try:
            man = json.loads(m.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise Table4Error(f"{m}: unreadable ({e})") from None
        if man.get("build_fp"):
            out[man["build_fp"]] = (m.parent.name, m.parent, man)
    return out


def train_tokens(e, bdir: Path, exports: Path, domain: str) -> tuple[int | None, str | None]:
    """Forward tokens of the training data as `sveb submit` counts them, and the build they come from."""
    from sveb.core.cost import rollout_tokens
    from sveb.store.builds import load_rollouts
    if not e.needs_training:
        return None, None
    src = Path(exports) / f"{domain}-train" if e.train_split else bdir
    if not (src / "manifest.json").exists():
        return None, None  # no train export beside it: not known, left null
    return rollout_tokens(load_rollouts(src)), json.loads((src / "manifest.json").read_text())["build_fp"]


def machine_of(md: Path) -> dict:
    from sveb.experiment.table4_files import recorded_machine
    line = recorded_machine(md)  # Table 4's own reading of its CPU-flags line
    flags = line.removeprefix("CPU flags: ").strip()
    return {"cpu_flags": None if flags == "not recorded" else flags, "cpu": None, "gpu": None}


# ---- I/O at the edges ----------------------------------------------------------------------------------------------

def read_rows(path: Path) -> list[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    if not path.is_file():
        raise Table4Error(f"{path}: no such file (a Table 4 folder holds estimates.parquet)")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException, ValueError) as e:
        raise Table4Error(f"{path}: unreadable ({type(e).__name__}: {str(e)[:100]})") from None
    gone = [c for c in COLUMNS if c not in table.column_names]
    if gone:
        raise Table4Error(f"{path}: no column {gone[0]}")
    return table.to_pylist()


def write_bundles(table4: Path, out_dir: Path, exports: Path, domains: list[str] | None) -> tuple[list, list, dict]:
    """Every reading's bundle written under out_dir; (bundle folders, export folders used, counts)."""
    from sveb.board.bundle import build_identity, dist_version, write_bundle
    from sveb.core.cost import cost_figures
    from sveb.store.builds import load_build
    where = str(table4 / "estimates.parquet")
    groups = readings(read_rows(table4 / "estimates.parquet"), where, domains)
    if not groups:
        raise Table4Error(f"{where}: no estimates" + (f" of {', '.join(domains)}" if domains else ""))
    builds = exports_by_fp(exports)
    timing_path = table4 / "timing.json"
    timing = json.loads(timing_path.read_text()) if timing_path.exists() else {}
    machine = machine_of(table4 / "table4.md")
    data, idents, tokens, paths = {}, {}, {}, []
    counts = {"bundles": 0, "seconds": 0, "no seconds": 0}
    ordered = sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0])))
    # checked in passes (every build, then every estimator, then the rows), so a bad row is named by what is wrong
    # with it, not by a state it took away from a reading that sorts before it
    for key, rows in ordered:
        if key[1] not in builds:
            raise Table4Error(f"{where}: row {rows[0][0]}: build_fp {key[1]} ({key[0]}, {key[2]}) has no export "
                              f"under {exports}")
    ests = {key: estimator_meta(key[2], key[4], key[3], f"{where}: row {rows[0][0]}") for key, rows in ordered}
    for n, (key, rows) in enumerate(ordered):
        domain, fp, name, pfp, training = key
        export, bdir, _ = builds[fp]
        if fp not in data:
            data[fp] = load_build(bdir, references=False)
            idents[fp] = build_identity(bdir)
        est, e, prepares = ests[key]
        erows = estimate_rows(key, rows, [s["state_id"] for s in data[fp].states], where, export)
        protocols = [p for p in PROTOCOLS if any(r["protocol"] == p for r in erows)]
        if (name, fp) not in tokens:
            tokens[(name, fp)] = train_tokens(e, bdir, exports, domain)
        ttok, tbuild = tokens[(name, fp)]
        reported, said = reported_cost(timing, export, name, training, protocols, prepares)
        cost = {p: cost_figures(target=est["target"], params=est["params"], needs_hidden=est["needs_hidden"],
                                states=data[fp].states, rollouts=data[fp].rollouts,
                                seconds=reported[p]["seconds"] if reported[p]["seconds"] is not None else float("nan"),
                                prepare_seconds=None, train_tokens=ttok,
                                reads_references=bool(est.get("reads_references"))) for p in protocols}
        for p in protocols:  # null, not NaN: "not known"
            cost[p]["seconds"] = reported[p]["seconds"]
            counts["seconds" if reported[p]["seconds"] is not None else "no seconds"] += 1
        prov = sorted({r.get("provenance") for _, r in rows if r.get("provenance")})
        meta = {"estimator": est, "protocols": protocols, "build": idents[fp],
                "sveb_version": dist_version("sveb"), "machine": machine, "created": None, "wall_seconds": None,
                "cost": cost,
                "source": {"kind": "table4", "table4": str(table4), "export": export, "provenance": prov,
                           "training": training, "timing": said, "train_build": tbuild,
                           "seconds": "timing.json's figure where the estimator prepares nothing, else null"}}
        paths.append(write_bundle(out_dir / f"{n:04d}", meta, erows))
        counts["bundles"] += 1
    used = sorted({builds[k[1]][1] for k in groups})
    return paths, used, counts


def make_board(table4: Path, board: Path, exports: Path | None = None, domains: list[str] | None = None) -> dict:
    """Bundle every reading of TABLE4 and add them to BOARD (created, or extended); a summary dict."""
    from sveb.board import add_all
    from sveb.board.folder import read_json
    table4, board = Path(table4), Path(board)
    exports = Path(exports) if exports else table4 / "exports"
    if board.exists() and any(board.iterdir()) and not (board / "board.json").exists():
        raise Table4Error(f"--out {board}: exists, is not empty and holds no board.json; pass a new folder or a board")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=".sveb-table4-bundles-") as tmp:
        paths, used, counts = write_bundles(table4, Path(tmp), exports, domains)
        got = add_all(board, paths, used)
    conf = read_json(board / "board.json", {"builds": {}})
    absolute = sorted(p for p in conf["builds"].values() if Path(p).is_absolute())
    return {**counts, "added": sum(s == "added" for _, s in got), "unchanged": sum(s == "unchanged" for _, s in got),
            "builds": len(used), "absolute": absolute, "seconds_taken": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table4", type=Path, help="a Table 4 folder: estimates.parquet, exports/, timing.json, table4.md")
    p.add_argument("--out", type=Path, required=True, help="the board folder (created, or extended)")
    p.add_argument("--exports", type=Path, help="the export folders (default: TABLE4/exports)")
    p.add_argument("--domains", help="comma-separated domains to take (default: every domain in the estimates)")
    p.add_argument("--site", type=Path, help="also write the board's static site here (`sveb leaderboard html`)")
    a = p.parse_args(argv)
    domains = [d.strip() for d in a.domains.split(",") if d.strip()] if a.domains else None
    try:
        if a.site:  # refused before any work, as `sveb leaderboard html` refuses it
            from sveb.store import check_own_out, check_writable
            check_own_out(a.site, "leaderboard html", "SVEB leaderboard")
            check_writable(a.site, "--site")
        s = make_board(a.table4, a.out, a.exports, domains)
        print(f"{a.out}: {s['bundles']} bundles from {s['builds']} builds ({s['added']} added, {s['unchanged']} "
              f"unchanged) in {s['seconds_taken']:.0f} s; seconds from timing.json for {s['seconds']} "
              f"(bundle, protocol) pairs, null for {s['no seconds']} (their figure includes prepare())")
        if s["absolute"]:  # a build outside the board's parent folder: a clone elsewhere cannot find it
            print(f"note: board.json names {len(s['absolute'])} builds by absolute path (not beside the board): "
                  f"{', '.join(s['absolute'])}")
        if a.site:
            from sveb.present.site import write_site
            t0 = time.perf_counter()
            print(f"site: {write_site(a.out, a.site)} ({time.perf_counter() - t0:.0f} s)")
    except SvebError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
