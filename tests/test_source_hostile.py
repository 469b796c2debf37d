"""Hostile data files found by fuzzing `sveb ls problems --source`, `sveb import EXPORT` and `sveb import --format
hista-json`: a byte-order mark is read through, and a truncated or fake gzip, JSON nested too deeply, a number past
Python's 4300-digit limit or a float's range, a lone surrogate escape and a malformed export manifest are each one
`error:` line naming the file (exit 1, no traceback, nothing written), or for JSON Lines a counted skipped row."""

import gzip
import json

import pytest

from sveb.data_builders.load import scan
from tests.helpers.cli import cli, one_line_error

GSM = [{"question": f"Tom has {i} apples and buys one more. How many now?", "answer": f"He adds one.\n#### {i + 1}"}
       for i in range(6)]


def ls_problems(path, *args):
    return cli("ls", "problems", "--source", f"gsm8k={path}", "--split", "all", "--json", *args)


def loaded(r):
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.output.splitlines() if line.startswith("{")]


def csv_text(rows):
    return "question,answer\n" + "".join(f"\"{r['question']}\",\"{r['answer']}\"\n" for r in rows)


# ---- 1. a byte-order mark ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bom.csv", "bom.csv.gz", "bom.jsonl", "bom.jsonl.gz", "bom.json", "bom.json.gz"])
def test_a_byte_order_mark_is_read_through(tmp_path, name):
    text = csv_text(GSM) if ".csv" in name else (
        "".join(json.dumps(r) + "\n" for r in GSM) if ".jsonl" in name else json.dumps(GSM))
    data = b"\xef\xbb\xbf" + text.encode("utf-8")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    rows = loaded(ls_problems(path))
    assert len(rows) == len(GSM) and [r["answer"] for r in rows] == [str(i + 1) for i in range(len(GSM))]


def test_field_names_the_first_column_of_a_csv_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbfquestion,gold\r\nWhat is 2 + 3?,5\r\nWhat is 4 + 4?,8\r\n")
    got = scan("math", str(path), (("question", "question"), ("answer", "gold")))
    assert [(p["question"], p["answer"]) for p in got.problems] == [("What is 2 + 3?", "5"), ("What is 4 + 4?", "8")]
    assert not got.skipped


# ---- 2. a broken gzip -------------------------------------------------------------------------------------------

def _big(kind):
    rows = [{"question": f"What is {i} plus {i}? " + "pad " * 20, "answer": f"#### {2 * i}"} for i in range(300)]
    return (csv_text(rows) if kind == "csv" else json.dumps(rows)).encode()


@pytest.mark.parametrize("kind", ["json", "csv", "jsonl"])
def test_a_truncated_gzip_is_one_line_naming_the_file(tmp_path, kind):
    data = _big(kind) if kind != "jsonl" else b"".join(json.dumps(r).encode() + b"\n" for r in json.loads(_big("json")))
    path = tmp_path / f"trunc.{kind}.gz"
    path.write_bytes(gzip.compress(data)[:300])
    one_line_error(ls_problems(path), str(path), "not a complete gzip file")


@pytest.mark.parametrize("kind", ["json", "csv", "jsonl"])
def test_a_plain_file_named_gz_is_one_line_naming_the_file(tmp_path, kind):
    path = tmp_path / f"fake.{kind}.gz"
    path.write_bytes(_big("csv" if kind == "csv" else "json"))
    one_line_error(ls_problems(path), str(path), "not a gzip file")


def test_a_corrupt_gzip_is_one_line_naming_the_file(tmp_path):
    data = bytearray(gzip.compress(_big("json")))
    data[40:240] = bytes(200)
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(bytes(data))
    one_line_error(ls_problems(path), str(path), "gzip file")


# ---- 4. JSON edge cases through --source ------------------------------------------------------------------------

BIG_INT = "1" * 5000


@pytest.mark.parametrize("name, text, why", [
    ("big.json", '[{"question": "q", "answer": ' + BIG_INT + "}]", "a number with more than 4300 digits"),
    ("deep.json", "[" * 100000, "nested too deeply"),
    ("deep.json.gz", "[" * 100000, "nested too deeply"),
    ("data.json", '{"data": 5}', "expected a list of rows"),
])
def test_json_a_reader_cannot_take_is_one_line_naming_the_file(tmp_path, name, text, why):
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    one_line_error(ls_problems(path), str(path), why)


