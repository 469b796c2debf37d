"""Domain modules: builtin generators (seeded, split, correct) and --source files in each dataset's real schema."""

import calendar
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sveb.core.errors import UsageError
from sveb.data_builders import SourceError, domain_module, split_of
from sveb.data_builders.boxed import LETTERS
from sveb.data_builders.load import load_problems

DOMAINS = ("math", "science", "general", "programming")
TYPES = {"math": {"math"}, "science": {"choice"}, "general": {"math", "string"}, "programming": {"code"}}


# ---------------------------------------------------------------- builtin

@pytest.mark.parametrize("domain", DOMAINS)
def test_builtin_seeded_split_distinct(domain):
    mod = domain_module(domain)
    train, test = mod.builtin(40, 0, "train"), mod.builtin(40, 0, "test")
    assert train == mod.builtin(40, 0, "train")
    assert [p["problem_id"] for p in train] != [p["problem_id"] for p in mod.builtin(40, 1, "train")]
    for split, ps in (("train", train), ("test", test)):
        assert len(ps) == 40 == len({p["problem_id"] for p in ps}) == len({p["question"] for p in ps})
        assert all(split_of(p["problem_id"]) == split for p in ps)
        for p in ps:
            assert p["domain"] == domain and p["source"] == "builtin" and p["answer_type"] in TYPES[domain]
            assert isinstance(json.loads(p["meta"])["level"], int)
    assert not {p["question"] for p in train} & {p["question"] for p in test}
    assert mod.builtin(0, 0, "train") == []
    five = load_problems(domain, "builtin", 5, 0, "test")
    assert five == (mod.builtin(5, 0, "test"), {})
    assert {p["problem_id"] for p in five[0]} <= {p["problem_id"] for p in test}


@pytest.mark.parametrize("domain", DOMAINS)
def test_builtin_prompts(domain):
    mod = domain_module(domain)
    marks = {"math": "\\boxed{", "string": "\\boxed{", "choice": "The answer is (X)", "code": "```python"}
    for p in mod.builtin(30, 0, "train") + mod.builtin(30, 0, "test"):
        msgs = mod.prompt(p)
        assert [m["role"] for m in msgs] == ["system", "user"] and msgs[1]["content"] == p["question"]
        assert marks[p["answer_type"]] in msgs[0]["content"]


def test_builtin_levels_all_used():
    for domain in DOMAINS:
        mod = domain_module(domain)
        used = {json.loads(p["meta"])["level"] for p in mod.builtin(150, 3, "train")}
        assert used == {lv for lv, w in mod.LEVELS.items() if w > 0}, domain


def test_builtin_math_gold_is_right():
    from sveb.rewards.math import math_reward
    ps = domain_module("math").builtin(80, 0, "train") + domain_module("math").builtin(80, 0, "test")
    assert {json.loads(p["meta"])["template"] for p in ps} == {
        "product", "difference", "x_plus", "x_minus", "half", "double", "product_plus"}
    for p in ps:
        q = p["question"]
        nums = [int(x) for x in re.findall(r"\d+", q)]
        if m := re.fullmatch(r"What is (\d+) × (\d+) \+ (\d+)\?|What is (\d+) \+ (\d+) × (\d+)\?", q):
            want = int(m[1]) * int(m[2]) + int(m[3]) if m[1] else int(m[5]) * int(m[6]) + int(m[4])
        elif re.fullmatch(r"(What is|Compute) \d+ × \d+[?.]|What is \d+ times \d+\?|Multiply \d+ by \d+\.|"
                          r"What is the product of \d+ and \d+\?", q):
            want = nums[0] * nums[1]
        elif re.fullmatch(r"(What is|Compute) \d+ - \d+[?.]|What is \d+ minus \d+\?", q):
            want = nums[0] - nums[1]
        elif re.fullmatch(r"Subtract \d+ from \d+\.", q):
            want = nums[1] - nums[0]
        elif re.fullmatch(r"If (x \+ \d+|\d+ \+ x) = \d+, what is x\?|Solve for x: x \+ \d+ = \d+\.", q):
            want = nums[1] - nums[0]
        elif re.fullmatch(r"If x - \d+ = \d+, what is x\?|Solve for x: x - \d+ = \d+\.|"
                          r"What number minus \d+ equals \d+\?", q):
            want = nums[1] + nums[0]
        elif re.fullmatch(r"What is (one )?half of \d+\?|What is \d+ divided by 2\?|"
                          r"If you split \d+ into two equal parts, how big is each\?", q):
            assert nums[0] % 2 == 0
            want = nums[0] // 2
        elif re.fullmatch(r"What is (double|twice) \d+\?|What is \d+ (times 2|doubled)\?", q):
            want = 2 * nums[0]
        else:
            raise AssertionError(q)
        assert want > 0 and p["answer"] == str(want), q
        assert math_reward(f"So the answer is \\boxed{{{want}}}.", p["answer"]) == 1.0
    with pytest.raises(UsageError, match="in this seed's slot"):  # a seed's slot holds ~70 a level: say so
        domain_module("math").builtin(600, 0, "train")


