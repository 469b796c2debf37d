"""Scores, pooled seeds, paired verdicts and the 80-column leaderboard on scripted builds (no model needed)."""

import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from sveb import store
from sveb.core import metrics, schema
from sveb.core.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import ScriptedEngine
from sveb.evaluate import evaluate
from sveb.present import leaderboard
from sveb.sample.pipeline import build
from sveb.score import pooling, scoring

ESTIMATORS = ["grpo", "mcs-1", "mcs-4"]


@pytest.fixture(scope="module")
def cfg(tmp_path_factory) -> BuildConfig:
    src = tmp_path_factory.mktemp("src") / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    return BuildConfig(domain="number", model="scripted", source=str(src), problems=4, oversample=3, rollouts=8,
                       states_per_problem=3, mc=10, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=0,
                       min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200), engine="scripted")


@pytest.fixture(scope="module")
def root(tmp_path_factory, cfg) -> tuple[Path, list[Path], Path]:
    """Three seeds of one config (a pool), and one build of another model (alone)."""
    root = tmp_path_factory.mktemp("root")
    seeds = [build(replace(cfg, seed=s), root, engine=ScriptedEngine()) for s in (0, 1, 2)]
    alone = build(replace(cfg, model="scripted-b"), root, engine=ScriptedEngine())
    for bdir in (*seeds, alone):
        for name in ESTIMATORS:
            for proto in ("held-out", "in-group"):
                evaluate(bdir, name, {}, proto)
    return root, seeds, alone


def test_score_row_has_the_new_columns(root):
    _, seeds, _ = root
    row = store.read_table(seeds[0] / "scores", schema.SCORES).to_pylist()[0]
    for c in ("bias", "bias_ci_low", "bias_ci_high", "calib_slope", "concordance", "sign_agreement", "sign_pairs",
              "own_shift_p95", "own_shift_max"):
        assert c in row
    assert row["bias_ci_low"] <= row["bias"] <= row["bias_ci_high"]


def test_old_score_rows_are_recomputed_from_stored_estimates(root, monkeypatch):
    _, seeds, _ = root
    bdir = seeds[0]
    path = next((bdir / "scores").glob("part-grpo-*-held-out.parquet"))
    new = store.read_shard(path).to_pylist()[0]
    # an older scores version: fewer columns, the estimates' fingerprint
    est_fp = store.shard_fp(next((bdir / "estimates").glob("part-grpo-*-held-out.parquet")))
    old = store.read_shard(path).drop_columns(["bias", "concordance", "own_shift_max"])
    store.write_shard(path, old, est_fp)
    assert pooling.read_scores(bdir)  # readable, missing columns are None
    assert any(r["concordance"] is None for r in pooling.read_scores(bdir))

    def boom(*a, **k):
        raise AssertionError("the estimator ran again")
    monkeypatch.setattr("sveb.evaluate.run.estimate_all", boom)
    again = evaluate(bdir, "grpo", {}, "held-out")
    assert again["mae"] == new["mae"] and again["bias"] == new["bias"] and again["seconds"] == new["seconds"]
    assert store.read_shard(path).to_pylist()[0]["own_shift_max"] == new["own_shift_max"]


def test_pooled_rows_pool_states_of_every_seed(root):
    r, seeds, alone = root
    rows = leaderboard.rows(r)
    kinds = {(x["model"], x["kind"]) for x in rows}
    assert kinds == {("scripted", "pooled"), ("scripted", "seed"), ("scripted-b", "build")}
    pooled = [x for x in rows if x["kind"] == "pooled" and x["estimator"] == "mcs-1" and x["protocol"] == "held-out"]
    per_seed = [x for x in rows if x["kind"] == "seed" and x["estimator"] == "mcs-1" and x["protocol"] == "held-out"]
    assert len(pooled) == 1 and len(per_seed) == 3
    p = pooled[0]
    assert p["n_builds"] == 3 and p["seeds"] == "0,1,2"
    assert p["n_states"] == sum(x["n_states"] for x in per_seed)
    # clusters are the problems themselves: a problem two seeds drew is one cluster
    pids = {s["problem_id"] for b in seeds for s in store.read_table(b / "states", schema.STATES).to_pylist()}
    assert p["n_problems"] == len(pids) <= sum(x["n_problems"] for x in per_seed)
    # the pooled MAE is the state-weighted mean of the seeds' MAEs
    assert p["mae"] == pytest.approx(sum(x["mae"] * x["n_states"] for x in per_seed) / p["n_states"])
    assert p["build_fp"] == "+".join(sorted(b.name for b in seeds)) or set(p["build_fp"].split("+")) == {
        b.name for b in seeds}
    # one build alone keeps its stored score row
    stored = store.read_table(alone / "scores", schema.SCORES).to_pylist()
    b = next(x for x in rows
             if x["model"] == "scripted-b" and x["estimator"] == "mcs-1" and x["protocol"] == "held-out")
    s = next(x for x in stored if x["estimator"] == "mcs-1" and x["protocol"] == "held-out")
    assert b["mae"] == s["mae"] and b["n_builds"] == 1


