"""The metric table (sveb.core.metrics): the columns every view derives from it are today's, one formatter with
one missing mark, and a new metric is one entry that reaches the scores, the leaderboard, the board's site and
the report."""

import csv
import io
from dataclasses import replace

import numpy as np
import pyarrow as pa
from rich.console import Console

from sveb.core import metrics, schema
from sveb.core.metrics import Metric

# The columns as they were written by hand before the table (issue 33): nothing a user sees may move.
LEADERBOARD = ["model", "domain", "estimator", "params", "protocol", "kind", "seeds", "n_builds", "n_states",
               "n_problems", "mae", "mae_ci_low", "mae_ci_high", "k_eq", "k_eq_ci_low", "k_eq_ci_high", "delta_sq",
               "delta_sq_ci_low", "delta_sq_ci_high",
               "p_delta", "p_holm", "delta_sq_holm_low", "delta_sq_holm_high", "verdict", "family", "trainings",
               "training_sd", "training_seeds", "mae_training_sd", "replicate_of", "training_seed", "bias",
               "bias_ci_low", "bias_ci_high", "calib_slope", "concordance", "sign_agreement", "sign_pairs",
               # issue 57: the metrics neighbouring benchmarks read
               "spearman", "spearman_raw", "spearman_within", "spearman_within_raw", "kendall", "kendall_within",
               "ece", "ece_raw", "brier", "brier_reliability", "brier_resolution", "auroc_own", "sibling_top1",
               "sibling_chance", "sibling_sets", "drop_f1", "drop_rollouts", "rmse",
               "debiased_mse", "ref_noise", "oracle_floor", "own_share", "own_shift_p95", "own_shift_max",
               "seconds", "build_fp", "params_fp", "build_protocol", "caveats"]
PAIRED = ["model", "domain", "build_fp", "kind", "seeds", "protocol", "estimator", "params", "n_states",
          "n_problems", "mae", "mae_grpo", "delta_sq", "delta_sq_ci_low", "delta_sq_ci_high", "p_delta", "p_holm",
          "delta_sq_holm_low", "delta_sq_holm_high", "verdict", "family", "trainings", "training_sd",
          "training_seeds", "mae_training_sd", "replicate_of", "training_seed"]
SITE = [("estimator", "estimator", True), ("mae", "MAE ± 95% CI", False),
        ("k_eq", "worth k rollouts [95% CI]", False), ("delta_sq", "Δ sq err vs grpo [95% CI]", False),
        ("p_holm", "p (Holm)", False),
        ("verdict", "verdict", True), ("extra_tokens_per_state", "extra tokens/state", False),
        ("forward_tokens_per_state", "forward tokens/state", False), ("seconds_per_state", "s/state", False),
        ("prepare_seconds", "prepare s", False), ("spearman", "Spearman (noise-corrected)", False),
        ("ece", "ECE (l2, noise-debiased)", False), ("auroc_own", "AUROC of the own outcome", False),
        ("own_share", "own share", False),
        ("provenance", "provenance", True), ("bundle", "bundle", True)]
SCORES = {"model": "string", "domain": "string", "build_fp": "string", "estimator": "string", "params_fp": "string",
          "params": "string", "protocol": "string", "n_states": "int32", "n_problems": "int32", "mae": "double",
          "mae_ci_low": "double", "mae_ci_high": "double", "rmse": "double", "debiased_mse": "double",
          "ref_noise": "double", "oracle_floor": "double", "own_share": "double", "seconds": "double",
          "bias": "double", "bias_ci_low": "double", "bias_ci_high": "double", "calib_slope": "double",
          "concordance": "double", "sign_agreement": "double", "sign_pairs": "int32", "own_shift_p95": "double",
          "own_shift_max": "double", "k_eq": "double", "k_eq_ci_low": "double", "k_eq_ci_high": "double",
          **{c: "double" for c in ("spearman", "spearman_raw", "spearman_within", "spearman_within_raw", "kendall",
                                   "kendall_within", "ece", "ece_raw", "brier", "brier_reliability",
                                   "brier_resolution", "auroc_own", "sibling_top1", "sibling_chance", "drop_f1")},
          "sibling_sets": "int32", "drop_rollouts": "int32"}


def test_derived_columns_are_todays():
    from sveb.present import leaderboard, report, site
    assert leaderboard.COLUMNS == LEADERBOARD
    assert report.paired_columns() == PAIRED
    assert site.columns() == SITE
    assert metrics.paired_columns() == PAIRED[12:]
    # the scores table is read by column name, so only its names and types matter
    assert {f.name: str(f.type) for f in schema.SCORES} == SCORES
    assert [m.header for m in metrics.shown(metrics.TERMINAL)] == ["bias", "slope", "concord", "sign", "pairs",
                                                                    "own", "own p95", "own max"]
    assert [m.name for m in metrics.shown(metrics.REPORT)] == ["k_eq", "spearman", "ece", "auroc_own",
                                                                "sibling_top1", "drop_f1"]
    from sveb.present import table4  # the paper's layout: its own order, its metric columns from the table
    own = {"domain", "estimator", "protocol", "delta_sq_se", "df", "p", "family_size", "mde_80", "estimates", "builds"}
    assert {c for c in table4.COLUMNS if metrics.metric(c) is None} == own


def test_score_row_computes_every_stored_metric():
    from sveb.score.rows import metric_values
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 11, 40) / 10
    got = metric_values(rng.random(40), ref, 10, np.repeat(np.arange(10), 4), np.tile([0, 0, 1, 1], 10),
                        np.tile([5, 9, 5, 9], 10), rng.random(40))
    assert set(got) == set(metrics.scored()) and all(isinstance(v, (int, float)) for v in got.values())


