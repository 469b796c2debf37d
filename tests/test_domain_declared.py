"""Issue 33, item 4: a domain is one declared object; every list of domains derives from the declared ones, and
adding a domain is adding one module (a toy domain written into the package by this test)."""

import json
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import sveb.data_builders as db
from sveb.core.config import BuildConfig, SamplingConfig

TOY = '''"""A toy domain for the tests: sums of two digits, graded as math."""

import random

from sveb.data_builders import Domain, make_problem, sample_builtin

DOMAIN = Domain("toy", frozenset({"math"}), assumed_tokens=(11, 22), verifier="default", order=99)
HUB_ID, HUB_CONFIG, HUB_SPLIT = None, None, None


def builtin(n, seed, split, **kw):
    def make(level, rng):
        a, b = rng.randint(1, 9), rng.randint(1, 9 * level)
        return make_problem("toy", "builtin", f"What is {a} + {b}?", str(a + b), "math")
    return sample_builtin("toy", n, seed, split, {1: 1.0, 2: 1.0, 3: 1.0}, make, **kw)


def from_record(rec):
    return make_problem("toy", "local", rec["q"], rec["a"], "math")


def prompt(problem):
    return [{"role": "user", "content": problem["question"]}]
'''


def test_the_lists_derive_from_the_declared_domains():
    d = db.declared()
    assert db.DOMAINS == tuple(d) == ("number", "math", "science", "general", "programming")
    assert db.FITS == {n: set(x.answer_types) for n, x in d.items()}
    from sveb.sample.plan import assumed_lengths
    got = assumed_lengths("science", 10_000)
    assert (got.prompt, got.response) == d["science"].assumed_tokens
    assert assumed_lengths("science", 100).response == 100  # capped by the budget
    assert {n: x.verifier for n, x in d.items()}["programming"] == "code"


@pytest.fixture
def toy_domain():
    path = Path(db.__file__).with_name("toy.py")
    assert not path.exists()
    path.write_text(TOY)
    db.declared.cache_clear()
    try:
        yield path
    finally:
        path.unlink()
        sys.modules.pop("sveb.data_builders.toy", None)
        db.declared.cache_clear()


def test_a_toy_domain_is_one_module(toy_domain, tmp_path):
    from sveb import store
    from sveb.cli import app
    from sveb.core import schema
    from sveb.engines.scripted import ScriptedEngine
    from sveb.sample.pipeline import build
    assert db.DOMAINS[-1] == "toy" and db.FITS["toy"] == {"math"}
    r = CliRunner().invoke(app, ["ls", "domains"])
    assert r.exit_code == 0 and "toy" in r.output.split()
    r = CliRunner().invoke(app, ["plan", "--domains", "toy", "--json", "--problems", "10"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)  # the plan uses the toy's declared token assumption
    cfg = BuildConfig(domain="toy", model="smollm2-135m", source="builtin", problems=3, oversample=4, rollouts=8,
                      states_per_problem=2, mc=6, mc_extra=2, min_acc=0.0, max_acc=1.0, seed=1,
                      sampling=SamplingConfig(max_tokens=80), engine="scripted")
    bdir = build(cfg, tmp_path / "root", engine=ScriptedEngine(), console=Console(quiet=True))
    problems = store.read_table(bdir / "problems", schema.PROBLEMS).to_pylist()
    assert len(problems) == 3 and {p["domain"] for p in problems} == {"toy"}
    assert len(store.read_table(bdir / "states", schema.STATES)) == 6


def test_a_module_without_a_declaration_is_not_a_domain():
    assert "boxed" not in db.declared() and "load" not in db.declared()
    with pytest.raises(db.SourceError, match="unknown domain"):
        db.domain_module("boxed")


# Two toy domains whose rules differ from the defaults by their declarations alone (issue 61): no rule in sample/ or
# fields.py reads a domain's name.
RULES = {"toyrules": '''from sveb.data_builders import Domain

DOMAIN = Domain("toyrules", frozenset({"math", "string", "choice"}), assumed_tokens=(11, 22),
                paper_tiers=((0.0, 0.5), (0.5, 1.0)), novel_numbers=2)
HUB_ID, HUB_CONFIG, HUB_SPLIT = None, None, None
''', "toycode": '''from sveb.data_builders import Domain

DOMAIN = Domain("toycode", frozenset({"code"}), assumed_tokens=(11, 22))
HUB_ID, HUB_CONFIG, HUB_SPLIT = None, None, None
'''}


@pytest.fixture
def rule_domains():
    paths = [Path(db.__file__).with_name(f"{name}.py") for name in RULES]
    assert not any(p.exists() for p in paths)
    for path in paths:
        path.write_text(RULES[path.stem])
    db.declared.cache_clear()
    try:
        yield
    finally:
        for path in paths:
            path.unlink()
            sys.modules.pop(f"sveb.data_builders.{path.stem}", None)
        db.declared.cache_clear()


def test_a_domains_rules_are_its_declaration(rule_domains):
    from dataclasses import replace

    from sveb.data_builders.fields import check, reader
    from sveb.sample import paper
    from sveb.sample.rules import min_novel
    # the paper's screening tiers: the declared ones, in the preset and the fingerprint; the default elsewhere
    assert paper.tiers_for("toyrules") == ((0.0, 0.5), (0.5, 1.0)) and paper.tiers_for("toycode") == paper.TIERS
    assert {k: paper.preset_for("toyrules")[k] for k in ("min_acc", "max_acc")} == {"min_acc": 0.0, "max_acc": 1.0}
    cfg = BuildConfig(domain="toyrules", model="m", source="hub", protocol="paper")
    assert paper.fp_parts(cfg)[0]["tiers"] == [[0.0, 0.5], [0.5, 1.0]]
    # the novel-numbers filter: the declared count on a dataset source under auto, none where it is not declared
    auto = replace(cfg, protocol="sveb", min_novel_numbers=-1)
    assert min_novel(auto) == 2 and min_novel(replace(auto, source="builtin")) == 0
    assert min_novel(replace(auto, min_novel_numbers=3)) == 3
    assert min_novel(replace(auto, domain="toycode", min_novel_numbers=3)) == 0
    # --field: what a mapping needs and how an answer is graded follow the declared answer types
    read = reader((("answer", "a"), ("question", "q")), "toyrules")
    assert read({"q": "Capital of France?", "a": "Paris"})["answer_type"] == "string"
    assert read({"q": "2 + 3?", "a": "5"})["answer_type"] == "math"
    plain = reader((("answer", "a"), ("question", "q")), "math")
    assert plain({"q": "Capital of France?", "a": "Paris"})["answer_type"] == "math"
    check({"question": "q", "answer": "a", "options": "o"}, "toyrules")
    with pytest.raises(db.SourceError, match="need --domain science or general or toyrules \\(got --domain math\\)"):
        check({"question": "q", "answer": "a", "options": "o"}, "math")
    with pytest.raises(db.SourceError, match="--domain toycode: map the test cases"):
        check({"question": "q", "answer": "a"}, "toycode")
    with pytest.raises(db.SourceError, match="only --domain programming or toycode runs tests"):
        check({"question": "q", "tests": "t"}, "toyrules")
