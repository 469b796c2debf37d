"""MATH-500 (the PRM800K test split of MATH, Lightman et al. 2023): `problem`, `answer`, `solution`, `subject`,
`level`, `unique_id`. Rows of the full MATH dataset (no `answer` column) take the last \\boxed{} of `solution`."""

from __future__ import annotations

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.boxed import last_boxed
from sveb.data_builders.rows import scalars, text


def read(rec: dict) -> dict:
    question = text(rec, "problem")
    if rec.get("answer") is None and isinstance(rec.get("solution"), str):
        gold = last_boxed(rec["solution"])
        if not gold:
            raise SkipRow("no answer and no \\boxed answer in the solution")
    else:
        gold = text(rec, "answer")
    meta = scalars(rec, ("subject", "level", "type", "unique_id", "solution"))
    return {"question": question, "answer": gold, "answer_type": "math", "meta": meta}


SOURCE = Source(
    name="math500", domain="math", hub_id="HuggingFaceH4/MATH-500", hub_config=None, hub_split="test",
    licence="MIT", read=read, columns=("problem", "solution"),
    about="test.jsonl (500 rows): problem, solution, answer, subject, level, unique_id")
