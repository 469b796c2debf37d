"""Named sources on the real public datasets: the excerpts in tests/fixtures/datasets by default (skips per reason,
hand-checked gold answers of 20 seeded random rows per dataset, MATH-500's own solutions through the math reward,
the assert tests built for HumanEval and MBPP against the datasets' own reference solutions), and the same checks
plus row counts on the full files in ../shared/datasets where they are present (skipped with one line otherwise)."""

import ast
import gzip
import json
import random
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from sveb.data_builders import SourceError, domain_module
from sveb.data_builders.boxed import option_letters
from sveb.data_builders.load import load_problems, registry, scan
from tests.helpers.real_data import BOTH, EXCERPTS, FILES, ROWS, folder, full_data

# name: (rows in the full file, problems loaded, skipped per reason, loaded in the test / train split: the dataset's
# own where it ships one, else the halves by id hash)
COUNTS = {
    "gsm8k": (1319, 1319, {}, 1319, 0),         # its own split: the file is the test set
    "math500": (500, 500, {}, 250, 250),
    "humaneval": (164, 164, {}, 77, 87),
    "mbpp": (974, 974, {}, 500, 374),           # own splits by task_id; the 4 repeated task texts stay distinct
    "arc-challenge": (1172, 1172, {}, 1172, 0),
    "mmlu-stem": (3018, 3006, {"duplicate question": 12}, 1505, 1501),  # 12 repeats: same question and options
}
EXCERPT_SKIPS = {"mmlu-stem": {"duplicate question": 1}}  # row 2212 repeats 2207


_CACHE: dict = {}


def load(name: str, data: Path = EXCERPTS):
    key = (name, data)
    if key not in _CACHE:
        _CACHE[key] = scan(registry()[name].domain, f"{name}={data / FILES[name]}")
    return _CACHE[key]


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_named_source_counts(name):
    full = full_data()
    rows, kept, skipped, n_test, n_train = COUNTS[name]
    got = load(name, full)
    assert (got.rows, len(got.problems), dict(got.skipped)) == (rows, kept, skipped)
    assert (len(got.of_split("test")), len(got.of_split("train"))) == (n_test, n_train)
    assert got.warnings == []
    src = registry()[name]
    for p in got.problems:
        assert p["source"] == str(full / FILES[name]) and p["domain"] == src.domain
        meta = json.loads(p["meta"])
        assert meta["dataset"] == name and 1 <= meta["row"] <= rows
    # what a build draws: the seeded shuffle of one split
    test, _ = load_problems(src.domain, f"{name}={full / FILES[name]}", 10, 0, "test")
    assert len(test) == 10 and all(got.split(p) == "test" for p in test)
    assert got.split_rule().startswith("the dataset's own" if src.own_splits else "halves by id hash")


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_excerpt_counts(name):
    got, rows = load(name), len(ROWS[name])
    assert rows <= 30  # an excerpt, not a copy
    skipped = EXCERPT_SKIPS.get(name, {})
    assert (got.rows, len(got.problems), dict(got.skipped)) == (rows, rows - sum(skipped.values()), skipped)
    n_test = len(got.of_split("test"))
    # (MBPP's own split leaves its validation and few-shot rows in neither half)
    assert n_test > 0 and n_test + len(got.of_split("train")) <= len(got.problems) and got.warnings == []
    assert len(got.of_split("all")) == len(got.problems)
    src = registry()[name]
    for p in got.problems:
        assert p["source"] == str(EXCERPTS / FILES[name]) and p["domain"] == src.domain
        meta = json.loads(p["meta"])
        assert meta["dataset"] == name and 1 <= meta["row"] <= rows
    test, _ = load_problems(src.domain, f"{name}={EXCERPTS / FILES[name]}", n_test, 0, "test")
    assert len(test) == n_test and all(got.split(p) == "test" for p in test)


