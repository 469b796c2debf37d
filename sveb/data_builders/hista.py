"""The Hista/Numca authors' input records (github.com/VOXXXX1874/Hista, data/<size>/sveb_<field>/train.json): a JSON
list of {problem, solution, verifier} (plus an optional id), read as the source `hista-json` (`--source
hista-json=PATH`). The same row mapping serves `sveb import --format hista-json` (sveb.store.hista_json).

Their `verifier` names the grader of their code (src/rl/utils/rewards.py): "default" is math-verify (their number
field, DAPO, and MATH), "general" / "general_all" an LLM judge (their math, science and general fields), "code" /
"code_*" test cases, the solution holding them as JSON. SVEB grades by rules, so a row's answer type is decided here:
code -> code (the JSON test cases, "code_humaneval" harnesses are not read), a single option letter the question
lists -> choice, default -> math, general -> math when the answer holds a digit or LaTeX, else string.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.boxed import choice_letter, option_letters
from sveb.data_builders.files import read_local
from sveb.data_builders.programming import read_test_case

# SVEB domain -> the authors' verifier for it (export: each Domain declares it); verifier -> domain where no
# --domain is given (import, build)
FIELDS = ("problem", "solution", "verifier")


def domain_of_verifier(verifier: str | None) -> str:
    v = (verifier or "default").lower()
    if v.startswith("code"):
        return "programming"
    return "general" if v.startswith("general") else "math"


def _tests(solution: str, strict: bool) -> list | None:
    try:
        cases = json.loads(solution)
        if not isinstance(cases, list) or not cases:
            raise SkipRow("code solution is not a JSON list of test cases")
        return [read_test_case(tc) for tc in cases]
    except (json.JSONDecodeError, SkipRow) as e:
        if strict:
            raise SkipRow(str(e) if isinstance(e, SkipRow) else "code solution is not valid JSON") from None
        return None


def fields(rec: dict, strict: bool = True) -> dict:
    """One record -> {question, answer, answer_type, tests, meta}. strict (a build source): a row SVEB cannot grade
    raises SkipRow; not strict (an import, graded by the authors already): the solution is kept whatever it is."""
    question, solution, verifier = rec.get("problem"), rec.get("solution"), rec.get("verifier")
    for key, v in (("problem", question), ("solution", solution)):
        if not isinstance(v, str) or (strict and not v.strip()):
            raise SkipRow(f"{key} is not a string" if not isinstance(v, str) else f"empty {key}")
    if verifier is not None and not isinstance(verifier, str):
        raise SkipRow("verifier is not a string")
    meta = {"verifier": verifier}
    if isinstance(rec.get("id"), (str, int)) and not isinstance(rec.get("id"), bool):
        meta["id"] = rec["id"]
    v = (verifier or "default").lower()
    if v.startswith("code"):
        if strict and v != "code":
            raise SkipRow(f"verifier {verifier} (an assert harness) is not read; only 'code' test cases are")
        tests = _tests(solution, strict)
        return {"question": question, "answer": "" if strict else solution, "answer_type": "code", "tests": tests,
                "meta": meta}
    letter = choice_letter(solution)
    if letter and letter in option_letters(question):
        kind, answer = "choice", letter
    elif v.startswith("general") and not re.search(r"[\d\\]", solution):
        kind, answer = "string", solution
    else:
        kind, answer = "math", solution
    return {"question": question, "answer": solution if not strict else answer.strip(), "answer_type": kind,
            "tests": None, "meta": meta}


def domain_of(path: Path) -> str | None:
    """The domain of the most common verifier in a file of records (None if it holds none)."""
    seen = Counter(domain_of_verifier(rec.get("verifier")) for _, _, rec in read_local(Path(path))
                   if isinstance(rec, dict) and isinstance(rec.get("verifier", ""), (str, type(None))))
    return seen.most_common(1)[0][0] if seen else None


SOURCE = Source(
    name="hista-json", domain="math", hub_id="", hub_config=None, hub_split="", licence="that of the records' dataset",
    read=fields, answer_types=frozenset(), columns=FIELDS, domain_of=domain_of,
    about="the Hista/Numca authors' records {problem, solution, verifier} (their data/<size>/sveb_<field>/"
          "train.json); local only: --source hista-json=PATH; domain from the verifier unless --domain: default -> "
          "math, general -> general, code -> programming")
