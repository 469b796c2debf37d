"""tools/board_from_table4.py on a tiny Table 4 folder made here (two scripted builds of two seeds, exported; real
grpo and mcs-eb-1 estimates, synthetic probe ones with a replicate training): one bundle per reading, the board's
MAE equal to the one computed from estimates.parquet and the references, replicate trainings kept apart, the
board readable after the folder moves, and bad input refused in one line. With probe at three trainings: every
table a user sees (the board, its site, `sveb leaderboard`, `sveb report`) shows its default row as Table 4 does,
the mean over trainings, says so, and marks the replicates, whose verdict is none of the estimator's."""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sveb import board, store
from sveb.core import schema
from sveb.score import replicates
from tests.helpers.cli import cli
from tests.helpers.sources import write_chain_source
from tools.board_from_table4 import main, readings


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """{export name: folder} of two scripted builds of one config, seeds 3 and 4 (one pool)."""
    from sveb.core.config import BuildConfig, SamplingConfig
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    from sveb.store.export import export_build
    tmp = tmp_path_factory.mktemp("t4")
    src = write_chain_source(tmp / "dapo.jsonl")
    weights = tmp / "model"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"weights")
    (weights / "config.json").write_text("{}")
    out = {}
    for name, seed in (("number", 3), ("number-seed1", 4)):
        cfg = BuildConfig(domain="number", model="smollm2-135m", source=str(src), problems=4, oversample=3,
                          rollouts=8, states_per_problem=2, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=seed,
                          min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200), engine="scripted")
        bdir = build(cfg, tmp / "root", engine=ScriptedEngine())
        out[name] = export_build(bdir, tmp / "exports" / name, model_dir=weights)
    return out


def _values(name: str, export, protocol: str) -> np.ndarray:
    """What `sveb eval` computes for a cheap builtin: blind view, prepare(), estimate."""
    from sveb.estimators import make
    from sveb.estimators.base import as_context, call_prepare, view_for
    from sveb.evaluate.protocols import estimate_all
    from sveb.store.builds import load_build
    est = make(name, {})
    data = view_for(est, load_build(export))
    call_prepare(est, data, as_context(None))
    return estimate_all(est, data, protocol, progress=False)[0]


def _pfp(name: str, training=None) -> str:
    from sveb.estimators import make, params_fp
    return params_fp(make(name, {} if training is None else {"seed": str(training)}))


@pytest.fixture
def table4(exports, tmp_path):
    """A Table 4 folder: estimates.parquet (grpo, mcs-eb-1, probe and probe's training 1 on both builds, both
    protocols), exports/, timing.json, table4.md."""
    return _table4(exports, tmp_path / "results" / "t4", (None, 1))


def _table4(exports, home, probe_trainings):
    for name, ex in exports.items():
        shutil.copytree(ex, home / "exports" / name)
    rng = np.random.default_rng(0)
    rows = []
    for ex in exports.values():
        m = store.read_manifest(ex)
        sids = [s["state_id"] for s in store.read_table(ex / "states").to_pylist()]
        for proto in ("held-out", "in-group"):
            for est, training in (("grpo", None), ("mcs-eb-1", None), *(("probe", t) for t in probe_trainings)):
                vals = (_values(est, ex, proto) if est != "probe" else rng.uniform(0, 1, len(sids)))
                how = f"sveb eval {est} {_pfp(est, training)}" + (f" --param seed={training}" if training else "")
                rows += [{"domain": "number", "build_fp": m["build_fp"], "state_id": s, "estimator": est,
                          "params_fp": _pfp(est, training), "protocol": proto, "value": float(v), "provenance": how,
                          "training": training} for s, v in zip(sids, vals)]
    _write(home / "estimates.parquet", rows)
    (home / "timing.json").write_text(json.dumps({"number": {"eval grpo (held-out)": 0.5,
                                                             "eval probe (held-out)": 9.0}}))
    (home / "table4.md").write_text("Timings: CPU flags: avx avx2.\n")
    return home, rows


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(
        [("domain", pa.string()), ("build_fp", pa.string()), ("state_id", pa.string()), ("estimator", pa.string()),
         ("params_fp", pa.string()), ("protocol", pa.string()), ("value", pa.float64()),
         ("provenance", pa.string()), ("training", pa.int64())])), path)