def test_paired_columns_match_the_stored_estimates(root):
    r, seeds, _ = root
    rows = leaderboard.rows(r)
    v = pooling.merge([pooling.load_view(b, pooling.read_scores(b)) for b in seeds])
    for x in rows:
        if x["kind"] != "pooled" or x["estimator"] == "grpo":
            continue
        a = v.est[(x["estimator"], x["params_fp"], x["protocol"])]
        g = next(e for k, e in v.est.items() if k[0] == "grpo" and k[2] == x["protocol"])
        assert x["delta_sq"] == pytest.approx(np.mean((a - v.ref) ** 2 - (g - v.ref) ** 2))
        assert x["delta_sq_ci_low"] <= x["delta_sq"] <= x["delta_sq_ci_high"]
        assert x["p_holm"] >= x["p_delta"]
    fam = [x for x in rows if x["kind"] == "pooled" and x["protocol"] == "held-out" and x["estimator"] != "grpo"]
    # mcs-1 and mcs-4 are scale rows: the declared scale family (mcs-1..4) corrects for its 4 members
    assert {x["family"] for x in fam} == {"scale"}
    assert [x["p_holm"] for x in fam] == pytest.approx(list(scoring.holm([x["p_delta"] for x in fam], m=4)))
    for x in fam:
        assert x["verdict"] == scoring.verdict(x["delta_sq"], x["p_holm"])
    base = [x for x in rows if x["estimator"] == "grpo"]
    assert all(x["delta_sq"] is None and x["verdict"] is None for x in base)


def test_csv_has_every_column(root, tmp_path):
    r, _, _ = root
    path = leaderboard.write_csv(leaderboard.rows(r), tmp_path / "lb.csv")
    rows = list(csv.DictReader(open(path)))
    assert list(rows[0]) == leaderboard.COLUMNS
    assert {x["verdict"] for x in rows if x["estimator"] != "grpo"} <= {"better", "worse", "no difference", "n/a"}


def _words(text: str) -> set[str]:
    return {w for w in text.split() if not set(w) <= set("─━┃│┏┓┗┛┡┩┠┨┳┻╇╋┼┬┴└┘┌┐╶╴")}


@pytest.mark.parametrize("wide", [False, True])
def test_pivot_is_readable_in_80_columns(root, wide):
    """Nothing cut: every word of the tables printed on a very wide terminal is in the 80-column print
    (a cropped column or an ellipsis would lose words), and every shown cell is whole on one line."""
    r, _, _ = root
    rows = leaderboard.rows(r)
    con, big = (Console(width=w, record=True, color_system=None) for w in (80, 400))  # --wide too (issue 61)
    leaderboard.print_pivot(rows, con, wide=wide)
    leaderboard.print_pivot(rows, big, wide=wide)
    text = con.export_text()
    assert "…" not in text
    assert _words(big.export_text()) <= _words(text)
    for x in rows:
        if x["kind"] in ("build", "pooled"):
            lo, hi = x["mae_ci_low"], x["mae_ci_high"]
            cell = (f"{x['mae']:.3f} [{lo:.3f}, {hi:.3f}]" if wide else f"{x['mae']:.3f} ± {(hi - lo) / 2:.3f}")
            assert cell in text
            if x["estimator"] != "grpo":
                assert (x["verdict"] if wide or x["verdict"] != "no difference" else "no diff") in text
            if wide:  # the third table: k_eq with its interval
                assert metrics.fmt_ci(x, "k_eq", interval=True) in text
            elif x["protocol"] == "held-out":  # beside MAE (in-group tables show the own share there)
                assert leaderboard._keq(x) in text
    assert "per seed" in text and "seed 2" in text
    assert "oracle floor" in text and ("calibration" in text) == wide and ("own" in text)


def test_pivot_long_estimator_names_fold_instead_of_cut():
    row = {"model": "m", "domain": "number", "build_fp": "abc", "protocol": "held-out", "estimator": "grpo",
           "params_fp": "p", "params": "{}", "mae": 0.25, "mae_ci_low": 0.2, "mae_ci_high": 0.3, "n_states": 9,
           "n_problems": 3}
    long = {**row, "estimator": "sveb.estimators.some_long_plugin_module:VeryLongEstimatorClassName",
            "delta_sq": -0.0123, "delta_sq_ci_low": -0.02, "delta_sq_ci_high": -0.004, "p_holm": 0.0004,
            "verdict": "no difference"}
    con = Console(width=80, record=True, color_system=None)
    leaderboard.print_pivot([row, long], con)
    text = con.export_text()
    assert "…" not in text and "-0.0123 ± 0.0080" in text and "<0.001" in text and "no diff" in text
    assert "VeryLongEstimatorClassName" in text.replace("\n", "").replace("│", "").replace(" ", "")


