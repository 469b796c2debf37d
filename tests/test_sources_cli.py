"""`sveb ls sources`, `sveb ls problems`, --field mappings on files the tests write, the problems-stage
fingerprint, and `sveb report --by` on a scripted build read through --field."""

import csv
import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sveb import store
from sveb.cli import app
from sveb.core import schema
from sveb.core.config import BuildConfig, SamplingConfig, fingerprint
from sveb.data_builders.load import load_problems, registry, scan
from tests.helpers.real_data import BOTH, FILES, ROWS, folder


def ls(*args):
    r = CliRunner().invoke(app, ["ls", *args])
    return r.exit_code, r.output


def test_ls_sources_lists_every_source():
    code, out = ls("sources")  # CliRunner's terminal is 80 columns wide
    assert code == 0 and "…" not in out and max(len(ln.rstrip()) for ln in out.splitlines()) <= 80
    blocks, name = {}, None
    for ln in out.splitlines()[2:]:  # one block of lines per source, its name on the first
        if ln[:1].strip():
            name = ln.split()[0]
        if name:
            blocks[name] = blocks.get(name, "") + " " + ln.strip()
    blocks = {k: " ".join(v.split()) for k, v in blocks.items()}
    for name, src in registry().items():
        assert src.domain in blocks[name] and src.hub_id in blocks[name] and src.licence in blocks[name], blocks[name]
        assert blocks[name].startswith(f"{name} * " if src.paper else f"{name} {src.domain}")
    assert {"gsm8k", "math500", "humaneval", "mbpp", "arc-challenge", "mmlu-stem", "gpqa-diamond", "dapo-math",
            "openr1-math", "mot-science", "webinstruct", "verifiable-coding", "hista-json"} == set(registry())
    assert blocks["gsm8k"].startswith("gsm8k math (also fits number, science, general); licence: MIT hub: "
                                      "openai/gsm8k (main, test) --split test/train: own")


@BOTH
def test_ls_problems_text_on_real_gsm8k(kind):
    path = folder(kind) / FILES["gsm8k"]
    n = 1319 if kind == "full" else len(ROWS["gsm8k"])
    code, out = ls("problems", "--source", f"gsm8k={path}", "-n", "2")
    assert code == 0, out
    assert "domain: math" in out and f"rows read: {n}   loaded: {n} (test {n}, train 0; split: the dataset's own" in out
    assert "skipped: none" in out and f"first 2 of {n} problems in split test" in out  # all of GSM8K test
    assert "[2] A robe takes 2 bolts" in out and 'gold: 3 (math)   {"row": 2}' in out