def _lines(path: Path) -> list[bytes]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.splitlines(keepends=True)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_excerpts_are_rows_of_the_full_files(name):
    full = _lines(full_data() / FILES[name])
    assert _lines(EXCERPTS / FILES[name]) == [full[r - 1] for r in ROWS[name]]
    # and the problems read from them are the full file's (the full file's row number aside)
    by_pid = {p["problem_id"]: p for p in load(name, full_data()).problems}
    for p in load(name).problems:
        q = by_pid[p["problem_id"]]
        assert json.loads(q["meta"])["row"] == ROWS[name][json.loads(p["meta"])["row"] - 1]
        assert {k: v for k, v in p.items() if k not in ("source", "meta")} == \
            {k: v for k, v in q.items() if k not in ("source", "meta")}


def _by_row(name):
    """The excerpt's problems by their row in the full file (what the hand-checked tables below are keyed by)."""
    return {ROWS[name][json.loads(p["meta"])["row"] - 1]: p for p in load(name).problems}


def _sampled(name, expected):
    """The expectations below are for rows drawn with random.Random(11); check they still are."""
    n = COUNTS[name][0]
    assert sorted(random.Random(11).sample(range(1, n + 1), 20)) == sorted(expected)


# Gold answers written by hand from the rows' own text (the number after '####', commas dropped).
GSM8K = {186: "30", 193: "91", 291: "390", 379: "15", 382: "67", 389: "88", 622: "3000", 915: "3", 926: "2000",
         927: "1", 954: "452", 975: "5", 1041: "736", 1049: "7400", 1104: "90", 1147: "16", 1203: "19", 1258: "14",
         1290: "101", 1300: "13"}
GSM8K_COMMAS = {147: "2125", 202: "114200", 612: "1450000", 490: "-10", 1114: "-3"}  # picked, not sampled


def test_gsm8k_gold():
    _sampled("gsm8k", GSM8K)
    rows = _by_row("gsm8k")
    for row, gold in {**GSM8K, **GSM8K_COMMAS}.items():
        p = rows[row]
        assert (p["answer"], p["answer_type"]) == (gold, "math"), row
        assert "\n#### " in json.loads(p["meta"])["solution"]  # the worked solution is kept in meta


MATH500 = {49: "\\frac{3}{2}", 95: "80", 96: "-4", 98: "\\text{east}", 232: "10", 239: "-4", 244: "3",
           261: "120^\\circ", 263: "4", 287: "\\frac{17}{21}", 301: "12", 315: "(2,4)", 323: "-1", 400: "326.5",
           407: "0", 412: "60", 438: "3", 439: "4", 444: "45", 474: "7"}


def test_math500_gold_and_metadata():
    _sampled("math500", MATH500)
    rows = _by_row("math500")
    for row, gold in MATH500.items():
        assert (rows[row]["answer"], rows[row]["answer_type"]) == (gold, "math"), row
    meta = json.loads(rows[49]["meta"])
    assert {k: meta[k] for k in ("subject", "level", "unique_id")} == {
        "subject": "Algebra", "level": 2, "unique_id": "test/algebra/1265.json"}


# (gold letter, the gold option's text) written from the rows
ARC = {86: ("A", "24 hours"), 186: ("C", "Velocity remains positive but acceleration becomes negative."),
       193: ("A", "erosion of rocks"),
       291: ("D", "The evidence will be verified before the old hypothesis is revised."),
       323: ("A", "repeating the experiment three times"),
       379: ("C", "The frictional force exerted by the floor on the box"), 382: ("C", "sharp vision and hearing"),
       389: ("D", "repeat the same procedure."), 622: ("B", "a 50 mL graduated cylinder"), 812: ("A", "a table"),
       915: ("B", "21°C"), 926: ("C", "nucleus"), 927: ("A", "Fly"),
       928: ("A", "What will be done to recycle the batteries?"),
       954: ("A", "the continents were once joined together"),
       975: ("A", "Insulin stimulates cells to absorb glucose from the blood."),
       1041: ("B", "Animals release CO_2, required for photosynthesis."), 1049: ("B", "sound waves."),
       1104: ("A", "Both need energy."), 1147: ("D", "a dissecting microscope with 4X magnification")}


def _choice_checks(p, letter, text):
    meta = json.loads(p["meta"])
    assert (p["answer"], p["answer_type"]) == (letter, "choice")
    assert meta["options"][letter] == text
    assert option_letters(p["question"]) == set(meta["options"])  # every option is rendered "(X) text"
    assert f"\n({letter}) {text}" in p["question"]