@pytest.mark.parametrize("bad, why", [
    ('{"question": "q", "answer": ' + BIG_INT + "}", "line is not valid JSON (a number with more than 4300 digits)"),
    ("[" * 100000, "line is not valid JSON (nested too deeply)"),
])
def test_a_jsonl_line_a_reader_cannot_take_is_a_counted_skip(tmp_path, bad, why):
    path = tmp_path / "rows.jsonl"
    path.write_text(bad + "\n" + "".join(json.dumps(r) + "\n" for r in GSM))
    got = scan("math", f"gsm8k={path}")
    assert len(got.problems) == len(GSM) and dict(got.skipped) == {why: 1}
    assert [json.loads(p["meta"])["row"] for p in got.problems] == list(range(2, len(GSM) + 2))


# ---- 3. an export's manifest on `sveb import` -------------------------------------------------------------------

@pytest.mark.parametrize("raw, why", [
    (b"\xef\xbb\xbf{}", "corrupt manifest"),
    (b"", "corrupt manifest"),
    (b"[]", "malformed manifest (a JSON list, expected an object)"),
    (b'{"export": "x"}', "malformed manifest (export is"),
    (b'{"export": {"tables": []}}', "no export table hashes"),
    (b'{"model": "m"}', "no export section"),
    (b'{"a": ' + BIG_INT.encode() + b"}", "corrupt manifest (a number with more than 4300 digits)"),
    (b"[" * 100000, "corrupt manifest (nested too deeply)"),
])
def test_import_of_an_export_with_a_bad_manifest_is_one_line_and_writes_nothing(tmp_path, raw, why):
    ex = tmp_path / "export"
    ex.mkdir()
    (ex / "manifest.json").write_bytes(raw)
    out = tmp_path / "new" / "build"
    text = one_line_error(cli("import", ex, "--out", out), f"{ex}/manifest.json", why)
    assert ".tmp-" not in text  # names the export, not the staging folder
    assert not out.exists() and list(out.parent.iterdir()) == []
    assert (ex / "manifest.json").read_bytes() == raw and [p.name for p in ex.iterdir()] == ["manifest.json"]


# ---- 4. JSON edge cases on `sveb import --format hista-json` -----------------------------------------------------

def record(**kw):
    response = "I add. 2 + 3 = 5. The answer is \\boxed{5}."
    r = {"problem": "What is 2 + 3?", "solution": "5", "verifier": "default", "correct_responses": [response],
         "wrong_responses": ["2 + 3 = 6. \\boxed{6}."], "response": response, "sampled_response": response[:10],
         "output_reward": 1.0, "unbiased_state_value": 0.65, "unbiased_state_value_noise": [0.1, 0.0]}
    return {**r, **kw}


GOOD = json.dumps([record(), record(problem="What is 1 + 1?", solution="2")])


def hista_import(tmp_path, raw):
    path = tmp_path / "records.json"
    path.write_bytes(raw)
    out = tmp_path / "new" / "build"
    return path, out, cli("import", "--format", "hista-json", path, "--out", out)


@pytest.mark.parametrize("raw, why", [
    (GOOD.replace('"output_reward": 1.0', '"output_reward": ' + BIG_INT, 1).encode(),
     "not a JSON file (a number with more than 4300 digits)"),
    (b"[" * 100000, "not a JSON file (nested too deeply)"),
    (GOOD.replace('"output_reward": 1.0', '"output_reward": 1' + "0" * 400, 1).encode(),
     "record 0: field 'output_reward': not a finite number"),
    (GOOD.replace('"unbiased_state_value_noise": [0.1', '"unbiased_state_value_noise": [1' + "0" * 400, 1).encode(),
     "record 0: field 'unbiased_state_value_noise'"),
    (GOOD.replace('"problem": "What is 1', '"problem": "\\ud800What is 1', 1).encode(),
     "record 1: field 'problem': not valid Unicode text"),
    (GOOD.replace('"wrong_responses": ["2', '"wrong_responses": ["\\udc002', 1).encode(),
     "record 0: field 'wrong_responses': not valid Unicode text"),
])
def test_hista_json_a_reader_cannot_take_is_one_line_and_writes_nothing(tmp_path, raw, why):
    path, out, r = hista_import(tmp_path, raw)
    text = one_line_error(r, str(path), why)
    assert len(text) < 300
    assert not out.exists() and not out.parent.exists()


def test_hista_json_with_a_byte_order_mark_imports(tmp_path):
    path, out, r = hista_import(tmp_path, b"\xef\xbb\xbf" + GOOD.encode())
    assert r.exit_code == 0, r.output
    assert (out / "manifest.json").exists()