def test_builtin_science_gold_is_right():
    sci = domain_module("science")
    for classes in sci.CLASSES.values():  # no item belongs to two classes of one question
        items = [m for ms in classes.values() for m in ms]
        assert len(items) == len(set(items))
    facts = {stem: correct for stem, correct, _ in sci.FACTS}
    assert facts["Which planet is closest to the Sun?"] == "Mercury"
    assert facts["How many legs does a spider have?"] == "eight"
    ps = sci.builtin(200, 0, "train") + sci.builtin(200, 0, "test")
    assert Counter(len(p["question"].splitlines()) - 1 for p in ps).keys() == {2, 3, 4}
    for p in ps:
        stem, *lines = p["question"].splitlines()
        opts = [re.fullmatch(r"\(([A-J])\) (.+)", ln).groups() for ln in lines]
        assert [o[0] for o in opts] == list(LETTERS[:len(opts)]) and len({o[1] for o in opts}) == len(opts)
        truth = None
        for template, classes in sci.CLASSES.items():
            for cls, members in classes.items():
                if stem == template.format(cls):
                    truth = set(members)
        truth = truth or {facts[stem]}
        right = [letter for letter, text in opts if text in truth]
        assert right == [p["answer"]], p["question"]
        assert json.loads(p["meta"])["options"] == dict(opts)  # what the choice grader reads
    assert Counter(p["answer"] for p in ps if len(p["question"].splitlines()) == 5).keys() == set("ABCD")


