"""HumanEval (Chen et al. 2021): `prompt` (signature + docstring), `test` (a check(candidate) function of
asserts), `entry_point`, `canonical_solution`. One assert-style test runs check(entry_point); the number of
asserts inside check counts for --min-tests."""

from __future__ import annotations

from sveb.data_builders import Source
from sveb.data_builders.rows import count_asserts, text
from sveb.rewards.code import humaneval_tests


def read(rec: dict) -> dict:
    prompt, test, entry = text(rec, "prompt"), text(rec, "test"), text(rec, "entry_point")
    n = count_asserts(test, "check")
    raw_prompt = rec["prompt"]  # unstripped: the reference solution continues it
    question = ("Complete the following Python function. Write the whole function, with its imports.\n\n"
                f"```python\n{prompt}\n```")
    meta = {"task_id": rec.get("task_id"), "entry_point": entry, "code_prefix": raw_prompt, "n_asserts": n}
    if isinstance(rec.get("canonical_solution"), str):
        meta["reference_solution"] = raw_prompt + rec["canonical_solution"]
    return {"question": question, "answer": "", "answer_type": "code",
            "tests": humaneval_tests(rec["test"], entry, raw_prompt), "meta": meta}


SOURCE = Source(
    name="humaneval", domain="programming", hub_id="openai/openai_humaneval", hub_config=None, hub_split="test",
    licence="MIT", read=read, answer_types=frozenset({"code"}), columns=("prompt", "test", "entry_point"),
    about="HumanEval.jsonl.gz (164 rows): task_id, prompt, canonical_solution, test, entry_point")