def test_pivot_in_group_row_with_every_column_fits_80():
    # the widest narrow row: in-group (own column), a negative Δ with 4 decimals, a verdict, a long p
    row = {"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "domain": "number", "build_fp": "abc",
           "protocol": "in-group", "estimator": "hidden-align", "params_fp": "p", "params": "{}", "mae": 0.2513,
           "mae_ci_low": 0.2012, "mae_ci_high": 0.3034, "n_states": 1200, "n_problems": 300,
           "delta_sq": -0.0123, "delta_sq_ci_low": -0.0201, "delta_sq_ci_high": -0.0044, "p_holm": 0.0613,
           "verdict": "no difference", "own_share": 0.1251, "oracle_floor": 0.04, "ref_noise": 0.05,
           "k_eq": float("inf"), "k_eq_ci_low": 123.4, "k_eq_ci_high": float("inf")}
    con, big = (Console(width=w, record=True, color_system=None) for w in (80, 400))
    leaderboard.print_pivot([row], con)
    leaderboard.print_pivot([row], big)
    text = con.export_text()
    assert _words(big.export_text()) <= _words(text) and "…" not in text
    assert "0.125" in text and "-0.0123 ± 0.0078" in text and "0.061" in text
    # held-out: k_eq beside MAE, open above (no finite k matches): ">low"
    con, big = (Console(width=w, record=True, color_system=None) for w in (80, 400))
    leaderboard.print_pivot([{**row, "protocol": "held-out"}], con)
    leaderboard.print_pivot([{**row, "protocol": "held-out"}], big)
    text = con.export_text()
    assert _words(big.export_text()) <= _words(text) and "…" not in text and ">123.4" in text


def test_report_pools_seeds_into_one_column(root, tmp_path):
    from sveb.present import report
    r, seeds, _ = root
    report.write_report(r, tmp_path / "rep", by=("source",))
    md = (tmp_path / "rep" / "table.md").read_text(encoding="utf-8")
    assert "scripted — number — held-out: Δ sq err vs grpo per seed" in md
    assert "| estimator | seed 0 | seed 1 | seed 2 |" in md
    paired_rows = list(csv.DictReader(open(tmp_path / "rep" / "paired.csv")))
    pooled = [x for x in paired_rows if x["kind"] == "pooled"]
    assert {x["kind"] for x in paired_rows} == {"pooled", "seed", "build"}
    assert pooled and all(x["seeds"] == "0,1,2" and int(x["n_states"]) == 36 for x in pooled)
    lb = {(x["estimator"], x["protocol"], x["kind"]): x for x in leaderboard.rows(r) if x["model"] == "scripted"}
    for x in pooled:  # the report and the leaderboard give the same verdict
        assert x["verdict"] == lb[(x["estimator"], x["protocol"], "pooled")]["verdict"]
    by = list(csv.DictReader(open(tmp_path / "rep" / "by_source.csv")))
    assert any(int(x["n_states"]) == 36 for x in by)
    for s in seeds:  # every build is listed in the builds table
        assert s.name in md


def test_cli_leaderboard_wide(root, tmp_path):
    from typer.testing import CliRunner

    from sveb.cli import app
    r, _, _ = root
    res = CliRunner().invoke(app, ["leaderboard", "--root", str(r), "--out", str(tmp_path / "lb.csv"), "--wide"])
    assert res.exit_code == 0, res.output
    assert "calibration" in res.output and "per seed" in res.output
    assert len(list(csv.DictReader(open(tmp_path / "lb.csv")))) == len(leaderboard.rows(r))


def test_board_pools_seed_builds_as_the_leaderboard_does(root, tmp_path):
    """A shared board holding bundles of three seed builds of one config shows one pooled table per protocol whose
    MAE, paired Δ, Holm p and verdict equal `sveb leaderboard`'s pooled rows; a build of another model stays alone."""
    from sveb import board
    from sveb.board.root import add_root
    r, seeds, alone = root
    lb = tmp_path / "board"
    add_root(r, lb, Console(quiet=True))
    rows = board.rows(lb)
    pooled = {(x["estimator"], x["protocol"]): x for x in rows if x["kind"] == "pooled"}
    assert set(pooled) == {(e, p) for e in ESTIMATORS for p in ("held-out", "in-group")}
    hashes = {store.content_hash(b) for b in seeds}
    ref = {(x["estimator"], x["protocol"]): x for x in leaderboard.rows(r) if x["kind"] == "pooled"}
    for key, x in pooled.items():
        assert set(x["content_hash"].split("+")) == hashes and x["seeds"] == "0,1,2"
        assert x["n_states"] == sum(len(store.read_table(b / "states")) for b in seeds) == ref[key]["n_states"]
        for c in ("mae", "mae_ci_low", "mae_ci_high", "delta_sq", "p_delta", "p_holm"):
            assert x[c] == pytest.approx(ref[key][c], nan_ok=True), (key, c)
        assert x["verdict"] == (ref[key]["verdict"] or "baseline")
        assert len(x["bundle"].split("+")) == 3
    assert all(store.content_hash(alone) != x["content_hash"] for x in pooled.values())
    assert sum(x["kind"] == "build" for x in rows) == 4 * len(ESTIMATORS) * 2
    from sveb.present.site import write_site
    page = write_site(lb, tmp_path / "site").read_text()
    assert page.index("seeds 0,1,2 pooled") < page.index("· build ")
