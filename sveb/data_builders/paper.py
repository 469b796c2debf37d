"""The five datasets of the paper, one per domain (what `--source hub` means). Their hub id, config and split
and their readers are the domain modules' own (HUB_ID, HUB_CONFIG, HUB_SPLIT, `from_record`, written for these
schemas: see sveb/data_builders/<domain>.py); this module only registers them as named sources."""

from __future__ import annotations

import json

from sveb.data_builders import Source, domain_module
from sveb.data_builders.programming import MIN_TESTS


def _reader(mod):
    def read(rec: dict) -> dict:
        p = mod.from_record(rec)
        return {"question": p["question"], "answer": p["answer"], "answer_type": p["answer_type"],
                "tests": json.loads(p["tests"]) if p["tests"] else None, "meta": json.loads(p["meta"])}
    return read


def _paper(name, domain, kinds, columns, licence, about, min_tests=1, stratum="level") -> Source:
    mod = domain_module(domain)
    return Source(name=name, domain=domain, hub_id=mod.HUB_ID, hub_config=mod.HUB_CONFIG, hub_split=mod.HUB_SPLIT,
                  licence=licence, read=_reader(mod), answer_types=frozenset(kinds), columns=columns,
                  min_tests=min_tests, about=about, paper=True, stratum=stratum)


SOURCES = [
    _paper("dapo-math", "number", {"math"}, ("prompt", "solution"), "Apache-2.0 (DAPO-Math-17k)",
           "prompt, solution (the final answer)"),
    _paper("openr1-math", "math", {"math"}, ("problem", "answer", "uuid"), "Apache-2.0",
           "problem, answer, problem_type, question_type, source, uuid", stratum="problem_type"),
    _paper("mot-science", "science", {"choice", "math"}, ("messages",), "see the dataset card",
           "messages; gold = last \\boxed{} of the assistant turn"),
    _paper("webinstruct", "general", {"math", "choice", "string"}, ("question", "answer", "answer_type"),
           "see the dataset card", "question, answer, answer_type, category, difficulty", stratum="difficulty"),
    _paper("verifiable-coding", "programming", {"code"}, ("problem_statement", "verification_info"),
           "see the dataset card", "problem_statement, verification_info.test_cases; the paper keeps >= 6 tests",
           min_tests=MIN_TESTS),
]
