"""The five datasets of the paper, one per domain (what `--source hub` means). Their readers are the domain
modules' own `from_record`, written for these schemas (see sveb/data_builders/<domain>.py)."""

from __future__ import annotations

import importlib
import json

from sveb.data_builders.programming import MIN_TESTS
from sveb.sources import Source


def _reader(domain: str):
    def read(rec: dict) -> dict:
        p = importlib.import_module(f"sveb.data_builders.{domain}").from_record(rec)
        return {"question": p["question"], "answer": p["answer"], "answer_type": p["answer_type"],
                "tests": json.loads(p["tests"]) if p["tests"] else None, "meta": json.loads(p["meta"])}
    return read


def _paper(name, domain, hub_id, config, kinds, columns, licence, about, min_tests=1) -> Source:
    return Source(name=name, domain=domain, hub_id=hub_id, hub_config=config, hub_split="train", licence=licence,
                  read=_reader(domain), answer_types=frozenset(kinds), columns=columns, min_tests=min_tests,
                  about=about, paper=True)


SOURCES = [
    _paper("dapo-math", "number", "open-r1/DAPO-Math-17k-Processed", "en", {"math"}, ("prompt", "solution"),
           "Apache-2.0 (DAPO-Math-17k)", "prompt, solution (the final answer)"),
    _paper("openr1-math", "math", "open-r1/OpenR1-Math-220k", "default", {"math"}, ("problem", "answer", "uuid"),
           "Apache-2.0", "problem, answer, problem_type, question_type, source, uuid"),
    _paper("mot-science", "science", "open-r1/Mixture-of-Thoughts", "science", {"choice", "math"}, ("messages",),
           "see the dataset card", "messages; gold = last \\boxed{} of the assistant turn"),
    _paper("webinstruct", "general", "TIGER-Lab/WebInstruct-verified", None, {"math", "choice", "string"},
           ("question", "answer", "answer_type"), "see the dataset card",
           "question, answer, answer_type, category, difficulty"),
    _paper("verifiable-coding", "programming", "open-r1/verifiable-coding-problems-python", None, {"code"},
           ("problem_statement", "verification_info"), "see the dataset card",
           "problem_statement, verification_info.test_cases; the paper keeps >= 6 tests", min_tests=MIN_TESTS),
]
