"""A builtin estimator is one file plus its registry entry: the places that once kept name lists (which estimators an
imported hista-json build refuses, `sveb ls estimators`, the registry's roles) read what the class declares. Three
builtin-like estimators are added here (a module in tmp_path, a monkeypatched registry, capabilities.json written as
`python -m sveb.estimators.capabilities` writes it) and each is handled by its capabilities, with no edit elsewhere."""

import json

import pytest
from typer.testing import CliRunner

import sveb.estimators.registry as registry
from sveb.cli import app
from sveb.estimators import capabilities
from sveb.store.export import ExportError, check_weights
from sveb.store.hista_io import import_hista_json

MODULE = '''
from dataclasses import dataclass
import numpy as np
from sveb.estimators.base import Estimator

@dataclass
class TextOnly(Estimator):
    """the share of correct rollouts in the group, read from text-level rewards"""
    def estimate(self, group, states):
        return np.full(len(states), float(np.mean(group.rewards)) if len(group.rewards) else 0.5)

@dataclass
class TokenCount(TextOnly):
    """a value read from the policy's token ids"""
    reads_tokens = True

@dataclass
class DrawMean(TextOnly):
    """a reference-scale row that reads the build's extra draws"""
    role = "scale"
    reads_references = True

@dataclass
class ModelRead(TextOnly):
    """a value a language model reads from the text (as a judge does)"""
    loads_model = True
    def estimate(self, group, states):
        raise RuntimeError("the board reran a model-reading estimator")
'''

NEW = {"toy-text-j": "TextOnly", "toy-tokens-j": "TokenCount", "toy-draws-j": "DrawMean", "toy-model-j": "ModelRead"}


@pytest.fixture
def toy_registry(tmp_path, monkeypatch):
    (tmp_path / "toy_estimators_j.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    added = tuple(registry.Entry(name, f"toy_estimators_j:{cls}") for name, cls in NEW.items())
    declared = registry.DECLARED
    monkeypatch.setattr(capabilities, "DECLARED", added)  # the regeneration step, on the new entries alone
    caps = {**capabilities.stored(), **capabilities.compute()}
    path = tmp_path / "capabilities.json"
    path.write_text(json.dumps(caps, indent=1))
    monkeypatch.setattr(registry, "DECLARED", declared + added)
    monkeypatch.setattr(registry, "CAPABILITIES_FILE", path)
    monkeypatch.setattr(registry, "BUILTIN", registry._builtin())
    return caps


def _hista_json(tmp_path):
    """Two records of the Hista authors' format: text only, no token ids, no draws."""
    def rec(problem, response, cut, reward, value):
        return {"problem": problem, "solution": "5", "verifier": "default", "correct_responses": [response],
                "wrong_responses": ["so \\boxed{6}.", "I guess \\boxed{7}."], "response": response,
                "sampled_response": response[:cut], "output_reward": reward, "unbiased_state_value": value,
                "unbiased_state_value_noise": []}
    records = [rec("What is 2 + 3?", "I add: 2 + 3 = 5, \\boxed{5}.", 6, 1.0, 0.6),
               rec("What is 2 + 3?", "I add: 2 + 3 = 5, so \\boxed{5}.", 12, 1.0, 0.8)]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(records))
    return import_hista_json(path, tmp_path / "imported")


def test_the_capabilities_are_read_from_the_class_and_written_to_the_json(toy_registry):
    assert toy_registry["toy_estimators_j:TokenCount"]["reads_tokens"] is True
    assert toy_registry["toy_estimators_j:TextOnly"]["reads_tokens"] is False
    assert toy_registry["toy_estimators_j:DrawMean"]["reads_references"] is True
    assert toy_registry["sveb.estimators.hista:Hista"]["reads_tokens"] is True  # derived: it needs hidden states
    assert toy_registry["sveb.estimators.ppo:PPO1"]["reads_tokens"] is True  # derived: it trains on them
    assert toy_registry["sveb.estimators.intrinsic:LogProb"]["reads_tokens"] is True  # declared
    assert toy_registry["sveb.estimators.numca:Numca"]["reads_tokens"] is False
    assert registry.role_of("toy-draws-j") == "scale" and "toy-text-j" in registry.names()


def test_an_imported_text_only_build_runs_or_refuses_each_by_its_capabilities(toy_registry, tmp_path):
    b = _hista_json(tmp_path)
    r = CliRunner().invoke(app, ["eval", "--build", str(b), "-e", "toy-text-j", "--protocol", "held-out"])
    assert r.exit_code == 0, r.output
    for name, why in (("toy-tokens-j", "it reads token ids"), ("toy-draws-j", "reference draws are unknown")):
        r = CliRunner().invoke(app, ["eval", "--build", str(b), "-e", name, "--protocol", "held-out"])
        out = " ".join(r.output.split())
        assert r.exit_code == 1 and f"{name}: unavailable for an imported hista-json build" in out, r.output
        assert why in out and "Traceback" not in out


def test_ls_estimators_shows_the_declared_flags(toy_registry):
    r = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["ls", "estimators"])
    assert r.exit_code == 0, r.output
    lines = {ln.split()[0]: ln for ln in r.output.splitlines() if ln.strip() and ln.split()[0] in NEW}
    assert set(lines) == set(NEW)
    assert "token ids" in lines["toy-tokens-j"] and "token ids" not in lines["toy-text-j"]
    assert "reads the build's extra draws" in lines["toy-draws-j"]
    assert "loads the model" in lines["toy-model-j"] and "loads the model" not in lines["toy-text-j"]


def test_the_board_reruns_a_builtin_by_its_capabilities(toy_registry, tmp_path):
    """A builtin's submitted values are recomputed by the board ("verified") unless it loads a model: a judge-like
    toy is taken as declared by its `loads_model` alone (its estimate, which raises, never runs)."""
    from sveb.board.check import provenance_check
    from sveb.estimators import make
    from sveb.estimators.base import view_for
    from sveb.evaluate.protocols import estimate_all
    from sveb.store.builds import load_build
    data = load_build(_hista_json(tmp_path))
    est = make("toy-text-j", {})
    got = estimate_all(est, view_for(est, data), "held-out", progress=False)[0]

    def meta(name):
        return {"estimator": {"name": name, "target": f"toy_estimators_j:{NEW[name]}", "params": {},
                              "provenance": {"kind": "builtin"}}}
    assert provenance_check(meta("toy-text-j"), {"held-out": (got, None)}, data) == "verified"
    assert provenance_check(meta("toy-text-j"), {"held-out": (got * 0.5, None)}, data) == "self-declared"
    assert provenance_check(meta("toy-model-j"), {"held-out": (got, None)}, data) == "self-declared"


def test_the_weights_check_names_no_estimator_list(tmp_path):
    b = _hista_json(tmp_path)
    from sveb import store
    with pytest.raises(ExportError, match=r"read token ids or hidden states or train on them .* unavailable"):
        check_weights(b, store.read_manifest(b))