def test_arc_gold():
    _sampled("arc-challenge", ARC)
    rows = _by_row("arc-challenge")
    for row, (letter, text) in ARC.items():
        _choice_checks(rows[row], letter, text)
    assert json.loads(rows[86]["meta"])["id"] == "MDSA_2009_8_2"
    # rows with 3 and 5 options (4 and 3 of them in the file)
    assert json.loads(rows[122]["meta"])["options"].keys() == {"A", "B", "C"}
    assert json.loads(rows[837]["meta"])["options"].keys() == {"A", "B", "C", "D", "E"}
    assert rows[837]["answer"] == "D"


# (letter of the int answer, start of the gold option's text)
MMLU = {372: ("D", "all of above."), 386: ("C", "most simple and least time consuming."),
        581: ("D", "A single gene can produce more than one trait"), 757: ("B", "False, False"),
        763: ("C", "underfitting"), 778: ("B", "they have high variance"), 1243: ("B", "abcd"),
        1830: ("A", "natural background radiation"), 1851: ("B", "becomes less ordered"),
        1853: ("B", "four times as strong"), 1908: ("B", "26"), 1949: ("A", "positive"),
        2081: ("C", "A positive charge moves in the direction of an ele"),
        2097: ("A", "The net force is in the negative direction"), 2207: ("A", "decreased by a factor of 9"),
        2293: ("A", "HA: μ1− μ2> 0"), 2406: ("D", "the teacher salaries are not negotiable"),
        2515: ("B", "$6,049"), 2580: ("C", "20"), 2841: ("B", "II only")}


def test_mmlu_gold():
    _sampled("mmlu-stem", MMLU)
    rows = _by_row("mmlu-stem")
    for row, (letter, start) in MMLU.items():
        p = rows[row]
        meta = json.loads(p["meta"])
        assert p["answer"] == letter and meta["options"][letter].startswith(start), row
        assert p["question"].splitlines()[-4:] == [f"({k}) {v}" for k, v in meta["options"].items()]
    assert {k: json.loads(rows[757]["meta"])[k] for k in ("type", "subject")} == {
        "type": "machine_learning", "subject": "machine_learning"}


# task_id -> (entry point, asserts inside check(), not counting `assert True`)
HUMANEVAL = {11: ("HumanEval/10", "make_palindrome", 5), 24: ("HumanEval/23", "strlen", 3),
             25: ("HumanEval/24", "largest_divisor", 5), 37: ("HumanEval/36", "fizz_buzz", 8),
             48: ("HumanEval/47", "median", 5), 49: ("HumanEval/48", "is_palindrome", 7),
             78: ("HumanEval/77", "iscube", 8), 115: ("HumanEval/114", "minSubArraySum", 12),
             116: ("HumanEval/115", "max_fill", 5), 120: ("HumanEval/119", "match_parens", 12),
             122: ("HumanEval/121", "solution", 7), 131: ("HumanEval/130", "tri", 10),
             132: ("HumanEval/131", "digits", 7), 138: ("HumanEval/137", "compare_one", 8),
             144: ("HumanEval/143", "words_in_sentence", 7), 151: ("HumanEval/150", "x_or_y", 10),
             153: ("HumanEval/152", "compare", 4), 158: ("HumanEval/157", "right_angle_triangle", 11),
             162: ("HumanEval/161", "solve", 8), 163: ("HumanEval/162", "string_to_md5", 4)}


def test_humaneval_tests():
    _sampled("humaneval", HUMANEVAL)
    rows = _by_row("humaneval")
    for row, (task, entry, n) in HUMANEVAL.items():
        p = rows[row]
        meta, tests = json.loads(p["meta"]), json.loads(p["tests"])
        assert (meta["task_id"], meta["entry_point"], meta["n_asserts"]) == (task, entry, n)
        assert len(tests) == 1 and tests[0]["type"] == "assert" and tests[0]["setup"] == ""
        assert tests[0]["code"].rstrip().endswith(f"check({entry})") and "def check(candidate)" in tests[0]["code"]
        assert f"def {entry}(" in meta["code_prefix"] and meta["code_prefix"].strip() in p["question"]
        assert p["answer_type"] == "code" and p["answer"] == ""
        assert "do not read input" in domain_module("programming").prompt(p)[0]["content"]