def _run(capsys, *args):
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_every_reading_is_one_bundle_scored_as_computed_from_the_table(table4, capsys):
    home, rows = table4
    lb = home.parent / "board"
    rc, out, err = _run(capsys, home, "--out", lb, "--site", home.parent / "site")
    assert rc == 0, err
    assert "mcs-eb-1" in (home.parent / "site" / "index.html").read_text()
    metas = [json.loads(p.read_text()) for p in sorted((lb / "bundles").glob("*/bundle.json"))]
    want = {(r["build_fp"], r["estimator"], r["params_fp"], r["training"]) for r in rows}
    got = [(m["build"]["build_fp"], m["estimator"]["name"], m["estimator"]["params_fp"], m["source"]["training"])
           for m in metas]
    assert sorted(got, key=str) == sorted(want, key=str)  # one bundle per reading, none twice
    assert all(m["protocols"] == ["held-out", "in-group"] for m in metas)  # each holds both protocols' rows
    assert len(readings(rows, "x")) == len(metas) == 2 * 4
    scored = [r for r in board.rows(lb) if r["kind"] == "build"]
    assert len(scored) == len({(r["build_fp"], r["estimator"], r["params_fp"], r["training"], r["protocol"])
                               for r in rows})  # one board row per (reading, protocol)
    pooled = 0
    for r in scored:  # the board's MAE is the one computed directly from the table and the build's references
        ex = home / "exports" / ("number" if r["build_fp"] == store.read_manifest(home / "exports" / "number")[
            "build_fp"] else "number-seed1")
        ref = {x["state_id"]: x["value"] for x in store.read_table(ex / "references", schema.REFERENCES).to_pylist()}
        same = [x for x in rows if (x["build_fp"], x["estimator"], x["protocol"]) ==
                (r["build_fp"], r["estimator"], r["protocol"])]
        # a default row tested over its trainings: the mean of every training's MAE (Table 4's), else its own
        runs = {x["params_fp"] for x in same} if (r["trainings"] or 0) > 1 else {r["params_fp"]}
        mine = [[x for x in same if x["params_fp"] == p] for p in runs]
        pooled += len(mine) > 1
        assert all(len(m) == len(ref) for m in mine)
        assert r["mae"] == pytest.approx(np.mean([np.mean([abs(x["value"] - ref[x["state_id"]]) for x in m])
                                                  for m in mine]), abs=1e-12)
    assert pooled == 2 * 2  # probe's default rows (builds x protocols): the mean over its two trainings
    check = {r["estimator"]: r["provenance_check"] for r in scored}
    assert check == {"grpo": "verified", "mcs-eb-1": "verified", "probe": "self-declared"}  # the board's rerun
    assert {r["kind"] for r in board.rows(lb)} == {"build", "pooled"}  # the two seeds pool
    # seconds: timing.json's figure where the estimator prepares nothing; probe's (training included) kept aside
    by = {(m["estimator"]["name"], m["source"]["export"], m["source"]["training"]): m for m in metas}
    assert by[("grpo", "number", None)]["cost"]["held-out"]["seconds"] == 0.5
    assert by[("grpo", "number", None)]["cost"]["in-group"]["seconds"] is None  # not recorded: null, not invented
    probe = by[("probe", "number", None)]
    assert probe["cost"]["held-out"]["seconds"] is None
    assert probe["source"]["timing"]["held-out"]["seconds_incl_prepare"] == 9.0
    assert probe["machine"]["cpu_flags"] == "avx avx2"
    assert "mae" not in json.dumps(metas)  # bundles carry no scores
    rc, out, _ = _run(capsys, home, "--out", lb)  # again: nothing new
    assert rc == 0 and "0 added, 8 unchanged" in out


def test_replicate_trainings_stay_apart(table4, capsys):
    home, rows = table4
    lb = home.parent / "board"
    assert _run(capsys, home, "--out", lb)[0] == 0
    probe = [r for r in board.rows(lb) if r["estimator"] == "probe" and r["kind"] == "build"]
    assert len(probe) == 2 * 2 * 2  # builds x protocols x trainings
    seeds = {json.loads(r["params"])["seed"]: r for r in probe if r["protocol"] == "held-out"
             and r["build_fp"] == store.read_manifest(home / "exports" / "number")["build_fp"]}
    assert set(seeds) == {0, 1}
    default = [x["value"] for x in rows if x["estimator"] == "probe" and x["training"] is None
               and x["protocol"] == "held-out" and x["build_fp"] == seeds[0]["build_fp"]]
    ref = {x["state_id"]: x["value"] for x in store.read_table(home / "exports" / "number" / "references",
                                                               schema.REFERENCES).to_pylist()}
    sids = [x["state_id"] for x in rows if x["estimator"] == "probe" and x["training"] is None
            and x["protocol"] == "held-out" and x["build_fp"] == seeds[0]["build_fp"]]
    alone = np.mean([abs(v - ref[s]) for v, s in zip(default, sids)])
    assert seeds[0]["mae"] != pytest.approx(alone)  # not the default training's alone: the mean over both, as
    assert seeds[0]["mae"] == pytest.approx((alone + seeds[1]["mae"]) / 2)  # its test (and Table 4's MAE)
    assert seeds[0]["trainings"] == 2 and seeds[0]["params_fp"] == _pfp("probe")  # its test is over both trainings
    assert seeds[1]["params_fp"] == _pfp("probe", 1)
    assert (seeds[1]["replicate_of"], seeds[1]["training_seed"], seeds[1]["verdict"]) == ("probe", 1, "replicate")


