"""`sveb conformance`: the authors' outputs (tests/fixtures/conformance, an excerpt of ../shared/conformance/public
and ../shared/conformance/pacs; see its README) reproduced by SVEB's Numca, Hista and PACS kernels."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.evaluate.conformance import run_dir, tally

FIX = Path(__file__).parent / "fixtures" / "conformance"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "conformance"


def test_every_fixture_case_agrees_per_estimator_and_rule():
    outcomes = run_dir(FIX)
    t = tally(outcomes)
    assert set(t) == {"numca", "hista", "pacs"}
    assert all(o.ok for o in outcomes), [o.case_id for o in outcomes if not o.ok][:5]
    assert t["hista"].total["ties"] > 0 and t["hista"].total["real-smollm2"] > 0
    assert t["numca"].total["non-ascii-digits"] > 0 and t["numca"].total["equal-adv-skip"] > 0


def test_cli_prints_the_tally_and_exits_1_on_a_disagreement(tmp_path):
    res = CliRunner().invoke(app, ["conformance", str(FIX)])
    assert res.exit_code == 0, res.output
    assert "cases agree" in res.output and "hista" in res.output
    bad = tmp_path / "bad"
    shutil.copytree(FIX, bad)
    lines = (bad / "numca.jsonl").read_text().splitlines()
    case = json.loads(lines[3])
    case["expected"] += 0.01
    lines[3] = json.dumps(case)
    (bad / "numca.jsonl").write_text("\n".join(lines) + "\n")
    res = CliRunner().invoke(app, ["conformance", str(bad)])
    assert res.exit_code == 1
    assert case["id"] in res.output


def test_a_malformed_case_is_one_line_naming_the_line(tmp_path):
    (tmp_path / "numca.jsonl").write_text('{"id": "x", "group": [], "own": 0}\nnot json\n')
    res = CliRunner().invoke(app, ["conformance", str(tmp_path)])
    assert res.exit_code != 0
    assert "numca.jsonl:1" in res.output and "cut_chars" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(app, ["conformance", str(empty)])
    assert res.exit_code != 0 and "holds none of" in res.output


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/conformance is not beside this clone")
@pytest.mark.parametrize("part", ["public", "pacs"])
def test_the_shared_sets_agree_whole(part):
    outcomes = run_dir(SHARED / part)
    assert outcomes and all(o.ok for o in outcomes), [o.case_id for o in outcomes if not o.ok][:5]


def test_a_folder_above_the_parts_runs_every_part(tmp_path):
    # the shared set's layout: public/{numca.jsonl, hista/} and pacs/pacs.jsonl under one top folder
    top = tmp_path / "conformance"
    shutil.copytree(FIX, top / "public", ignore=shutil.ignore_patterns("pacs"))
    shutil.copytree(FIX / "pacs", top / "pacs")
    got = run_dir(top)
    ids = lambda path: [json.loads(x)["id"] for x in path.read_text().splitlines() if x.strip()]  # noqa: E731
    want = ([("numca", i) for i in ids(FIX / "numca.jsonl")]
            + [("hista", i) for i in ids(FIX / "hista" / "cases.jsonl")]
            + [("pacs", i) for i in ids(FIX / "pacs" / "pacs.jsonl")])
    assert sorted((o.estimator, o.case_id) for o in got) == sorted(want) and all(o.ok for o in got)