def test_builtin_general_gold_is_right():
    gen = domain_module("general")
    assert gen.OPPOSITES["hot"] == "cold" and gen.PLURALS["mouse"] == "mice" and gen.PLURALS["child"] == "children"
    assert all(gen.OPPOSITES.get(b, a) == a for a, b in gen.OPPOSITES.items())  # symmetric where both listed
    days, months = list(calendar.day_name), list(calendar.month_name)[1:]
    ps = gen.builtin(200, 0, "train") + gen.builtin(200, 0, "test")
    assert {p["answer_type"] for p in ps} == {"math", "string"}
    units = {(small, big): f for big, small, f in gen.CONVERSIONS}
    letters = [chr(65 + i) for i in range(26)]
    for p in ps:
        q, a = p["question"], p["answer"]
        n = [int(x) for x in re.findall(r"\d+", q)]
        quoted = re.findall(r'"(\w+)"', q)
        if re.fullmatch(r'(What is the opposite of|Give the opposite of the word|Which word means the opposite of|'
                        r'Name the antonym of) "\w+".*', q):
            assert a == gen.OPPOSITES[quoted[0]] and a != quoted[0] and gen.OPPOSITES[a]
        elif m := re.fullmatch(r"Is (\d+) an (odd|even) number\? Answer yes or no\.", q):
            assert a == ("yes" if (int(m[1]) % 2 == 1) == (m[2] == "odd") else "no")
        elif m := re.fullmatch(r"Is (\d+) (greater|less) than (\d+)\? Answer yes or no\.", q):
            x, y = int(m[1]), int(m[3])
            assert a == ("yes" if (x > y if m[2] == "greater" else x < y) else "no")
        elif re.fullmatch(r"Is \d+ divisible by \d+\? Answer yes or no\.", q):
            assert a == ("yes" if n[0] % n[1] == 0 else "no")
        elif re.fullmatch(r"Is \d+ \+ \d+ equal to \d+\? Answer yes or no\.", q):
            assert a == ("yes" if n[0] + n[1] == n[2] else "no")
        elif m := re.fullmatch(r"How many (\w+) are in (\d+) (\w+)\?|(\d+) (\w+) is how many (\w+)\?|"
                               r"Convert (\d+) (\w+) to (\w+)\. Answer with a number\.", q):
            small, k, big = (m[1], m[2], m[3]) if m[1] else (m[6], m[4], m[5]) if m[4] else (m[9], m[7], m[8])
            assert a == str(int(k) * units[small, big])
        elif m := re.fullmatch(r"What day of the week (comes (after|before) (\w+)|is (\d) days (after|before) (\w+))\?",
                               q):
            rel, day, k = (m[2], m[3], 1) if m[2] else (m[5], m[6], int(m[4]))
            assert a == days[(days.index(day) + (k if rel == "after" else -k)) % 7]
        elif m := re.fullmatch(r"What month (comes (after|before) (\w+)|is (\d+) months (after|before) (\w+))\?", q):
            rel, month, k = (m[2], m[3], 1) if m[2] else (m[5], m[6], int(m[4]))
            assert a == months[(months.index(month) + (k if rel == "after" else -k)) % 12]
        elif m := re.fullmatch(r"What letter comes (after|before) ([A-Z]) in the alphabet\?", q):
            assert a == letters[letters.index(m[2]) + (1 if m[1] == "after" else -1)]
        elif re.fullmatch(r'(What is the plural of the word|Write the plural form of) "\w+"[?.]', q):
            assert a == gen.PLURALS[quoted[0]]
        elif re.fullmatch(r'(What is the past tense of the verb|Write the past tense of) "\w+"[?.]', q):
            assert a == gen.PAST[quoted[0]] and a != quoted[0]
        elif re.fullmatch(r'How many letters are in the word "\w+"\?', q):
            assert a == str(len(quoted[0]))
        elif re.fullmatch(r'How many vowels \(a, e, i, o, u\) are in the word "\w+"\?', q):
            assert a == str(sum(ch in "aeiou" for ch in quoted[0]))
        elif re.fullmatch(r'How many times does the letter "\w" appear in the word "\w+"\?', q):
            assert a == str(quoted[1].count(quoted[0])) and int(a) >= 2  # asked of repeated letters only
        else:
            raise AssertionError(q)
        assert p["answer_type"] == ("math" if a.isdigit() else "string"), q


HARNESS = r"""
import contextlib, io, json, sys
bad = []
for p in json.load(sys.stdin):
    for tc in p["tests"]:
        if tc["type"] == "function_call":
            ns = {}
            exec(p["ref"], ns)
            got, want = ns[tc["fn_name"]](*json.loads(tc["input"])), json.loads(tc["output"])
            ok = got == want and type(got) is type(want)
        else:
            sys.stdin, out = io.StringIO(tc["input"]), io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(p["ref"], {"__name__": "__main__"})
            got, ok = out.getvalue(), out.getvalue() == tc["output"]
        if not ok:
            bad.append([p["ref"], tc, repr(got)])
print(json.dumps(bad))
"""