def test_the_board_reads_after_the_folder_moves(table4, capsys, tmp_path):
    home, _ = table4
    lb = home.parent / "board"
    assert _run(capsys, home, "--out", lb)[0] == 0
    paths = json.loads((lb / "board.json").read_text())["builds"].values()
    assert sorted(paths) == ["../t4/exports/number", "../t4/exports/number-seed1"]  # relative: beside the board
    before = [(r["estimator"], r["mae"], r["verdict"]) for r in board.rows(lb)]
    moved = tmp_path / "clone" / "results"
    shutil.copytree(home.parent, moved)
    shutil.rmtree(home.parent)
    assert len(board.known_builds(moved / "board")) == 2
    assert [(r["estimator"], r["mae"], r["verdict"]) for r in board.rebuild(moved / "board")] == before
    r = cli("leaderboard", "html", "--board", moved / "board", "--out", tmp_path / "site")
    assert r.exit_code == 0, r.output
    assert "probe" in (tmp_path / "site" / "index.html").read_text()


def _one_line(capsys, *args, fragments=()):
    rc, out, err = _run(capsys, *args)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def test_bad_input_is_one_line_naming_the_file_and_row(table4, capsys, tmp_path):
    home, rows = table4
    lb = tmp_path / "b"
    _one_line(capsys, tmp_path / "nowhere", "--out", lb, fragments=("nowhere/estimates.parquet", "no such file"))
    bad = [dict(r) for r in rows]
    bad[5]["build_fp"] = "000000000000"
    _write(home / "estimates.parquet", bad)
    _one_line(capsys, home, "--out", lb, fragments=("estimates.parquet: row 5", "000000000000", "no export"))
    bad = [dict(r) for r in rows]
    bad[7]["state_id"] = "not-a-state"
    _write(home / "estimates.parquet", bad)
    _one_line(capsys, home, "--out", lb, fragments=("estimates.parquet: row 7", "not-a-state",
                                                      "is not a state of build"))
    bad = [dict(r) for r in rows]  # a reading whose params_fp today's registry does not make
    for r in bad:
        if r["estimator"] == "probe" and r["training"] == 1:
            r["params_fp"] = "ffffffffffff"
    first = next(i for i, r in enumerate(bad) if r["params_fp"] == "ffffffffffff")
    _write(home / "estimates.parquet", bad)
    _one_line(capsys, home, "--out", lb, fragments=(f"estimates.parquet: row {first}", "ffffffffffff",
                                                      "defaults changed"))
    assert not lb.exists()  # nothing written on refusal


@pytest.fixture
def three(exports, tmp_path):
    """The Table 4 folder with probe at three trainings (seeds 0, 1, 2)."""
    return _table4(exports, tmp_path / "results" / "t4", (None, 1, 2))


def _refs(home) -> dict[str, dict[str, float]]:
    """build_fp -> {state_id: reference} of the folder's exports."""
    return {store.read_manifest(ex)["build_fp"]: {x["state_id"]: x["value"] for x in
                                                  store.read_table(ex / "references", schema.REFERENCES).to_pylist()}
            for ex in sorted((home / "exports").iterdir())}


def _maes(rows, refs, fps, protocol) -> list[float]:
    """probe's MAE per training on the states of the builds `fps`, straight from the table and the references."""
    out = []
    for t in (None, 1, 2):
        err = [abs(x["value"] - refs[x["build_fp"]][x["state_id"]]) for x in rows if x["estimator"] == "probe"
               and x["training"] == t and x["protocol"] == protocol and x["build_fp"] in fps]
        assert len(err) == sum(len(refs[f]) for f in fps)
        out.append(float(np.mean(err)))
    return out


