"""Any file, any columns: `--field question=COL --field answer=COL [--field options=COL] [--field tests=COL]
[--field id=COL]`. Unmapped scalar columns go into meta, so `sveb report --by COL` can use them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sveb.data_builders import SkipRow, SourceError, declared
from sveb.data_builders.boxed import require_text
from sveb.data_builders.rows import choice_fields, code_tests, gold_index

KEYS = ("question", "answer", "options", "tests", "id")
_NUMBER = re.compile(r"^[-+]?(\d+(,\d{3})*|\d*)(\.\d+)?(e[-+]?\d+)?%?$|^[-+]?\d+/\d+$", re.IGNORECASE)
META_MAX_CHARS = 200  # longer text columns (solutions, passages) stay out of meta


def parse(specs) -> tuple[tuple[str, str], ...]:
    """`key=column` strings -> sorted ((key, column), ...); a bad spec is a one-line error naming it."""
    out: dict[str, str] = {}
    for spec in specs:
        key, sep, col = str(spec).partition("=")
        key, col = key.strip(), col.strip()
        if not sep or not col:
            raise SourceError(f"--field {spec}: expected KEY=COLUMN, e.g. --field question=problem")
        if key not in KEYS:
            raise SourceError(f"--field {spec}: unknown key {key} (known: {', '.join(KEYS)})")
        if key in out:
            raise SourceError(f"--field {key} given twice")
        out[key] = col
    return tuple(sorted(out.items()))


def fits(domain: str) -> frozenset:
    """The answer types a domain declares (its Domain's `answer_types`; none for an unknown name)."""
    d = declared().get(domain)
    return d.answer_types if d is not None else frozenset()


def domains_fitting(kind: str) -> str:
    """The domains that declare an answer type, as an error names them ("--domain science or general")."""
    return "--domain " + " or ".join(n for n, d in declared().items() if kind in d.answer_types)


def check(fields: dict, domain: str) -> None:
    """What the mapping needs, by the answer types the domain declares (never its name)."""
    if "question" not in fields:
        raise SourceError("--field question=COLUMN is required with --field")
    if "code" in fits(domain):  # its problems are graded by running tests
        if "tests" not in fields:
            raise SourceError(f"--domain {domain}: map the test cases with --field tests=COLUMN")
    elif "tests" in fields:
        raise SourceError(f"--field tests: only {domains_fitting('code')} runs tests (got --domain {domain})")
    elif "answer" not in fields:
        raise SourceError("--field answer=COLUMN is required (the gold answer)")
    if "options" in fields and "choice" not in fits(domain):
        raise SourceError(f"--field options: multiple-choice problems need {domains_fitting('choice')} "
                          f"(got --domain {domain})")


def _options(value: Any) -> tuple[list, list]:
    """(texts, labels) from a list, a {label: text} dict, ARC's {text: [...], label: [...]}, or JSON of these."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise SkipRow("options are not a list (nor JSON of one)") from None
    if isinstance(value, dict) and isinstance(value.get("text"), list):
        return list(value["text"]), [str(x) for x in value.get("label") or []]
    if isinstance(value, dict):
        return list(value.values()), [str(k) for k in value]
    if isinstance(value, (list, tuple)):
        return list(value), []
    raise SkipRow("options are not a list")


def _answer_text(value: Any, col: str) -> str:
    if isinstance(value, bool):
        raise SkipRow(f"{col} is a boolean")
    if isinstance(value, (int, float)):
        return str(value)
    return require_text({col: value}, col)


def reader(fields: tuple, domain: str) -> Callable[[dict], dict]:
    f = dict(fields)
    check(f, domain)
    mapped = set(f.values())

    def read(rec: dict) -> dict:
        question = require_text(rec, f["question"])
        meta = {k: v for k, v in rec.items() if k not in mapped and isinstance(v, (str, int, float, bool))
                and not (isinstance(v, str) and len(v) > META_MAX_CHARS)}
        if "id" in f and isinstance(rec.get(f["id"]), (str, int)):
            meta[f["id"]] = rec[f["id"]]
        if "tests" in f:
            return {"question": question, "answer": "", "answer_type": "code", "tests": code_tests(rec.get(f["tests"])),
                    "meta": meta}
        if rec.get(f["answer"]) is None:
            raise SkipRow(f"missing {f['answer']}")
        if "options" in f:
            texts, labels = _options(rec.get(f["options"]))
            return choice_fields(question, texts, gold_index(rec[f["answer"]], labels, texts), meta)
        answer = _answer_text(rec[f["answer"]], f["answer"])
        # a domain that grades text answers takes a non-numeric one as text; any other grades it as math
        kind = "math" if "string" not in fits(domain) or _NUMBER.match(answer.replace(" ", "")) else "string"
        return {"question": question, "answer": answer, "answer_type": kind, "meta": meta}
    return read


def missing_columns(fields: tuple, row: dict) -> list[str]:
    return [col for _, col in fields if col not in row]
