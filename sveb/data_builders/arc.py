"""ARC-Challenge (Clark et al. 2018): `id`, `question`, `choices` {text: [...], label: [...]}, `answerKey`.
Labels may be letters or digits 1-4; options are relabelled A, B, ... by position. The original ARC
JSONL form (question = {stem, choices: [{text, label}]}) is read too."""

from __future__ import annotations

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.rows import choice_fields, scalars, text


def _choices(rec: dict) -> tuple[str, list, list]:
    q = rec.get("question")
    if isinstance(q, dict):  # original ARC: {"stem": ..., "choices": [{"text", "label"}]}
        stem, items = text(q, "stem"), q.get("choices")
        if not isinstance(items, list) or not all(isinstance(c, dict) for c in items):
            raise SkipRow("choices are not a list of {text, label}")
        return stem, [c.get("text") for c in items], [str(c.get("label")) for c in items]
    stem, ch = text(rec, "question"), rec.get("choices")
    if not isinstance(ch, dict) or not isinstance(ch.get("text"), list) or not isinstance(ch.get("label"), list):
        raise SkipRow("choices are not {text: [...], label: [...]}")
    if len(ch["text"]) != len(ch["label"]):
        raise SkipRow("choices have unequal numbers of texts and labels")
    return stem, ch["text"], [str(x) for x in ch["label"]]


def read(rec: dict) -> dict:
    stem, texts, labels = _choices(rec)
    key = rec.get("answerKey")
    if not isinstance(key, str) or key.strip() not in labels:
        raise SkipRow("answerKey not among the choice labels")
    meta = scalars(rec, ("id",))
    if any(not lab.isalpha() for lab in labels):
        meta["labels"] = labels  # the dataset's own labels, before relabelling A, B, ...
    return choice_fields(stem, texts, labels.index(key.strip()), meta)


SOURCE = Source(
    name="arc-challenge", domain="science", hub_id="allenai/ai2_arc", hub_config="ARC-Challenge", hub_split="test",
    licence="CC BY-SA 4.0", read=read, answer_types=frozenset({"choice"}), columns=("question", "choices", "answerKey"),
    own_splits=("test", "train"),
    about="test.jsonl (1172 rows; train 1119): id, question, choices {text, label}, answerKey")