@BOTH
def test_ls_problems_json_on_real_files(kind):
    data = folder(kind)
    code, out = ls("problems", "--source", f"mbpp={data / 'mbpp'}", "--json", "-n", "2", "--split", "all")
    assert code == 0, out
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 2
    for r in rows:
        assert set(r) == {"problem_id", "domain", "source", "question", "answer", "answer_type", "tests", "meta",
                          "split"}
        assert r["answer_type"] == "code" and r["domain"] == "programming"
        assert all(t["type"] == "assert" for t in r["tests"]) and len(r["tests"]) == 3
    assert [r["meta"]["task_id"] for r in rows] == [1, 2]
    arc = data / FILES["arc-challenge"]
    code, out = ls("problems", "--source", f"arc-challenge={arc}", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    n_test = 1172 if kind == "full" else len(ROWS["arc-challenge"])
    assert code == 0 and len(rows) == n_test  # all of ARC-Challenge test
    first = next(r for r in rows if r["meta"]["id"] == "Mercury_7175875")
    assert first["answer"] == "C" and first["meta"]["options"]["C"] == "Planetary days will become shorter."


def _csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


FIELD_ROWS = [["What is 2 + 3?", "5", "1", "easy"], ["How many sides does a hexagon have?", "6", "2", "shapes"],
              ["What is 1,000 + 1?", "1001", "3", "commas"], ["", "4", "1", ""], ["What is 2 + 3?", "5", "1", ""],
              ["Blank gold?", "", "2", ""]]


def test_field_mapping_on_a_csv(tmp_path):
    path = _csv(tmp_path / "mine.csv", ["Problem Text", "Final Answer", "Level", "Tag"], FIELD_ROWS)
    args = ["--source", str(path), "--domain", "math", "--field", "question=Problem Text",
            "--field", "answer=Final Answer", "--split", "all"]
    code, out = ls("problems", *args, "--json")
    assert code == 0, out
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["question"], r["answer"], r["answer_type"]) for r in rows] == [
        ("What is 2 + 3?", "5", "math"), ("How many sides does a hexagon have?", "6", "math"),
        ("What is 1,000 + 1?", "1001", "math")]
    assert all(r["source"] == str(path) for r in rows)
    assert [r["meta"] for r in rows] == [{"Level": "1", "Tag": "easy", "row": 1},
                                         {"Level": "2", "Tag": "shapes", "row": 2},
                                         {"Level": "3", "Tag": "commas", "row": 3}]
    code, out = ls("problems", *args)
    assert "rows read: 6   loaded: 3" in out
    assert "skipped: 1 empty Problem Text, 1 duplicate question, 1 empty Final Answer" in out
    # the general domain tells numbers from words
    _csv(tmp_path / "words.csv", ["q", "a"], [["Opposite of hot?", "cold"], ["Half of 10?", "5"]])
    got = scan("general", str(tmp_path / "words.csv"), (("answer", "a"), ("question", "q")))
    assert [(p["answer"], p["answer_type"]) for p in got.problems] == [("cold", "string"), ("5", "math")]


def test_field_options_and_tests(tmp_path):
    opts = json.dumps(["iron", "oxygen", "salt"])
    path = _csv(tmp_path / "mc.csv", ["stem", "opts", "gold"],
                [["Which is a gas?", opts, "1"], ["Which is a metal?", opts, "iron"], ["Which is food?", opts, "C"],
                 ["Which is none?", opts, "water"]])
    got = scan("science", str(path), (("answer", "gold"), ("options", "opts"), ("question", "stem")))
    assert [p["answer"] for p in got.problems] == ["B", "A", "C"]
    assert dict(got.skipped) == {"gold answer is not one of the options": 1}
    p = got.problems[0]
    assert p["question"] == "Which is a gas?\n(A) iron\n(B) oxygen\n(C) salt"
    assert json.loads(p["meta"])["options"] == {"A": "iron", "B": "oxygen", "C": "salt"}
    # ARC-style {text, label} with digit labels
    arc = tmp_path / "arc.jsonl"
    arc.write_text(json.dumps({"q": "Pick two.", "c": {"text": ["one", "two", "three"], "label": ["1", "2", "3"]},
                               "k": "2"}) + "\n")
    (p,) = scan("science", str(arc), (("answer", "k"), ("options", "c"), ("question", "q"))).problems
    assert p["answer"] == "B" and json.loads(p["meta"])["options"]["B"] == "two"
    # code: a list of assert strings per row, setup-free; --min-tests counts them
    code = tmp_path / "code.jsonl"
    code.write_text("".join(json.dumps(r) + "\n" for r in [
        {"task": "Write inc(x).", "tests": ["assert inc(1) == 2", "assert inc(-1) == 0"]},
        {"task": "Write dec(x).", "tests": json.dumps(["assert dec(1) == 0"])}]))
    got = scan("programming", str(code), (("question", "task"), ("tests", "tests")), min_tests=2)
    assert dict(got.skipped) == {"fewer than 2 test cases": 1}
    assert json.loads(got.problems[0]["tests"]) == [{"type": "assert", "code": "assert inc(1) == 2", "setup": ""},
                                                    {"type": "assert", "code": "assert inc(-1) == 0", "setup": ""}]


