"""tools/board_from_table4.py on a tiny Table 4 folder made here (two scripted builds of two seeds, exported; real
grpo and mcs-eb-1 estimates, synthetic probe ones with a replicate training): one bundle per reading, the board's
MAE equal to the one computed from estimates.parquet and the references, replicate trainings kept apart, the
board readable after the folder moves, and bad input refused in one line."""

import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sveb import board, store
from sveb.core import schema
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
    home = tmp_path / "results" / "t4"
    for name, ex in exports.items():
        shutil.copytree(ex, home / "exports" / name)
    rng = np.random.default_rng(0)
    rows = []
    for ex in exports.values():
        m = store.read_manifest(ex)
        sids = [s["state_id"] for s in store.read_table(ex / "states").to_pylist()]
        for proto in ("held-out", "in-group"):
            for est, training in (("grpo", None), ("mcs-eb-1", None), ("probe", None), ("probe", 1)):
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