def test_one_formatter_one_missing_mark():
    fmt = metrics.fmt
    for x in (None, float("nan"), float("inf"), "", True):
        assert {fmt(x, "mae"), fmt(x, "delta_sq"), fmt(x, "p_holm"), fmt(x, "seconds_per_state"),
                fmt(x, "sign_pairs")} == {metrics.MISSING}
    assert fmt(None, "verdict") == fmt("", "verdict") == metrics.MISSING and fmt("better", "verdict") == "better"
    assert fmt(0.12345, "mae") == "0.123" and fmt(0.012345, "delta_sq") == "+0.0123"
    assert fmt(0.0004, "p_holm") == "<0.001" and fmt(0.25, "p_holm") == "0.250"
    assert fmt(123.4, "extra_tokens_per_state") == "123" and fmt(2.34, "extra_tokens_per_state") == "2.3"
    assert fmt(0.000123, "seconds_per_state") == "0.00012" and fmt(7, "sign_pairs") == "7"
    r = {"mae": 0.2, "mae_ci_low": 0.1, "mae_ci_high": 0.3, "delta_sq": -0.01, "delta_sq_ci_low": -0.02,
         "delta_sq_ci_high": float("nan")}
    assert metrics.fmt_ci(r, "mae") == "0.200 ± 0.100" and metrics.fmt_ci(r, "mae", True) == "0.200 [0.100, 0.300]"
    assert metrics.fmt_ci(r, "delta_sq", True) == "-0.0100"  # no interval without both bounds
    assert metrics.csv_cell("p_holm", 0.000123456) == "0.0001235" and metrics.csv_cell("mae", 0.1) == "0.1000"


MDAE = Metric("mdae", "MdAE", "median abs error", direction="lower", arrow=pa.float64(),
              views=frozenset({metrics.LEADERBOARD, metrics.SITE, metrics.TERMINAL, metrics.REPORT}),
              compute=lambda est, ref: np.median(np.abs(est - ref)))


def test_the_scores_version_follows_the_stored_columns(monkeypatch):
    """The version that decides whether a stored score row is current is derived from the table: a new stored
    column or a metric's revision changes it; a header, a view or the order does not."""
    assert schema.SCORES_VERSION == 4  # today's table keeps the last hand-kept number: stored rows stay current
    base = metrics.METRICS
    monkeypatch.setattr(metrics, "METRICS", base + (MDAE,))
    added = schema.SCORES_VERSION
    assert added != 4
    monkeypatch.setattr(metrics, "METRICS", tuple(replace(m, revision=1) if m.name == "ece" else m for m in base))
    assert schema.SCORES_VERSION not in (4, added)
    shown_only = tuple(replace(m, header=m.header.upper(), views=frozenset()) for m in reversed(base))
    monkeypatch.setattr(metrics, "METRICS", shown_only + (replace(MDAE, arrow=None),))  # computed, never stored
    assert schema.SCORES_VERSION == 4


def test_a_new_metric_is_one_entry(scripted_build, tmp_path, monkeypatch):
    """One entry (a median absolute error computed per state) and nothing else: it is in the scores table, computed
    by `sveb eval`, in leaderboard.csv and the --wide table, on the board's site and in the report."""
    from sveb import board, store
    from sveb.board.submit import submit
    from sveb.evaluate import evaluate
    from sveb.present import leaderboard
    from sveb.present.report import write_report
    from sveb.present.site import write_site
    from sveb.score.pooling import load_view, read_scores
    root, bdir = scripted_build
    evaluate(bdir, "grpo", {}, "held-out")  # scored before the entry: its row is recomputed, its estimates kept
    kept = {p: p.stat().st_mtime_ns for p in (bdir / "estimates").rglob("*.parquet")}
    monkeypatch.setattr(metrics, "METRICS", metrics.METRICS + (MDAE,))
    assert "mdae" in schema.SCORES.names
    for name in ("grpo", "mcs-1"):
        evaluate(bdir, name, {}, "held-out")
    assert kept and all(p.stat().st_mtime_ns == t for p, t in kept.items())
    stored = store.read_table(bdir / "scores", schema.SCORES).to_pylist()
    view = load_view(bdir, read_scores(bdir))
    for r in stored:
        e = view.est[(r["estimator"], r["params_fp"], "held-out")]
        assert r["mdae"] == float(np.median(np.abs(e - view.ref)))

    rows = leaderboard.rows(root)
    text = leaderboard.write_csv(rows, tmp_path / "lb.csv").read_text()
    got = list(csv.DictReader(io.StringIO(text)))
    assert list(got[0])[-6:] == ["seconds", "mdae", "build_fp", "params_fp", "build_protocol", "caveats"]
    assert {g["estimator"]: g["mdae"] for g in got} == {r["estimator"]: f"{r['mdae']:.4f}" for r in stored}
    console = Console(width=200, record=True)
    leaderboard.print_pivot(rows, console, wide=True)
    assert "MdAE" in console.export_text()

    lb = tmp_path / "board"
    for name in ("grpo", "mcs-1"):
        board.add(lb, submit(bdir, name, {}, ["held-out"], tmp_path / f"b-{name}"), [bdir])
    assert all(r["mdae"] is not None for r in board.rows(lb))
    page = write_site(lb, tmp_path / "site").read_text()
    assert '<th data-key="mdae">median abs error</th>' in page

    write_report(root, tmp_path / "report")
    md = (tmp_path / "report" / "table.md").read_text()
    assert "median abs error (held-out) ↓:" in md
    assert "mdae" in (tmp_path / "report" / "leaderboard.csv").read_text().splitlines()[0]