def test_builtin_programming_reference_passes_its_tests():
    prog = domain_module("programming")
    ps = prog.builtin(60, 0, "train") + prog.builtin(60, 0, "test")
    jobs = []
    for p in ps:
        tests = json.loads(p["tests"])
        assert p["answer"] == "" and len(tests) >= 6
        assert len({t["input"] for t in tests}) == len(tests)
        assert all(set(t) == {"input", "output", "type", "fn_name"} for t in tests)
        kind = {t["type"] for t in tests}
        assert kind in ({"function_call"}, {"stdin_stdout"})
        if kind == {"function_call"}:
            assert all(isinstance(json.loads(t["input"]), list) for t in tests)
            assert f"`{tests[0]['fn_name']}(" in p["question"]
        else:
            assert tests[0]["output"].rstrip() in p["question"] and all(t["fn_name"] is None for t in tests)
        jobs.append({"ref": json.loads(p["meta"])["reference_solution"], "tests": tests})
    assert {json.loads(p["tests"])[0]["type"] for p in ps} == {"function_call", "stdin_stdout"}
    run = subprocess.run([sys.executable, "-c", HARNESS], input=json.dumps(jobs), capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []
    style = prog.prompt(ps[0])[0]["content"]
    assert ("function" in style) == (json.loads(ps[0]["tests"])[0]["type"] == "function_call")


# ---------------------------------------------------------------- --source files in the datasets' own schema
# Each row: (record, expected, goes into the Parquet file too). expected is (answer, answer_type) or a skip reason.

def _msgs(user, assistant):
    out = [{"role": "system", "content": "You are helpful."}]
    out += [{"role": "user", "content": user}] if user is not None else []
    out += [{"role": "assistant", "content": assistant}] if assistant is not None else []
    return out


MC_Q = "Which gas makes up most of the air?\nA: Oxygen\nB: Nitrogen\nC: Helium\nD: Argon"
TESTS_STDIN = [{"input": f"{i} {i}\n", "output": f"{2 * i}\n", "type": "stdin_stdout", "fn_name": None}
               for i in range(7)]
TESTS_FN = [{"input": json.dumps([i, 1]), "output": json.dumps(i + 1), "type": "function_call", "fn_name": "add"}
            for i in range(6)]

ROWS = {
    "math": [
        ({"problem": "Find $x$ if $2x=6$.", "answer": "3", "problem_type": "Algebra", "uuid": "u1"}, ("3", "math"), 1),
        ({"problem": "Compute $\\frac{1}{2}+\\frac{1}{4}$.", "answer": "\\frac{3}{4}"}, ("\\frac{3}{4}", "math"), 1),
        ({"problem": "  How many primes are below 10?  ", "answer": " 4 "}, ("4", "math"), 1),
        ({"problem": "An int answer: 6*7?", "answer": 42}, ("42", "math"), 0),
        ({"problem": "No answer here.", "answer": None}, "missing answer", 1),
        ({"problem": "Blank answer.", "answer": "   "}, "empty answer", 1),
        ({"problem": "", "answer": "5"}, "empty problem", 1),
        ({"answer": "5"}, "missing problem", 1),
        ({"problem": "A list answer?", "answer": ["1", "2"]}, "answer is not a string", 0),
        ({"problem": "Bool answer?", "answer": True}, "answer is not a string", 0),
        ({"problem": "bad \udc80 text", "answer": "1"}, "problem is not valid UTF-8", 0),
        ({"problem": "Find $x$ if $2x=6$.", "answer": "3"}, "duplicate question", 1),
    ],
    "science": [
        ({"messages": _msgs(MC_Q, "<think>air is 78% N2</think>\nThe answer is \\boxed{B}."), "source": "nemotron"},
         ("B", "choice"), 1),
        ({"messages": _msgs("Which is a noble gas?\n(A) O2\n(B) N2\n(C) Ne", "So \\boxed{\\text{C}}")},
         ("C", "choice"), 1),
        ({"messages": _msgs("What fraction of a half-life remains after 1 half-life?", "\\boxed{\\frac{1}{2}}")},
         ("\\frac{1}{2}", "math"), 1),
        ({"messages": json.dumps(_msgs("Speed of a 10 m in 2 s walk, in m/s?", "v = 10/2 = \\boxed{5}"))},
         ("5", "math"), 0),
        ({"messages": _msgs("Which is a vector quantity?\nA: mass\nB: speed", "\\boxed{F}")},
         "gold letter not among the options", 1),
        ({"messages": _msgs("Question without an answer?", "I am not sure.")},
         "no \\boxed answer in the assistant turn", 1),
        ({"messages": _msgs("Empty box?", "\\boxed{ }")}, "empty \\boxed answer", 1),
        ({"messages": _msgs("Truncated box?", "\\boxed{\\frac{1}{2}")}, "no \\boxed answer in the assistant turn", 1),
        ({"messages": _msgs(None, "\\boxed{4}")}, "no user turn", 1),
        ({"messages": _msgs("Nobody answered?", None)}, "no assistant turn", 1),
        ({"messages": _msgs("   ", "\\boxed{4}")}, "empty user turn", 1),
        ({"messages": None}, "missing messages", 1),
        ({"messages": "[not json"}, "messages is not valid JSON", 0),
        ({"messages": _msgs(MC_Q, "\\boxed{B}")}, "duplicate question", 1),
    ],
    "general": [
        ({"id": "w1", "question": "How many sides has a hexagon?", "answer": "6", "answer_type": "Integer",
          "category": "Mathematics", "difficulty": "Primary School"}, ("6", "math"), 1),
        ({"question": "Density of water in g/mL?", "answer": "1.0", "answer_type": "Float"}, ("1.0", "math"), 1),
        ({"question": "Pick the prime.\nA. 4\nB. 7\nC. 9", "answer": "B", "answer_type": "Multiple Choice"},
         ("B", "choice"), 1),
        ({"question": "Growth rate?\n(A) 10%\n(B) 20%\n(C) 40%", "answer": "(C) 40%", "answer_type": "Multiple Choice"},
         ("C", "choice"), 1),
        ({"question": "Which organelle makes ATP?", "answer": "mitochondria", "answer_type": "Multiple Choice"},
         ("mitochondria", "string"), 1),
        ({"question": "Is 9 prime?", "answer": "False", "answer_type": "Boolean"}, ("False", "string"), 1),
        ({"question": "Name the process plants use to make food.", "answer": "photosynthesis", "answer_type": "String"},
         ("photosynthesis", "string"), 1),
        ({"question": "Explain it.", "answer": "because", "answer_type": "Other"}, "unsupported answer_type Other", 1),
        ({"question": "Which one?", "answer": "D", "answer_type": "Multiple Choice"},
         "multiple-choice gold letter not among the question's options", 1),
        ({"question": "Missing answer?", "answer": None, "answer_type": "Integer"}, "missing answer", 1),
        ({"question": "", "answer": "1", "answer_type": "Integer"}, "empty question", 1),
        ({"question": "No type?", "answer": "1", "answer_type": None}, "missing answer_type", 1),
    ],
    "programming": [
        ({"problem_statement": "Read a and b, print a + b.",
          "gold_standard_solution": "```python\nprint(sum(map(int, input().split())))\n```",
          "verification_info": json.dumps({"language": "python", "test_cases": TESTS_STDIN}), "problem_id": "p1"},
         ("", "code"), 1),
        ({"problem_statement": "Write add(a, b).", "verification_info": {"language": "python", "test_cases": TESTS_FN}},
         ("", "code"), 0),
        ({"problem_statement": "Too few tests.", "verification_info": json.dumps({"test_cases": TESTS_STDIN[:5]})},
         "fewer than 6 test cases", 1),
        ({"problem_statement": "Tests are a dict.", "verification_info": json.dumps({"test_cases": {"input": "1"}})},
         "test cases are not a list", 1),
        ({"problem_statement": "Tests are a string.", "verification_info": json.dumps({"test_cases": "[]"})},
         "test cases are not a list", 1),
        ({"problem_statement": "Bad JSON.", "verification_info": "{\"test_cases\": ["},
         "verification_info is not valid JSON", 1),
        ({"problem_statement": "No info.", "verification_info": None}, "missing verification_info", 1),
        ({"problem_statement": "A bad case.", "verification_info": json.dumps({"test_cases": TESTS_STDIN + ["x"]})},
         "malformed test case", 1),
        ({"problem_statement": "C++ only.",
          "verification_info": json.dumps({"language": "cpp", "test_cases": TESTS_STDIN})},
         "not a Python problem", 1),
        ({"problem_statement": "  ", "verification_info": json.dumps({"test_cases": TESTS_STDIN})},
         "empty problem statement", 1),
    ],
}


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _write_parquet(path, rows):
    keys = sorted({k for r in rows for k in r})  # from_pylist takes its schema from the first row alone
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]), path)