def test_bad_field_is_one_line_naming_file_and_column(tmp_path):
    path = _csv(tmp_path / "mine.csv", ["Problem Text", "Final Answer"], [["What is 1 + 1?", "2"]])
    code, out = ls("problems", "--source", str(path), "--domain", "math", "--field", "question=Problem Text",
                   "--field", "answer=Answer")
    assert code == 1
    assert out.count("\n") == 1 and out.startswith("error:")
    assert str(path) in out and "'Answer'" in out and "Problem Text, Final Answer" in out
    for bad, msg in ((["--field", "answer=Final Answer"], "--field question=COLUMN is required"),
                     (["--field", "quest=Problem Text"], "unknown key quest"),
                     (["--field", "question"], "expected KEY=COLUMN")):
        code, out = ls("problems", "--source", str(path), "--domain", "math", *bad)
        assert code == 1 and msg in out and out.count("\n") == 1, out
    r = CliRunner().invoke(app, ["build", "--source", str(path), "--field", "bogus=x", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "--field bogus=x: unknown key bogus" in r.output
    r = CliRunner().invoke(app, ["build", "--source", "gsm8k=/no/such/file.jsonl", "--root", str(tmp_path)])
    assert r.exit_code == 1 and "no such file or directory: /no/such/file.jsonl" in r.output


def test_worked_solution_gold_warns(tmp_path):
    rows = [[f"Sam has {i} pens and buys 2 more. How many now?", f"Sam has {i} + 2 = {i + 2} pens.\n#### {i + 2}"]
            for i in range(5)]
    path = _csv(tmp_path / "gsm_like.csv", ["question", "answer"], rows)
    code, out = ls("problems", "--source", str(path), "--domain", "math", "--field", "question=question",
                   "--field", "answer=answer")
    assert code == 0 and "5 of 5 gold answers look like worked solutions" in out
    warned = []
    load_problems("math", str(path), 3, 0, "test", (("answer", "answer"), ("question", "question")), warn=warned.append)
    assert len(warned) == 1 and "--field answer=COLUMN" in warned[0]


def test_formats_and_folders(tmp_path):
    rows = [{"q": f"What is {i} + 1?", "a": str(i + 1), "lvl": i % 3} for i in range(12)]
    d = tmp_path / "mixed"
    (d / "sub").mkdir(parents=True)
    with gzip.open(d / "part1.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows[:4]))
    pq.write_table(pa.Table.from_pylist(rows[4:8]), d / "sub" / "part2.parquet")
    (d / "part3.json").write_text(json.dumps(rows[8:10]))
    _csv(d / "part4.csv", ["q", "a", "lvl"], [[r["q"], r["a"], r["lvl"]] for r in rows[10:]])
    (d / "README.txt").write_text("not data")
    got = scan("math", str(d), (("answer", "a"), ("question", "q")))
    assert len(got.problems) == 12 and got.rows == 12
    assert {Path(p["source"]).name for p in got.problems} == {"part1.jsonl.gz", "part2.parquet", "part3.json",
                                                              "part4.csv"}
    from_parquet = [json.loads(p["meta"])["lvl"] for p in got.problems if p["source"].endswith("parquet")]
    assert from_parquet == [1, 2, 0, 1]  # ints stay ints (rows 4-7); a CSV cell is text
    assert {json.loads(p["meta"])["lvl"] for p in got.problems if p["source"].endswith("csv")} == {"1", "2"}


def test_problems_fingerprint_changes_only_when_the_new_knobs_are_set():
    from sveb.core import schema as sch
    from sveb.sample.pipeline import stage_fps
    cfg = BuildConfig()
    from sveb.data_builders.seeds import DRAW
    old_formula = fingerprint("problems", cfg.domain, cfg.source, cfg.split, cfg.problems * cfg.oversample, cfg.seed,
                              sch.SCHEMA_VERSION, DRAW)
    assert stage_fps(cfg)["problems"] == old_formula  # the knobs enter only when set (DRAW: the seeds' rule)
    fps = {stage_fps(c)["problems"] for c in (cfg, replace(cfg, min_tests=3), replace(cfg, min_tests=4),
                                              replace(cfg, fields=(("answer", "a"), ("question", "q"))))}
    assert len(fps) == 4


def test_a_local_source_counts_by_its_bytes_not_its_path(tmp_path, monkeypatch):
    """Two copies of one file at different places are one build (same fingerprints, so same draws); an edit is
    another build; builtin and hub sources keep their names."""
    from sveb.core import schema as sch
    from sveb.sample.pipeline import stage_fps
    from tests.helpers.sources import write_chain_source
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "deep").mkdir(parents=True)
    a = write_chain_source(tmp_path / "a" / "dapo.jsonl")
    b = write_chain_source(tmp_path / "b" / "deep" / "copy.jsonl")
    cfg = BuildConfig(domain="number", source=str(a))
    fps = stage_fps(cfg)
    assert stage_fps(replace(cfg, source=str(b))) == fps
    monkeypatch.chdir(tmp_path / "a")
    assert stage_fps(replace(cfg, source="dapo.jsonl")) == fps  # relative or absolute: one build
    assert stage_fps(replace(cfg, source=f"dapo-math={a}")) != fps  # another reader is another build
    b.write_text(b.read_text().replace("What is 1 + 1?", "What is 1 + 1 ?"))
    assert stage_fps(replace(cfg, source=str(b)))["problems"] != fps["problems"]
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "x.jsonl").write_bytes(a.read_bytes())
    one = stage_fps(replace(cfg, source=str(folder)))
    (folder / "y.jsonl").write_bytes(b"")
    assert stage_fps(replace(cfg, source=str(folder))) != one  # a folder counts every data file in it
    from sveb.data_builders.seeds import DRAW
    assert stage_fps(replace(cfg, source="hub"))["problems"] == fingerprint(
        "problems", "number", "hub", "test", cfg.problems * cfg.oversample, cfg.seed, sch.SCHEMA_VERSION, DRAW)


def test_report_by_level_on_a_field_source(tmp_path):
    from sveb.engines.scripted import ScriptedEngine
    from sveb.evaluate import evaluate
    from sveb.sample.pipeline import build
    src = _csv(tmp_path / "sums.csv", ["q", "a", "level"],
               [[f"What is {a} + {b}?", str(a + b), "easy" if a < 5 else "hard"] for a in range(1, 10)
                for b in range(1, 10)])
    cfg = BuildConfig(domain="number", model="scripted", source=str(src), fields=(("answer", "a"), ("question", "q")),
                      problems=6, oversample=3, rollouts=8, states_per_problem=2, mc=10, mc_extra=4, min_acc=0.1,
                      max_acc=0.9, seed=3, min_novel_numbers=0, sampling=SamplingConfig(max_tokens=200),
                      engine="scripted")
    root = tmp_path / "root"
    bdir = build(cfg, root, engine=ScriptedEngine())
    for name in ("grpo", "mcs-1"):
        evaluate(bdir, name, {}, "in-group")
    r = CliRunner().invoke(app, ["report", "--root", str(root), "--out", str(tmp_path / "rep"), "--by", "level"])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(tmp_path / "rep" / "by_level.csv", encoding="utf-8")))
    assert {(x["estimator"], x["value"]) for x in rows} <= {(e, v) for e in ("grpo", "mcs-1") for v in ("easy", "hard")}
    # recompute grpo's MAE per level from the stored tables
    problems = store.read_table(bdir / "problems", schema.PROBLEMS).to_pylist()
    level = {p["problem_id"]: json.loads(p["meta"])["level"] for p in problems}
    states = store.read_table(bdir / "states", schema.STATES).to_pylist()
    ref = {x["state_id"]: x["value"] for x in store.read_table(bdir / "references", schema.REFERENCES).to_pylist()}
    est = {x["state_id"]: x["value"] for x in store.read_table(bdir / "estimates", schema.ESTIMATES).to_pylist()
           if x["estimator"] == "grpo"}
    for x in (x for x in rows if x["estimator"] == "grpo"):
        errs = [abs(est[s["state_id"]] - ref[s["state_id"]]) for s in states if level[s["problem_id"]] == x["value"]]
        assert int(x["n_states"]) == len(errs) and float(x["mae"]) == pytest.approx(np.mean(errs), abs=1e-4)
    assert sum(int(x["n_states"]) for x in rows if x["estimator"] == "grpo") == len(states)
    md = (tmp_path / "rep" / "table.md").read_text(encoding="utf-8")
    assert "## MAE by level" in md and "| level | states / problems | grpo | mcs-1 |" in md
    r = CliRunner().invoke(app, ["report", "--root", str(root), "--out", str(tmp_path / "rep2"), "--by", "colour"])
    assert r.exit_code == 1 and "--by colour: no problem in these builds has 'colour'" in r.output


