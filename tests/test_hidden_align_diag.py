"""hidden-align's diagnostics and ablation (issue 17): weights printed and stored, the fallback said
aloud, the similarity-free ablation, and the per-state flag of whether the prefix reaches the anchor."""

import io

import numpy as np
import pytest
from rich.console import Console

from sveb.estimators import grid, make
from sveb.estimators.base import State
from sveb.estimators.hidden_align import calibrate, fit_logistic, sigmoid
from sveb.evaluate import diagnostics_line
from tests.helpers.groups import FakeBuild, group_with_hidden


def run(tmp_path, params, t=6):
    out = io.StringIO()
    est = make("hidden-align", params)
    est.prepare(FakeBuild(tmp_path / str(len(list(tmp_path.iterdir())))), Console(file=out, width=300))
    g = group_with_hidden()
    states = [State(f"s{i}-{t}", "p", i, t, "") for i in range(8)]
    values = np.array([est.estimate(g.without(s.rollout_idx), [s])[0] for s in states])
    return est, values, out.getvalue()


def test_auto_fallback_says_why_and_prints_the_weights(tmp_path):
    est, _, printed = run(tmp_path, {})
    d = est.diagnostics()
    assert "no --split train build" in printed and "fixed weights, not fitted" in printed
    assert "no tokenizer" in printed  # the anchor's proportional fallback is said too
    assert d["calibration"].startswith("fixed (auto") and len(d["notes"]) == 2
    assert "V = sigmoid(0.000 + 4.000 D + 1.000 logit p)" in printed
    assert (d["w_intercept"], d["w_similarity"], d["w_base_logit"]) == (0.0, 4.0, 1.0)
    est, _, printed = run(tmp_path, {"calibration": "fixed"})  # asked for: no fallback note
    assert "no --split train build" not in printed and est.diagnostics()["calibration"] == "fixed"


def test_ablation_without_similarity_is_the_calibrated_base_rate(tmp_path):
    assert "false" in grid("hidden-align")["similarity"]  # `sveb ablate` runs it beside the default
    _, full, _ = run(tmp_path, {"calibration": "fixed"})
    est, base, _ = run(tmp_path, {"calibration": "fixed", "similarity": "false"})
    # held-out: the base rate (k + 1/2) / (7 + 1) of the 7 others, k = 3 beside a correct rollout, 4 beside a wrong one
    assert base == pytest.approx(np.tile([3.5 / 8, 4.5 / 8], 4))
    assert (full[::2] > 0.8).all() and (full[1::2] < 0.2).all()  # the similarity term moves them
    assert est.diagnostics()["weights"] == [0.0, 0.0, 1.0]


def test_calibrate_fits_without_the_similarity_column():
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.normal(size=5000), rng.normal(size=5000)])
    y = (rng.random(5000) < sigmoid(-0.3 + 1.5 * x[:, 0] + 0.8 * x[:, 1])).astype(float)
    full, ablated = calibrate(x, y), calibrate(x, y, similarity=False)
    assert full == pytest.approx([-0.3, 1.5, 0.8], abs=0.15)
    assert ablated[1] == 0.0 and ablated[[0, 2]] == pytest.approx(fit_logistic(x[:, 1:], y))  # the same fit, no D
    y0 = (rng.random(5000) < sigmoid(-0.3 + 0.8 * x[:, 1])).astype(float)  # D carries nothing: the same model
    assert calibrate(x, y0, similarity=False) == pytest.approx(calibrate(x, y0), abs=0.1)


def test_reaches_anchor_flag_per_state(tmp_path):
    # "xxxx\\boxed{1}": the marker starts at character (= token) 4, so the anchor token is index 3
    est, _, _ = run(tmp_path, {"calibration": "fixed"}, t=6)
    g = group_with_hidden()
    est.estimate(g, [State("early", "p", 0, 2, ""), State("at", "p", 1, 4, "")])
    d = est.diagnostics()
    assert d["reaches_anchor"]["early"] is False and d["reaches_anchor"]["at"] is True
    assert all(d["reaches_anchor"][f"s{i}-6"] for i in range(8))
    assert (d["states_reaching_anchor"], d["states_before_anchor"]) == (9, 1)
    line = diagnostics_line(d)
    assert "reaches_anchor=<10 per-state entries>" in line and "early" not in line