# task_id -> the function its three asserts call (MBPP's question shows them)
MBPP = {190: "count_Intgral_Points", 191: "check_monthnumber", 195: "first", 463: "max_subarray_product",
        464: "check_value", 477: "is_lower", 488: "area_pentagon", 521: "check_isosceles", 525: "parallel_lines",
        574: "surfacearea_cylinder", 602: "first_repeated_char", 629: "Split", 645: "find_k_product",
        800: "remove_all_spaces", 813: "string_length", 824: "remove_even", 876: "lcm", 878: "check_tuples",
        887: "is_odd", 947: "len_log"}


def test_mbpp_tests():
    _sampled("mbpp", MBPP)
    rows = _by_row("mbpp")
    for row, fn in MBPP.items():
        p = rows[row]
        meta, tests = json.loads(p["meta"]), json.loads(p["tests"])
        assert meta["task_id"] == row  # MBPP's task ids are its line numbers
        assert len(tests) == 3
        assert all(t["type"] == "assert" and re.match(rf"assert {fn} ?\(", t["code"]) for t in tests)
        assert all(t["code"].strip() in p["question"] for t in tests)
    # tuples stay tuples: the assert is Python source, not JSON
    assert json.loads(rows[2]["tests"])[0]["code"] == "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)"
    # the two tasks with test_setup_code carry it as setup of every test
    for row in (367, 927):
        tests = json.loads(rows[row]["tests"])
        assert all(t["setup"].startswith("root = Node(1)") for t in tests)


@BOTH
def test_math500_solutions_grade_correct_and_wrong_answers_zero(kind):
    data = folder(kind)
    from sveb.data_builders.boxed import last_boxed
    from sveb.rewards.math import math_reward
    rows = [json.loads(line) for line in open(data / FILES["math500"], encoding="utf-8")]
    right = [r["unique_id"] for r in rows if math_reward(r["solution"], r["answer"]) == 1.0]
    assert len(right) == len(rows) and len(rows) in (len(ROWS["math500"]), COUNTS["math500"][0])
    ints = [r for r in rows if r["answer"].lstrip("-").isdigit()]
    assert len(ints) > 0.4 * len(rows)  # 12 of the excerpt's 20, 200+ of the 500
    for r in ints:  # the solution, then a last box one off
        wrong = r["solution"] + f" On second thought, the answer is $\\boxed{{{int(r['answer']) + 1}}}$."
        assert last_boxed(wrong) == str(int(r["answer"]) + 1)
        assert math_reward(wrong, r["answer"]) == 0.0, r["unique_id"]
    assert math_reward("The answer is $\\boxed{-987654321}$.", rows[0]["answer"]) == 0.0


HARNESS = """
import json, sys
failed = []
for key, program in json.load(sys.stdin):
    try:
        exec(compile(program, key, "exec"), {"__name__": "__main__"})
    except BaseException as e:
        failed.append(key)
print(json.dumps(failed))
"""