def _load_both(domain, source):
    train, skipped = load_problems(domain, str(source), 1000, 0, "train")
    test, skipped2 = load_problems(domain, str(source), 1000, 0, "test")
    assert skipped == skipped2
    assert not {p["problem_id"] for p in train} & {p["problem_id"] for p in test}
    return train + test, skipped


def _question(domain, rec):
    if domain == "science":  # the question is the user turn inside the messages list
        msgs = json.loads(rec["messages"]) if isinstance(rec["messages"], str) else rec["messages"]
        return next(m["content"] for m in msgs if m["role"] == "user").strip()
    return rec[{"math": "problem", "general": "question", "programming": "problem_statement"}[domain]].strip()


def _check(domain, got, skipped, rows):
    want = {_question(domain, r): exp for r, exp in rows if not isinstance(exp, str)}
    assert {p["question"]: (p["answer"], p["answer_type"]) for p in got} == want
    assert skipped == dict(Counter(exp for _, exp in rows if isinstance(exp, str)))
    mod = domain_module(domain)
    for p in got:
        # the real file the row came from, not the domain's hub id
        assert p["domain"] == domain and Path(p["source"]).is_file() and p["source"] != mod.HUB_ID
        assert json.loads(p["meta"])["row"] >= 1
        assert [m["role"] for m in mod.prompt(p)] == ["system", "user"]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_source_file(domain, fmt, tmp_path):
    rows = [(r, exp) for r, exp, in_pq in ROWS[domain] if fmt == "jsonl" or in_pq]
    path = tmp_path / f"rows.{fmt}"
    (_write_jsonl if fmt == "jsonl" else _write_parquet)(path, [r for r, _ in rows])
    got, skipped = _load_both(domain, path)
    _check(domain, got, skipped, rows)


