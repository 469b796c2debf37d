"""`sveb conformance` on hostile case files: every bad field is one line naming the file, line and field (never a
traceback), and a file that checks nothing never passes. Cases are made in tmp_path from the fixtures' first ones."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from sveb.cli import app
from sveb.core.errors import UsageError
from sveb.evaluate.conformance import run_dir

FIX = Path(__file__).parent / "fixtures" / "conformance"


def first(rel: str) -> dict:
    return json.loads((FIX / rel).read_text().splitlines()[0])


def write(path: Path, *cases) -> Path:
    """Cases (dicts, or raw lines) one a line; the directory they make up."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in cases))
    return path.parent if path.parent.name != "hista" else path.parent.parent


def numca(**change) -> dict:
    c = first("numca.jsonl")
    c.update(change)
    return c


def hista_dir(tmp_path: Path, change=None, params=None, npz=None) -> Path:
    """A good Hista case on line 1 and the changed one on line 2, with the fixture's group (or `npz` arrays)."""
    good = first("hista/cases.jsonl")
    (tmp_path / "hista").mkdir(parents=True)
    src = FIX / good["group"]
    if npz is None:
        shutil.copy(src, tmp_path / good["group"])
    elif isinstance(npz, bytes):
        (tmp_path / good["group"]).write_bytes(npz)
    else:
        np.savez(tmp_path / good["group"], **npz)
    bad = json.loads(json.dumps(good))
    bad["id"] += "-bad"
    bad.update(change or {})
    for k, v in (params or {}).items():
        if v is None:
            del bad["params"][k]
        else:
            bad["params"][k] = v
    write(tmp_path / "hista" / "cases.jsonl", good if npz is None else bad, bad)
    return tmp_path


def fails(root: Path, *needles: str) -> str:
    """The run aborts with one `error:` line holding every needle, exit code != 0, no traceback."""
    with pytest.raises(UsageError) as e:
        run_dir(root)
    msg = str(e.value)
    assert "\n" not in msg, msg
    for s in needles:
        assert s in msg, (s, msg)
    res = CliRunner().invoke(app, ["conformance", str(root)])
    assert res.exit_code not in (0, None) and isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output and [ln for ln in res.output.splitlines() if ln.startswith("error:")] \
        == [f"error: {msg}"], res.output
    return msg


N_GROUP = len(first("numca.jsonl")["group"])


@pytest.mark.parametrize("change, needles", [
    ({"own": 7 + N_GROUP}, ['"own" must be an index into "group" (0..', f"got {7 + N_GROUP}"]),
    ({"own": -1}, ['"own" must be an index', "got -1"]),
    ({"own": 0.9}, ['"own"', "got 0.9"]),
    ({"own": True}, ['"own"', "got true"]),
    ({"own": None}, ['"own"', "got null"]),
    ({"expected": None}, ['"expected" must be a finite number', "got null"]),
    ({"expected": math.nan}, ['"expected" must be a finite number', "got NaN"]),
    ({"rules": None}, ['"rules" must be a list of strings', "got null"]),
    ({"rules": "synthetic"}, ['"rules" must be a list of strings', 'got "synthetic"']),
    ({"group": [{"reward": 1.0}]}, ['"group[0].text"']),
    ({"group": [{"text": "1 2", "reward": 0.5}], "own": 0}, ['"group[0].reward" must be 0.0 or 1.0', "got 0.5"]),
    ({"group": "abc"}, ['"group" must be a non-empty list']),
    ({"group": []}, ['"group" must be a non-empty list', "got []"]),
    ({"cut_chars": -3}, ['"cut_chars" must be an integer >= 0', "got -3"]),
    ({"id": 5}, ['"id" must be a non-empty string', "got 5"]),
])
def test_a_bad_numca_field_names_the_file_line_and_field(tmp_path, change, needles):
    root = write(tmp_path / "numca.jsonl", numca(), numca(**{"id": "bad-case", **change}))
    fails(root, "numca.jsonl:2", *needles)


def test_numca_missing_fields_are_named_together(tmp_path):
    c = numca()
    del c["own"], c["expected"]
    fails(write(tmp_path / "numca.jsonl", c), "numca.jsonl:1", '"own"', '"expected"', c["id"])


def test_a_stray_byte_and_an_empty_file_fail(tmp_path):
    (tmp_path / "numca.jsonl").write_bytes(json.dumps(numca()).encode() + b"\n{\"id\": \"x\xff\"}\n")
    fails(tmp_path, "numca.jsonl:2", "not UTF-8", "0xff")
    for text in ("", "\n  \n"):
        (tmp_path / "numca.jsonl").write_text(text)
        fails(tmp_path, "no cases were found in", "numca.jsonl")