GPQA_HEADER = ["Record ID", "Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
               "Incorrect Answer 3", "Subdomain", "High-level domain"]


def test_gpqa_reader_on_its_csv_schema(tmp_path):
    rows = [[f"rec{i}", f"Which isotope is stable, case {i}?", f" right {i} ", f"wrong a{i}", f"wrong b{i}",
             f"wrong c{i}", "Physics (general)", "Physics"] for i in range(40)]
    rows.append(["recX", "No correct answer?", "", "a", "b", "c", "Chemistry", "Chemistry"])
    path = _csv(tmp_path / "gpqa_diamond.csv", GPQA_HEADER, rows)
    got = scan("science", f"gpqa-diamond={path}")
    assert len(got.problems) == 40 and dict(got.skipped) == {"empty Correct Answer": 1}
    for i, p in enumerate(got.problems):
        meta = json.loads(p["meta"])
        assert meta["options"][p["answer"]] == f"right {i}"  # stripped, and the gold letter points at it
        assert sorted(meta["options"].values()) == sorted([f"right {i}", f"wrong a{i}", f"wrong b{i}", f"wrong c{i}"])
        assert (meta["Record ID"], meta["Subdomain"]) == (f"rec{i}", "Physics (general)")
    letters = [p["answer"] for p in got.problems]
    assert set(letters) == {"A", "B", "C", "D"}  # shuffled, not always A
    assert letters == [p["answer"] for p in scan("science", f"gpqa-diamond={path}").problems]  # and reproducible


