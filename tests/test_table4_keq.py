"""Table 4's rollout-equivalents (sveb.present.table4): the cells carry k_eq as sveb.score.rollout_eq computes
it, seconds per state and per continuation come from the recorded stage timings, cells read "k [lo, hi] · s",
and keq_plot draws one figure per call."""

import math

import numpy as np
import pytest

from sveb.present import table4 as t4
from sveb.score.rollout_eq import k_eq


def test_cells_carry_k_eq_and_spearman():
    rng = np.random.default_rng(0)
    v = rng.random(120)
    ref = rng.binomial(20, v) / 20
    groups = np.repeat(np.arange(30), 4).astype(object)
    est = {"held-out": {"grpo": np.full(120, ref.mean()), "mcs-2": rng.binomial(2, v) / 2}}
    rows = {r["estimator"]: r for r in t4.cells("number", est, "grpo", ref, groups)}
    want = k_eq(est["held-out"]["mcs-2"], ref, 20, groups)
    assert rows["mcs-2"]["k_eq"] == pytest.approx(want["k_eq"])
    assert rows["mcs-2"]["k_eq_ci_low"] < 2 < rows["mcs-2"]["k_eq_ci_high"]
    assert -1 <= rows["mcs-2"]["spearman"] <= 1
    assert rows["grpo"]["delta_sq"] == "" and np.isfinite(rows["grpo"]["k_eq"])  # the baseline: no test, a k_eq


def test_seconds_from_the_stage_timings():
    timing = {"math": {"references": 480.0, "eval probe (held-out)": 20.0, "eval probe (in-group)": 2.0},
              "math-seed1": {"references": 960.0, "eval probe (held-out)": 40.0},
              "number": {"hidden pass": 9.0}}
    states = {"math": 100, "math-seed1": 200, "number": 50}
    secs = t4.eval_seconds_per_state(timing, states, {"math": ["math", "math-seed1"], "number": ["number"]})
    assert secs == {("math", "probe", "held-out"): pytest.approx(60 / 300), ("math", "probe", "in-group"): 0.02}
    # 24 draws per state (20 references + 4 extra): 1440 s over 300 x 24 continuations
    assert t4.rollout_seconds(timing, states, ["math", "math-seed1"], 24) == pytest.approx(1440 / 7200)
    assert t4.rollout_seconds(timing, states, ["number"], 24) is None


def test_keq_cells_and_grid():
    row = {"estimator": "probe", "domain": "math", "protocol": "held-out", "k_eq": 2.84, "k_eq_ci_low": 2.15,
           "k_eq_ci_high": 4.08}
    assert t4.keq_cell(row, 0.48) == "2.8 [2.1, 4.1] · 0.48 s" and t4.keq_cell(row) == "2.8 [2.1, 4.1]"
    open_above = {**row, "k_eq": math.inf, "k_eq_ci_low": 12.0, "k_eq_ci_high": math.inf}
    assert t4.keq_cell(open_above) == ">12.0"
    assert t4.keq_cell({**row, "k_eq": "", "k_eq_ci_low": "", "k_eq_ci_high": ""}) == t4.MISSING
    md = t4.keq_markdown([row], ["math", "number"], "held-out", ["probe"], {("math", "probe", "held-out"): 0.48})
    assert "| probe | 2.8 [2.1, 4.1] · 0.48 s | - |" in md


def test_keq_plot_writes_a_figure(tmp_path):
    from sveb.present.cost_plot import keq_plot, mcs_k
    assert mcs_k("mcs-3") == 3 and mcs_k("mcs-3-ref") is None and mcs_k("probe") is None
    pts = {"math": [{"estimator": "probe", "seconds": 0.5, "k_eq": 2.8, "k_eq_ci_low": 2.1, "k_eq_ci_high": 4.1},
                    {"estimator": "mcs-2", "seconds": 1e-5, "k_eq": 2.0, "k_eq_ci_low": 1.7, "k_eq_ci_high": 2.4},
                    {"estimator": "oracle", "seconds": 0.1, "k_eq": math.inf, "k_eq_ci_low": 9.0,
                     "k_eq_ci_high": math.inf}]}
    path = keq_plot(pts, {"math": 0.2}, "t", tmp_path / "keq.png")
    assert path.exists() and path.stat().st_size > 10_000


def test_site_cost_plot_in_rollout_units_takes_open_and_missing_intervals(tmp_path):
    """The board's k_eq plot: an unbounded k_eq (drawn at its lower bound), an interval open above and a row
    without an interval (one problem) all draw; MAE's plot is unchanged by the same code."""
    from sveb.present.cost_plot import cost_plot, error_bar
    inf, nan = math.inf, math.nan
    assert error_bar(inf, 9.0, inf) == (9.0, (0.0, 31.0), True)
    assert error_bar(2.0, nan, nan) == (2.0, (0.0, 0.0), False)
    y, err, up = error_bar(0.2, 0.1, 0.3)
    assert y == 0.2 and err == pytest.approx((0.1, 0.1)) and not up
    rows = [{"content_hash": "h", "protocol": "held-out", "estimator": e, "extra_tokens_per_state": x, "k_eq": k,
             "k_eq_ci_low": lo, "k_eq_ci_high": hi, "mae": 0.2, "mae_ci_low": 0.1, "mae_ci_high": 0.3}
            for e, x, k, lo, hi in (("grpo", 0.0, 2.0, 1.6, 2.5), ("oracle", 0.0, inf, 9.0, inf),
                                    ("one", 0.0, 1.0, nan, nan))]
    curve = [{"k": k, "extra_tokens_per_state": 50.0 * k, "k_eq": float(k), "k_eq_ci_low": k - 0.3,
              "k_eq_ci_high": k + 0.5 if k < 4 else inf, "mae": 0.3 / k, "mae_ci_low": 0.2 / k,
              "mae_ci_high": 0.4 / k} for k in (1, 2, 3, 4)]
    for metric in ("k_eq", "mae"):
        path = cost_plot(rows, {"h": curve}, "t", tmp_path / f"{metric}.png", metric=metric)
        assert path.stat().st_size > 10_000


def test_site_cost_plot_is_a_grid_with_one_legend_naming_each_estimator_once():
    """A domain of 3 builds x 2 protocols: a row per protocol (held-out first), a column per build, and one legend
    beside the panels with every estimator once (a legend per panel covered the points at two dozen rows)."""
    from sveb.present.cost_plot import cost_figure
    names = [f"est-{i:02d}" for i in range(24)]
    rows = [{"content_hash": h, "protocol": p, "estimator": e, "extra_tokens_per_state": 0.0, "mae": 0.1 + i / 100,
             "mae_ci_low": 0.05, "mae_ci_high": 0.3} for h in ("b1", "b2", "b3") for p in ("in-group", "held-out")
            for i, e in enumerate(names)]
    fig = cost_figure(rows, {}, "t")
    assert len(fig.axes) == 6
    assert [ax.get_title() for ax in fig.axes[:3]] == [f"build {h} · held-out" for h in ("b1", "b2", "b3")]
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == names