def test_source_meta_and_tests_kept(tmp_path):
    path = tmp_path / "rows.jsonl"
    for domain in DOMAINS:
        _write_jsonl(path, [r for r, exp, _ in ROWS[domain] if not isinstance(exp, str)])
        got = {p["question"]: p for p in _load_both(domain, path)[0]}
        metas = {q: {k: v for k, v in json.loads(p["meta"]).items() if k != "row"} for q, p in got.items()}
        if domain == "math":
            # `level` holds the stratum seeds are dealt within (the source's declared field, named by `stratum`)
            assert metas["Find $x$ if $2x=6$."] == {"problem_type": "Algebra", "uuid": "u1", "level": "Algebra",
                                                   "stratum": "problem_type"}
        if domain == "science":
            assert metas[MC_Q] == {"source": "nemotron", "level": "none"}  # no level field: one stratum
        if domain == "general":
            assert metas["How many sides has a hexagon?"] == {
                "id": "w1", "category": "Mathematics", "difficulty": "Primary School", "source_answer_type": "Integer",
                "level": "Primary School", "stratum": "difficulty"}
        if domain == "programming":
            p1, p2 = got["Read a and b, print a + b."], got["Write add(a, b)."]
            assert json.loads(p1["tests"]) == TESTS_STDIN and json.loads(p2["tests"]) == TESTS_FN
            assert metas[p1["question"]]["reference_solution"].startswith("```python")
            assert metas[p1["question"]]["source_id"] == "p1" and metas[p1["question"]]["n_tests"] == 7
            assert "function" in domain_module(domain).prompt(p2)[0]["content"]
            assert "standard input" in domain_module(domain).prompt(p1)[0]["content"]


def test_programming_parquet_with_struct_verification_info(tmp_path):
    # the hub may store verification_info as a struct column: rows arrive as dicts
    fn_decoded = [{**t, "input": json.loads(t["input"]), "output": json.loads(t["output"])} for t in TESTS_FN]

    def row(statement, tests):
        return {"problem_statement": statement, "verification_info": {"language": "python", "test_cases": tests}}
    rows = [row("Write add(a, b).", TESTS_FN), row("Sum a and b from stdin.", TESTS_STDIN),
            row("Too few.", TESTS_STDIN[:3])]
    _write_parquet(tmp_path / "rows.parquet", rows)
    got, skipped = _load_both("programming", tmp_path / "rows.parquet")
    assert skipped == {"fewer than 6 test cases": 1}
    assert {p["question"]: json.loads(p["tests"]) for p in got} == {
        "Write add(a, b).": TESTS_FN, "Sum a and b from stdin.": TESTS_STDIN}
    # function_call arguments already decoded by a loader are re-encoded as the JSON text the dataset uses
    _write_jsonl(tmp_path / "dec.jsonl", [row("Add.", fn_decoded)])
    (p,), _ = _load_both("programming", tmp_path / "dec.jsonl")
    assert json.loads(p["tests"]) == TESTS_FN


