"""Every table SVEB prints (but the leaderboard's, tested with it) is whole in an 80-column terminal: no cell cut to
`…`, no line past column 80, and the numbers are the ones the command computed."""

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sveb.cli import app
from sveb.sample.plan_table import short


def run80(*args):
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    return r.output


def whole(out: str) -> None:
    assert "…" not in out, out
    too_long = [ln for ln in out.splitlines() if len(ln.rstrip()) > 80]
    # only the plain sentences under a table may run on (the terminal wraps them); no table row
    assert all(not ln.startswith(" ") and "  " not in ln.strip() for ln in too_long), too_long


@pytest.mark.parametrize("n, unit, want", [
    (None, "", "?"), (0, "", "0"), (999, "", "999"), (12000, "", "12,000"), (99999, "", "99,999"),
    (100000, "", "100k"), (144000, "", "144k"), (1_440_000, "", "1.44M"), (86_400_000, "", "86.4M"),
    (1.52e9, "", "1.52G"), (999, "B", "999B"), (8.22e6, "B", "8.22MB"), (1.52e9, "B", "1.52GB"),
    (9.83e14, "B", "983TB"), (1200, "B", "1.20kB")])
def test_short_counts(n, unit, want):
    assert short(n, unit) == want and len(want) <= 6


def _row(out: str, label: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(label))
    return line[len(label):].split()


def test_plan_at_80_columns(tmp_path):
    args = ["plan", "--model", "Qwen2.5-3B-Instruct", "--problems", "3000", "--gpus", "8", "--root", str(tmp_path)]
    out = run80(*args)
    whole(out)
    p = json.loads(run80(*args, "--json"))
    header = next(ln for ln in out.splitlines() if "programming" in ln).split()
    assert header == [*p["domains"], "total"]
    for label, key, unit in (("candidates (problems x 4)", "candidates", ""), ("screening rollouts",
                             "screening_rollouts", ""), ("  in rollouts", "rollout_tokens", ""),
                             ("Parquet: rollouts", "rollouts_bytes", "B")):
        want = [short(r[key], unit) for r in p["domains"].values()] + [short(p["total"][key], unit)]
        assert _row(out, label) == want, label
    assert _row(out, "candidates (problems x 4)")[-1] == "60,000"  # 5 domains x 3000 x 4
    assert _row(out, "  response") == [f"{r['mean_response_tokens']:.0f}" for r in p["domains"].values()]


def test_plan_at_80_columns_with_huge_counts(tmp_path):
    out = run80("plan", "--model", "Qwen2.5-14B", "--problems", "1000000", "--rollouts", "1000", "--mc", "500",
                "--root", str(tmp_path))
    whole(out)
    assert _row(out, "rollouts (kept x 1000)") == ["1.00G"] * 5 + ["5.00G"]  # 10^6 problems x 1000, 5 domains
    assert _row(out, "candidates (problems x 4)") == ["4.00M"] * 5 + ["20.0M"]


def test_ls_models_and_estimators_at_80_columns():
    from sveb.core.models import listing
    from sveb.estimators import entries
    out = run80("ls", "models")
    whole(out)
    for r in listing():  # each name, hub id and description whole (the description may wrap between words)
        line = next(ln for ln in out.splitlines() if ln.split() and ln.split()[0] == r["name"])
        assert line.split()[1:] == [r["hub_id"], "yes" if r["cached"] else "no"]
    assert " ".join(out.split()).count("0.49B, hidden 896, 24 layers") >= 1
    out = run80("ls", "estimators")
    whole(out)
    names = [ln.split()[0] for ln in out.splitlines()[2:] if ln[:1].strip()]
    assert names == list(entries())


def test_ls_builds_at_80_columns(scripted_build):
    root, bdir = scripted_build
    out = run80("ls", "builds", "--root", str(root))
    whole(out)
    rel = str(bdir.relative_to(root))
    row = next(ln for ln in out.splitlines() if ln.startswith(rel))
    m = json.loads((bdir / "manifest.json").read_text())
    assert row.split()[1:4] == ["complete", str(m["n_problems"]), str(m["n_states"])]


def test_ablation_and_collapse_tables_at_80_columns(scripted_build, tmp_path):
    from sveb.evaluate.ablate import print_ablation
    res = {"mae": 0.123456, "mae_ci_low": 0.1, "mae_ci_high": 0.15, "seconds": 2.0, "n_states": 8}
    con = Console(width=80, record=True)
    long = {"alpha": "0.5", "phi": "0.25", "delta": "0.125", "k": "16", "calibration": "isotonic-with-a-long-name"}
    print_ablation("hidden-align", [({}, res), (long, {**res, "mae": 0.2})], con)
    out = con.export_text()
    whole(out)
    assert "0.1235 *" in out and "[0.100, 0.150]" in out and "0.2500" in out
    root, _ = scripted_build
    assert CliRunner().invoke(app, ["eval", "--root", str(root), "-e", "grpo", "-e", "mcs-1"]).exit_code == 0
    out = run80("collapse", "--root", str(root), "--out", str(tmp_path / "c"))
    whole(out)
    stats = [json.loads(p.read_text()) for p in (tmp_path / "c").glob("*.json")]
    assert {st["estimator"] for st in stats} == {"mcs-1"}
    for st in stats:
        row = next(ln.replace("│", " ").split() for ln in out.splitlines() if ln.startswith(f"│ {st['estimator']} "))
        assert row[1:] == [st["protocol"], str(st["n"]), f"{st['mean']:+.3f}", f"{st['std']:.3f}",
                           f"{st['frac_within']:.0%}"], out
