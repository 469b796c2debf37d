"""`sveb compare`: A against grpo equals the leaderboard's paired Δ for A (same states, same test)."""

import re

import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.evaluate import evaluate
from sveb.present.leaderboard import rows


def test_compare_with_grpo_equals_the_leaderboard(scripted_build, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    root, bdir = scripted_build
    for name in ("grpo", "mcs-2", "mcs-4"):
        evaluate(bdir, name, {}, "held-out")
    r = CliRunner().invoke(app, ["compare", "--root", str(root), "--seeds", "3", "-a", "mcs-2", "-b", "grpo",
                                 "-b", "mcs-4"])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.strip().splitlines() if x.startswith("mcs-2 - ")]
    assert len(lines) == 2 and lines[0].startswith("mcs-2 - grpo") and lines[1].startswith("mcs-2 - mcs-4")
    got = float(re.search(r"Δ sq err ([+-][\d.]+)", lines[0]).group(1))
    p = float(re.search(r"p ([\d.e-]+) \(unadjusted\)", lines[0]).group(1))
    board = {x["estimator"]: x for x in rows(root) if x["protocol"] == "held-out"}
    assert got == pytest.approx(board["mcs-2"]["delta_sq"], abs=1e-4)
    assert p == pytest.approx(board["mcs-2"]["p_delta"], rel=1e-2)
    r = CliRunner().invoke(app, ["compare", "--root", str(root), "--seeds", "3", "-a", "mcs-2", "-b", "hista"])
    assert r.exit_code != 0 and "hista: no held-out estimates" in r.output and "sveb eval -e hista" in r.output