def test_source_directory_of_files(tmp_path):
    rows = ROWS["math"]
    in_jsonl = [(r, exp) for r, exp, _ in rows[:6]]
    in_parquet = [(r, exp) for r, exp, in_pq in rows[6:] if in_pq]
    in_json = [(rows[0][0], "duplicate question"), ({"problem": "Half of 8?", "answer": "4"}, ("4", "math"))]
    (tmp_path / "sub").mkdir()
    _write_jsonl(tmp_path / "a.jsonl", [r for r, _ in in_jsonl])
    _write_parquet(tmp_path / "sub" / "b.parquet", [r for r, _ in in_parquet])
    (tmp_path / "c.json").write_text(json.dumps([r for r, _ in in_json] + ["not a row"]))
    (tmp_path / "notes.txt").write_text("ignored: not a data file")
    got, skipped = _load_both("math", tmp_path)
    _check("math", got, skipped, in_jsonl + in_parquet + in_json + [({}, "row is not an object")])


def test_source_errors_name_the_file(tmp_path):
    with pytest.raises(SourceError, match="no such file"):
        load_problems("math", str(tmp_path / "missing.jsonl"), 5, 0, "train")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "1+1?", "answer": "2"}\n{"problem": oops}\n')
    got, skipped = _load_both("math", bad)
    assert len(got) == 1 and skipped == {"line is not valid JSON": 1}


def test_source_non_utf8_line_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"problem": "1+1?", "answer": "2"}\n{"problem": "2+2?", "answer": "4"}\n'
                     b'{"problem": "caf\xe9 price?", "answer": "3"}\n{"problem": "3+3?", "answer": "6"}\n')
    got, skipped = _load_both("math", path)
    assert len(got) == 3 and skipped == {"line is not valid UTF-8": 1}


def test_source_other_suffix_is_refused(tmp_path):
    path = tmp_path / "rows.txt"
    path.write_text("problem,answer\n1+1?,2\n")
    with pytest.raises(SourceError, match="rows.txt: not a data file"):
        load_problems("math", str(path), 5, 0, "train")


def test_hub_ids_are_the_papers():
    want = {"math": ("open-r1/OpenR1-Math-220k", "default"), "science": ("open-r1/Mixture-of-Thoughts", "science"),
            "general": ("TIGER-Lab/WebInstruct-verified", None),
            "programming": ("open-r1/verifiable-coding-problems-python", None)}
    for domain, (hub_id, config) in want.items():
        mod = domain_module(domain)
        assert (mod.HUB_ID, mod.HUB_CONFIG, mod.HUB_SPLIT) == (hub_id, config, "train")


def test_builtin_golds_grade_as_correct():
    rewards = pytest.importorskip("sveb.rewards")
    right = {"math": "\\boxed{{{}}}", "string": "So the answer is \\boxed{{{}}}.", "choice": "The answer is ({})."}
    for domain in ("math", "science", "general"):
        for p in domain_module(domain).builtin(25, 0, "test"):
            assert rewards.reward(right[p["answer_type"]].format(p["answer"]), p) == 1.0, p["question"]
            assert rewards.reward(right[p["answer_type"]].format("J" if p["answer_type"] == "choice" else "0"),
                                  p) == 0.0, p["question"]
    ps = domain_module("programming").builtin(20, 0, "test")
    for kind in ("function_call", "stdin_stdout"):  # one task of each style through the sandbox
        p = next(p for p in ps if json.loads(p["tests"])[0]["type"] == kind)
        ref = json.loads(p["meta"])["reference_solution"]
        assert rewards.reward(f"```python\n{ref}```", p) == 1.0, p["question"]
        assert rewards.reward("```python\nprint(0)\n```", p) == 0.0


def test_problem_identity_ignores_source_and_formatting():
    from sveb.data_builders import make_problem
    a = make_problem("math", "hub:open-r1/OpenR1-Math-220k", "What is  2+2?", "4", "math")
    b = make_problem("math", "/data/local.jsonl", "what is 2+2?\n", "4", "math")
    c = make_problem("number", "/data/local.jsonl", "What is 2+2?", "4", "math")
    assert a["problem_id"] == b["problem_id"]      # same question, other source and spacing
    assert a["problem_id"] != c["problem_id"]      # another domain is another problem
