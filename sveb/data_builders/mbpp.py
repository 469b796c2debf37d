"""MBPP (Austin et al. 2021): `text` (`prompt` in the sanitized set), `code`, `task_id`, `test_list` (assert
strings), `test_setup_code` (`test_imports` in the sanitized set). The question shows the asserts, as in the
MBPP paper: they name the function and its arguments. One assert test per entry of test_list."""

from __future__ import annotations

from sveb.data_builders import SkipRow, Source
from sveb.data_builders.rows import assert_test, text


def read(rec: dict) -> dict:
    task = text(rec, "text" if "text" in rec else "prompt")
    tests = rec.get("test_list")
    if not isinstance(tests, (list, tuple)) or not tests:
        raise SkipRow("test_list is not a non-empty list")
    imports = rec.get("test_imports") or []
    setup = "\n".join([*(imports if isinstance(imports, (list, tuple)) else [imports]),
                       rec.get("test_setup_code") or ""]).strip()
    question = task + "\nYour code should pass these tests:\n\n" + "\n".join(str(t).strip() for t in tests)
    meta = {"task_id": rec.get("task_id")}
    if isinstance(rec.get("code"), str):
        meta["reference_solution"] = rec["code"]
    return {"question": question, "answer": "", "answer_type": "code",
            "tests": [assert_test(t, setup) for t in tests], "meta": meta}


def row_split(rec: dict) -> str | None:
    """MBPP's own split by task id (the paper's: 1-10 few-shot prompts, 11-510 test, 511-600 validation,
    601-974 train); the sanitized set's ids keep these ranges."""
    tid = rec.get("task_id")
    if not isinstance(tid, int) or isinstance(tid, bool):
        return None
    return "test" if 11 <= tid <= 510 else "train" if 601 <= tid <= 974 else "validation" if 511 <= tid <= 600 \
        else "prompt" if 1 <= tid <= 10 else None


SOURCE = Source(
    name="mbpp", domain="programming", hub_id="google-research-datasets/mbpp", hub_config="full", hub_split="test",
    licence="CC BY 4.0", read=read, answer_types=frozenset({"code"}), columns=("code", "test_list"),
    own_splits=("test", "train"), row_split=row_split,
    about="mbpp.jsonl (974 rows, all splits by task_id: test 11-510, train 601-974): text, code, task_id, test_list, "
          "test_setup_code")