def test_paper_sources_by_name_and_hub(tmp_path, monkeypatch):
    """`--source dapo-math=PATH` reads like a bare path in the number domain; `hub` means the domain's paper
    dataset, loaded through the real datasets.load_dataset (here from a local dataset folder)."""
    from sveb.data_builders.load import default_domain, resolve
    rows = [{"prompt": f"What is {a} + 1?", "solution": str(a + 1)} for a in range(6)]
    path = tmp_path / "dapo.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    named, bare = scan("number", f"dapo-math={path}"), scan("number", str(path))
    assert [p["problem_id"] for p in named.problems] == [p["problem_id"] for p in bare.problems]
    assert json.loads(named.problems[0]["meta"])["dataset"] == "dapo-math"
    assert default_domain(f"dapo-math={path}") == "number" and default_domain(str(path)) is None
    assert default_domain("humaneval") == "programming" and resolve("hub", "science", ()).source.name == "mot-science"
    d = tmp_path / "hubcopy"
    (d / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), d / "data" / "train.parquet")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setitem(registry(), "dapo-math", replace(registry()["dapo-math"], hub_id=str(d), hub_config=None))
    got = scan("number", "hub")
    assert len(got.problems) == 6 and got.problems[0]["source"] == f"hub:{d}:default:train"
    assert [json.loads(p["meta"])["row"] for p in got.problems] == [1, 2, 3, 4, 5, 6]