def _run_assert_tests(problems, solution_of) -> list[str]:
    """Keys of the tests that fail: program = solution, then the test's setup, then its asserts
    (MBPP 367/927: the setup builds trees from the solution's own Node class)."""
    jobs = []
    for p in problems:
        meta = json.loads(p["meta"])
        for j, t in enumerate(json.loads(p["tests"])):
            jobs.append([f"{meta['task_id']}#{j}", f"{solution_of(meta)}\n{t['setup']}\n{t['code']}\n"])
    run = subprocess.run([sys.executable, "-c", HARNESS], input=json.dumps(jobs), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def _stub(meta: dict) -> str:
    """The reference solution's functions, each returning None: a wrong solution with the right names."""
    with warnings.catch_warnings():  # MBPP code has regexes in plain strings ('\.')
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = ast.parse(meta["reference_solution"])
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    return "".join(f"def {n}(*args, **kwargs):\n    return None\n" for n in names)


@BOTH
@pytest.mark.parametrize("name", ["humaneval", "mbpp"])
def test_reference_solutions_pass_the_built_tests(name, kind):
    data = folder(kind)
    problems = load(name, data).problems
    assert len(problems) in (len(ROWS[name]), COUNTS[name][1])
    assert _run_assert_tests(problems, lambda m: m["reference_solution"]) == []
    sample = random.Random(0).sample(problems, min(30, len(problems)))
    failed = _run_assert_tests(sample, _stub)
    assert len({k.split("#")[0] for k in failed}) == len(sample)  # functions returning None fail every task


def test_hub_unreachable_is_one_clear_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    # both libraries read their offline flags at import: set them too, or an unreachable hub is retried with
    # backoff for minutes instead of failing at once
    import datasets.config
    import huggingface_hub.constants
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    for name, src in registry().items():
        with pytest.raises(SourceError) as e:
            scan(src.domain, name)
        msg = str(e.value)
        assert "\n" not in msg and src.hub_id in msg and f"--source {name}=PATH" in msg, msg


def test_domain_override_and_misfit():
    data = EXCERPTS
    path = f"gsm8k={data / FILES['gsm8k']}"
    as_number = scan("number", path)
    assert len(as_number.problems) == len(ROWS["gsm8k"]) and {p["domain"] for p in as_number.problems} == {"number"}
    with pytest.raises(SourceError, match="--domain math does not fit --source arc-challenge.*science, general"):
        scan("math", f"arc-challenge={data / FILES['arc-challenge']}")
    with pytest.raises(SourceError, match="--domain programming does not fit"):
        scan("programming", path)


@BOTH
def test_min_tests(kind):
    data = folder(kind)
    he = f"humaneval={data / FILES['humaneval']}"
    rows = [json.loads(line) for line in gzip.open(data / FILES["humaneval"])]
    # an independent count: lines that start with `assert`, less the `assert True` ones
    fewer = sum(sum(ln.strip().startswith("assert") and not ln.strip().startswith("assert True")
                    for ln in r["test"].splitlines()) < 8 for r in rows)
    got = scan("programming", he, min_tests=8)
    assert 0 < fewer < len(rows) and len(rows) in (len(ROWS["humaneval"]), COUNTS["humaneval"][0])
    assert dict(got.skipped) == {"fewer than 8 test cases": fewer} and len(got.problems) == len(rows) - fewer
    assert all(json.loads(p["meta"])["n_asserts"] >= 8 for p in got.problems)
    n_mbpp = len((data / FILES["mbpp"]).read_text(encoding="utf-8").splitlines())
    with pytest.raises(SourceError, match=f"no usable programming rows.*{n_mbpp} fewer than 4 test cases"):
        scan("programming", f"mbpp={data / FILES['mbpp']}", min_tests=4)


def test_bare_file_in_another_schema_names_the_source_to_use():
    data, n = EXCERPTS, len(ROWS["gsm8k"])
    with pytest.raises(SourceError, match=rf"{n} missing prompt\); its columns look like gsm8k: try --source gsm8k="):
        scan("number", str(data / FILES["gsm8k"]))
    with pytest.raises(SourceError, match="its columns look like humaneval"):
        scan("programming", str(data / "humaneval"))


@pytest.mark.parametrize("name", ["humaneval", "mbpp"])
def test_loaded_code_problems_grade_their_reference_solutions(name):
    # the problems a build stores grade through the same reward() a build calls, in the sandbox
    from sveb.rewards import reward
    probs = random.Random(0).sample(load(name).problems, 12)
    for p in probs:
        meta = json.loads(p["meta"])
        ref = meta.get("reference_solution") or meta.get("code")
        assert ref, p["problem_id"]
        assert reward(f"Solution:\n```python\n{ref}\n```", p) == 1.0, meta.get("task_id")
        if name == "humaneval":  # a response that writes only the body continues the prompt
            body = ref[len(meta["code_prefix"]):]
            assert reward(f"```python\n{body}\n```", p) == 1.0, meta.get("task_id")
        stub = f"```python\n{ref}\n\n" + "\n".join(
            f"def {fn}(*a, **k):\n    return None" for fn in re.findall(r"^def (\w+)", ref, re.M)[-1:]) + "\n```"
        assert reward(stub, p) == 0.0, meta.get("task_id")
