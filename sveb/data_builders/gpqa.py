"""GPQA diamond (Rein et al. 2023; gated on the hub): `Question`, `Correct Answer`, `Incorrect Answer 1-3`,
`Record ID`, `Subdomain`, `High-level domain`. The four options are shuffled by a generator seeded with the
question itself, so the gold letter is fixed per question and spread over A-D."""

from __future__ import annotations

import random

from sveb.data_builders import Source
from sveb.data_builders.rows import choice_fields, scalars, text


def read(rec: dict) -> dict:
    stem = text(rec, "Question")
    options = [text(rec, "Correct Answer")] + [text(rec, f"Incorrect Answer {i}") for i in (1, 2, 3)]
    order = list(range(4))
    random.Random(f"gpqa:{stem}").shuffle(order)
    meta = scalars(rec, ("Record ID", "Subdomain", "High-level domain"))
    return choice_fields(stem, [options[i] for i in order], order.index(0), meta)


SOURCE = Source(
    name="gpqa-diamond", domain="science", hub_id="Idavidrein/gpqa", hub_config="gpqa_diamond", hub_split="train",
    licence="CC BY 4.0", read=read, answer_types=frozenset({"choice"}),
    columns=("Question", "Correct Answer", "Incorrect Answer 1"), stratum="High-level domain",
    about="gpqa_diamond.csv (198 rows): Question, Correct Answer, Incorrect Answer 1-3, Subdomain")
