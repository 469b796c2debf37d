"""--split on named datasets: their own test/train splits where they ship them, halves by id hash otherwise."""

import json

import pytest

from sveb.data_builders import SourceError, split_of
from sveb.data_builders.load import file_split, load_problems, registry, scan
from sveb.data_builders.look import source_rows
from tests.helpers.real_data import BOTH, FILES, ROWS, folder


def _gsm_rows(n, start=0):
    return [{"question": f"Q{start + i}: what is {i} + {start}?", "answer": f"work\n#### {i + start}"}
            for i in range(n)]


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows))


def test_file_split_reads_the_name():
    assert file_split("/x/gsm8k/test.jsonl", ("test", "train")) == "test"
    assert file_split("/x/train-00000-of-00001.parquet", ("test", "train")) == "train"
    assert file_split("/x/data.jsonl", ("test", "train")) is None
    assert file_split("/x/attestation.jsonl", ("test", "train")) is None  # a word containing 'test' is not one
    assert file_split("/x/train_test.jsonl", ("test", "train")) is None   # both: ambiguous


def test_a_folder_with_both_files_gives_each_split_its_own_rows(tmp_path):
    _write(tmp_path / "gsm" / "test.jsonl", _gsm_rows(7))
    _write(tmp_path / "gsm" / "train.jsonl", _gsm_rows(11, start=100))
    src = f"gsm8k={tmp_path / 'gsm'}"
    got = scan("math", src)
    assert (len(got.of_split("test")), len(got.of_split("train"))) == (7, 11)
    assert all(p["source"].endswith("test.jsonl") for p in got.of_split("test"))
    test, _ = load_problems("math", src, 100, 0, "test")
    train, _ = load_problems("math", src, 100, 0, "train")
    assert len(test) == 7 and len(train) == 11
    assert not {p["problem_id"] for p in test} & {p["problem_id"] for p in train}


def test_train_split_asked_of_a_test_file_is_a_clear_error(tmp_path):
    _write(tmp_path / "test.jsonl", _gsm_rows(5))
    with pytest.raises(SourceError, match="holds no train rows \\(only test\\)"):
        load_problems("math", f"gsm8k={tmp_path / 'test.jsonl'}", 10, 0, "train")


def test_a_file_naming_no_split_falls_back_to_the_hash_halves(tmp_path):
    rows = _gsm_rows(40)
    _write(tmp_path / "data.jsonl", rows)
    got = scan("math", f"gsm8k={tmp_path / 'data.jsonl'}")
    assert got.by_hash == 40 and "halves by id hash for 40 problems" in got.split_rule()
    assert {p["problem_id"] for p in got.of_split("test")} == {p["problem_id"] for p in got.problems
                                                               if split_of(p["problem_id"]) == "test"}


@BOTH
def test_mbpp_splits_by_task_id_on_the_real_file(kind):
    got = scan("programming", f"mbpp={folder(kind) / FILES['mbpp']}")

    def ids(split):
        return sorted(json.loads(p["meta"])["task_id"] for p in got.of_split(split))
    every = list(range(1, 975)) if kind == "full" else ROWS["mbpp"]  # MBPP's task ids are its row numbers
    assert ids("test") == [i for i in every if 11 <= i <= 510] and ids("train") == [i for i in every if i >= 601]
    assert ids("test") and ids("train")
    assert len(got.of_split("all")) == len(every)  # validation and few-shot prompts are in neither


def test_ls_sources_says_which_sources_halve_by_hash():
    rows = {name.removesuffix(" *"): block for name, block in source_rows()}
    for name, src in registry().items():
        assert ("own: test/train" in rows[name]) == bool(src.own_splits), rows[name]
    assert {n for n, s in registry().items() if s.own_splits} == {"gsm8k", "mbpp", "arc-challenge"}
    assert "halves by id hash" in rows["math500"]
