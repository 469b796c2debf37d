"""benchmarks/paired_vs.py: A against grpo must equal the leaderboard's paired Δ for A (same states, same test)."""

import importlib.util
import re
from pathlib import Path

import pytest

from sveb.evaluate import evaluate
from sveb.present.leaderboard import rows

SPEC = importlib.util.spec_from_file_location("paired_vs", Path(__file__).parents[1] / "benchmarks" / "paired_vs.py")
paired_vs = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(paired_vs)


def test_paired_vs_grpo_equals_the_leaderboard(scripted_build, capsys):
    root, bdir = scripted_build
    for name in ("grpo", "mcs-2", "mcs-4"):
        evaluate(bdir, name, {}, "held-out")
    paired_vs.main(["--root", str(root), "--seeds", "3", "--model", "smollm2-135m", "--a", "mcs-2", "--b", "grpo",
                    "--b", "mcs-4"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("mcs-2 - grpo") and lines[1].startswith("mcs-2 - mcs-4")
    got = float(re.search(r"Δ sq err ([+-][\d.]+)", lines[0]).group(1))
    board = {r["estimator"]: r for r in rows(root) if r["protocol"] == "held-out"}
    assert got == pytest.approx(board["mcs-2"]["delta_sq"], abs=1e-4)
    with pytest.raises(SystemExit, match="hista"):
        paired_vs.main(["--root", str(root), "--seeds", "3", "--model", "smollm2-135m", "--a", "mcs-2", "--b", "hista"])