def test_an_empty_case_file_fails_beside_good_ones(tmp_path):
    write(tmp_path / "numca.jsonl", numca())
    write(tmp_path / "pacs.jsonl", "")
    fails(tmp_path, "no cases were found in", "pacs.jsonl")


def test_a_repeated_id_fails(tmp_path):
    fails(write(tmp_path / "numca.jsonl", numca(), numca()), "numca.jsonl:2", '"id" must be unique', "line 1")


@pytest.mark.parametrize("change, params, needles", [
    ({}, {"mean_window": None}, ['"params" has no field "mean_window"']),
    ({}, {"alpha": math.nan}, ['"params.alpha" must be a number in [0, 1)', "got NaN"]),
    ({}, {"min_k": 100}, ['"params.min_k" must be an integer in [1, max_k=66]', "got 100"]),
    ({}, {"mean_window": 2.5}, ['"params.mean_window"', "got 2.5"]),
    ({"params": None}, {}, ['"params" must be an object']),
    ({"start_token_index": -100}, {}, ['"start_token_index" must be a token index in the prompt', "got -100"]),
    ({"own": 99}, {}, ['"own" must be an index into the group', "got 99"]),
    ({"cut_tokens": 10 ** 6}, {}, ['"cut_tokens" must be an integer in [0, ', "got 1000000"]),
    ({"group": 3}, {}, ['"group" must be the path of an .npz', "got 3"]),
    ({"group": "hista/none.npz"}, {}, ["none.npz not found"]),
    ({"ties": "no"}, {}, ['"ties" must be true or false']),
])
def test_a_bad_hista_field_names_the_file_line_and_field(tmp_path, change, params, needles):
    msg = fails(hista_dir(tmp_path, change, params), "cases.jsonl:2", "-bad", *needles)
    assert "-P" not in msg  # a flag nobody passed


def test_a_bad_hista_group_file_names_it(tmp_path):
    good = np.load(FIX / first("hista/cases.jsonl")["group"])
    arrays = {k: good[k] for k in good.files}
    fails(hista_dir(tmp_path / "a", npz=(FIX / first("hista/cases.jsonl")["group"]).read_bytes()[:2000]),
          "cases.jsonl:1", "is not a readable .npz")
    fails(hista_dir(tmp_path / "b", npz={k: v for k, v in arrays.items() if k != "rewards"}),
          "cases.jsonl:1", 'has no array "rewards"')
    fails(hista_dir(tmp_path / "c", npz={k: v for k, v in arrays.items() if k != "response_1"}),
          "cases.jsonl:1", 'has no array "response_1"')
    fails(hista_dir(tmp_path / "d", npz={**arrays, "prompt": arrays["prompt"][:, :3]}),
          "cases.jsonl:1", '"response_0" must be T x 3')


def pacs(**change) -> dict:
    c = first("pacs/pacs.jsonl")
    c.update(change)
    return c


@pytest.mark.parametrize("change, drop, needles", [
    ({}, "beta", ['has no field "beta"']),
    ({"beta": "1"}, None, ['"beta" must be a finite number', 'got "1"']),
    ({"rewards": [0.0, 1.0]}, None, ['"rewards" must be a list of 4 rewards', "got 2 items"]),
    ({"rewards": [0.0, 1.0, 2.0, 0.0]}, None, ['"rewards[2]" must be 0.0 or 1.0', "got 2.0"]),
    ({"log_ratio_sum": [1.0]}, None, ['"log_ratio_sum" must be a list of at least 2']),
    ({"use_weight": "yes"}, None, ['"use_weight" must be true or false']),
    ({"expected": {"psi": [0.0], "loss": 1.0, "grad_log_ratio_sum": [0.0] * 4}}, None, ['"expected.psi"']),
    ({"expected": {"psi": [0.0] * 4, "grad_log_ratio_sum": [0.0] * 4}}, None, ['"expected.loss"']),
])
def test_a_bad_pacs_field_names_the_file_line_and_field(tmp_path, change, drop, needles):
    bad = pacs(**{"id": "bad-case", **change})
    if drop:
        del bad[drop]
    assert len(bad["log_ratio_sum"]) == 4 or "log_ratio_sum" in change
    fails(write(tmp_path / "pacs" / "pacs.jsonl", pacs(), bad), "pacs.jsonl:2", *needles)


def test_good_cases_still_agree(tmp_path):
    write(tmp_path / "numca.jsonl", numca(), numca(id="second"))
    write(tmp_path / "pacs.jsonl", pacs())
    hista_dir(tmp_path)
    outcomes = run_dir(tmp_path)
    assert len(outcomes) == 5 and all(o.ok for o in outcomes), [(o.case_id, o.detail) for o in outcomes]
