"""MMLU (Hendrycks et al. 2021), STEM subjects: `question`, `choices` (4 strings), `answer` (0-based int, or a
letter), the subject in `subject` (cais/mmlu, TIGER-Lab) or `type` (the Qwen2.5-Math evaluation file)."""

from __future__ import annotations

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.rows import choice_fields, gold_index, scalars, text


def read(rec: dict) -> dict:
    stem, choices = text(rec, "question"), rec.get("choices")
    if not isinstance(choices, (list, tuple)):
        raise SkipRow("choices are not a list")
    if "answer" not in rec or rec["answer"] is None:
        raise SkipRow("missing answer")
    meta = scalars(rec, ("subject", "type", "id"))
    if "subject" not in meta and isinstance(rec.get("type"), str):
        meta["subject"] = rec["type"]  # one key for the subject across MMLU copies
    return choice_fields(stem, list(choices), gold_index(rec["answer"], [], list(choices)), meta)


SOURCE = Source(
    name="mmlu-stem", domain="science", hub_id="TIGER-Lab/MMLU-STEM", hub_config=None, hub_split="test",
    licence="MIT", read=read, answer_types=frozenset({"choice"}), columns=("question", "choices", "answer"),
    stratum="subject",
    about="test.jsonl (3018 rows, Qwen2.5-Math's file): question, type (subject), choices, answer (0-3)")
