"""GSM8K (Cobbe et al. 2021): grade-school word problems. `answer` is a worked solution with <<a*b=c>>
calculator notes ending in `#### N`; the gold is N with its thousands commas removed."""

from __future__ import annotations

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.rows import text


def read(rec: dict) -> dict:
    question, solution = text(rec, "question"), text(rec, "answer")
    if "####" not in solution:
        raise SkipRow("no '#### answer' line in the solution")
    gold = solution.rsplit("####", 1)[1].strip().replace(",", "")
    if not gold:
        raise SkipRow("empty answer after ####")
    return {"question": question, "answer": gold, "answer_type": "math", "meta": {"solution": solution}}


SOURCE = Source(
    name="gsm8k", domain="math", hub_id="openai/gsm8k", hub_config="main", hub_split="test", licence="MIT",
    read=read, columns=("question", "answer"), own_splits=("test", "train"),
    about="test.jsonl (1319 rows; train.jsonl 7473): question, answer = worked solution ending '#### N'")