def test_three_trainings_on_the_board_and_site_show_the_mean_and_mark_the_replicates(three, capsys):
    home, rows = three
    lb, site = home.parent / "board", home.parent / "site"
    assert _run(capsys, home, "--out", lb, "--site", site)[0] == 0
    refs = _refs(home)
    probe = [r for r in board.rows(lb) if r["estimator"] == "probe"]
    defaults = [r for r in probe if r["params_fp"] == _pfp("probe")]
    assert len(defaults) == (2 + 1) * 2  # each build and their pool, both protocols
    for r in defaults:  # Table 4's MAE: the mean over trainings of each training's MAE, and its test over them
        maes = _maes(rows, refs, r["build_fp"].split("+"), r["protocol"])
        assert r["mae"] == pytest.approx(np.mean(maes), abs=1e-12)
        assert r["mae_ci_low"] < r["mae"] < r["mae_ci_high"]
        assert r["mae_training_sd"] == pytest.approx(np.std(maes, ddof=1), abs=1e-12)
        assert (r["trainings"], r["training_seeds"], r["replicate_of"]) == (3, "0,1,2", None)
        assert r["verdict"] in ("better", "worse", "no difference")
    reps = [r for r in probe if r["params_fp"] != _pfp("probe")]
    assert len(reps) == 2 * 3 * 2  # two replicates, in each build and the pool, both protocols
    for r in reps:  # marked, and their verdict is none of the estimator's (tested alone: p unadjusted)
        assert (r["replicate_of"], r["training_seed"]) == ("probe", json.loads(r["params"])["seed"])
        assert r["training_seed"] in (1, 2) and r["verdict"] == "replicate" and r["p_holm"] == r["p_delta"]
    header = (lb / "scores.csv").read_text().splitlines()[0].split(",")
    assert {"trainings", "training_seeds", "replicate_of", "training_seed"} <= set(header)
    page = (site / "index.html").read_text()
    assert "probe (mean of 3 trainings)" in page and "mean of 3 trainings (seeds 0,1,2)" in page
    assert "probe (training seed 1)" in page and "probe (training seed 2)" in page and ">replicate<" in page


def _scored_root(home, rows, root):
    """The folder's exports under `root`, each holding the table's readings as `sveb eval` stores them."""
    from sveb.estimators import make, params_json
    from sveb.evaluate.run import _write_scores
    from sveb.store.builds import load_build
    where = {}
    for ex in sorted((home / "exports").iterdir()):
        shutil.copytree(ex, root / ex.name)
        where[store.read_manifest(ex)["build_fp"]] = store.Build(root / ex.name)
    readings = {}
    for x in rows:
        readings.setdefault((x["build_fp"], x["estimator"], x["params_fp"], x["protocol"], x["training"]), []).append(x)
    for (fp, name, pfp, proto, t), xs in readings.items():
        b = where[fp]
        problem = {s["state_id"]: s["problem_id"] for s in store.read_table(b.path / "states").to_pylist()}
        pj = params_json(make(name, {} if t is None else {"seed": str(t)}))
        est = [{"state_id": x["state_id"], "problem_id": problem[x["state_id"]], "estimator": name,
                "params_fp": pfp, "params": pj, "protocol": proto, "value": x["value"], "own_shift": float("nan")}
               for x in xs]
        key = f"{name}-{pfp}-{proto}"
        b.store("estimates", key, pa.Table.from_pylist(est, schema=schema.ESTIMATES), "test")
        _write_scores(b, key, "test", {k: est[0][k] for k in ("estimator", "params_fp", "params", "protocol")}, est,
                      load_build(b), float("nan"))
    return root


def test_three_trainings_in_the_leaderboard_and_report_show_the_mean_and_mark_the_replicates(three, tmp_path):
    from rich.console import Console

    from sveb.present import leaderboard
    home, rows = three
    root = _scored_root(home, rows, tmp_path / "root")
    refs = _refs(home)
    r = cli("leaderboard", "--root", root, "--out", tmp_path / "lb.csv", "--no-published")
    assert r.exit_code == 0, r.output
    import csv
    got = [x for x in csv.DictReader(open(tmp_path / "lb.csv", encoding="utf-8")) if x["estimator"] == "probe"
           and x["kind"] == "pooled" and x["protocol"] == "held-out"]
    default, = (x for x in got if x["params_fp"] == _pfp("probe"))
    maes = _maes(rows, refs, list(refs), "held-out")
    assert float(default["mae"]) == pytest.approx(np.mean(maes), abs=1e-4)  # the CSV's 4 decimals
    assert (default["trainings"], default["training_seeds"], default["replicate_of"]) == ("3", "0,1,2", "")
    assert sorted((x["replicate_of"], x["training_seed"], x["verdict"]) for x in got if x is not default) == \
        [("probe", "1", "replicate"), ("probe", "2", "replicate")]
    console = Console(width=200, record=True)
    leaderboard.print_pivot(leaderboard.rows(root), console)
    text = console.export_text()
    assert "probe (mean of 3 trainings)" in text and "probe (training seed 2)" in text and "replicate" in text
    flat = " ".join(text.split())  # the terminal wraps the caption
    assert replicates.MEAN_NOTE in flat and replicates.REPLICATE_NOTE in flat  # one wording on every surface
    r = cli("report", "--root", root, "--out", tmp_path / "report")
    assert r.exit_code == 0, r.output
    md = (tmp_path / "report" / "table.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("| probe (mean of 3 trainings) |"))
    assert f"| {np.mean(maes):.3f} ± " in line  # the pooled column: the mean over trainings
    assert replicates.MEAN_NOTE in md
