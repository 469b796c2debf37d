"""The estimator contract, for every registered estimator (and the example plugin) under both protocols,
on a scripted build whose model is a tiny random Llama (real hidden states, real critics, in seconds):

- one finite value in [0, 1] per state;
- the same values on a second run (a fresh estimator object);
- held-out: flipping the state's own rollout's reward changes nothing (measured with estimate_all's
  own-outcome machinery: the estimator is rerun on the group with that reward flipped).
"""

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from sveb import estimators as reg
from sveb.estimators.base import Estimator, view_for
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import PROTOCOLS, estimate_all
from sveb.lm.hidden import hidden_provider
from sveb.store.builds import load_build

torch.set_num_threads(1)

# the cheapest settings where an estimator trains (the contract does not depend on them)
CHEAP = {"ppo-1": {"epochs": "1", "batch": "32"}, "ppo-n": {"epochs": "1", "batch": "32"}, "pacs": {"epochs": "1"}}
# the example plugin's class, by import path (test_plugin_on_cpu.py installs it and goes through the CLI)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "sveb-example-plugin"))
EXTRA = ["sveb_example_plugin:GroupMedian",  # and the Monte-Carlo forms a default run leaves out (issue 58.4)
         *(f"mcs-{f}-{k}" for f in ("eb", "cv") for k in (1, 2, 3, 4))]


@pytest.fixture(scope="module")
def data(tiny_llama_builds):
    return load_build(tiny_llama_builds[2])  # the test build; ppo-1 trains on the disjoint train build


def run(name: str, protocol: str, data, params=None):
    est = reg.make(name, params if params is not None else CHEAP.get(name, {}))
    data = view_for(est, data)  # as evaluate() hands it: no references, extra draws for a scale estimator alone
    prepare(est, data)  # as evaluate() does: the context built, the train build found
    return estimate_all(est, data, protocol, hidden_provider(est, data), own=protocol == "held-out")


def everything() -> list[str]:
    return [*reg.names(variants=True), *EXTRA]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", everything())
def test_contract(name, protocol, data):
    values, shift, _ = run(name, protocol, data)
    assert values.shape == (len(data.states),)
    assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()
    again, _, _ = run(name, protocol, data)
    np.testing.assert_array_equal(values, again)
    if protocol == "held-out":
        assert np.all(shift == 0), f"{name} moves by up to {shift.max():.3g} when its own outcome flips"


@dataclass
class Leaky(Estimator):
    """Reads the state's own outcome through group.rollout(): what the flip check must catch."""

    def estimate(self, group, states):
        return np.array([group.rollout(s.rollout_idx).reward for s in states])


def test_held_out_gives_no_own_outcome_to_read(data, monkeypatch):
    """Held-out by construction: the own rollout's reward is absent (NaN), so a leaky estimator gets nothing
    usable (its values break the contract) rather than a value the flip check must catch afterwards."""
    from sveb.core.errors import EvalError
    monkeypatch.setitem(sys.modules, "leaky_mod", sys.modules[__name__])
    with pytest.raises(EvalError, match="not finite"):
        run("leaky_mod:Leaky", "held-out", data, {})


def test_the_flip_check_catches_an_estimator_that_reads_its_own_outcome_in_group(data, monkeypatch):
    monkeypatch.setitem(sys.modules, "leaky_mod", sys.modules[__name__])
    est = reg.make("leaky_mod:Leaky", {})
    _, shift, _ = estimate_all(est, data.public(), "in-group", None, own=True)
    assert np.all(shift == 1)


@dataclass
class Peek(Estimator):
    """Records what it is given of the state's own rollout and of the build."""
    needs_hidden = True
    seen = []

    def prepare(self, build, console=None):
        Peek.seen.append(("references", len(build.references)))

    def estimate(self, group, states):
        for s in states:
            own = group.rollout(s.rollout_idx)
            Peek.seen.append((s.t, len(own.response_token_ids), own.response_text == s.prefix_text,
                              len(group.hidden(s.rollout_idx)),
                              s.rollout_idx in {r.rollout_idx for r in group.rollouts}))
        return np.full(len(states), 0.5)


def test_held_out_cuts_the_own_rollout_at_the_prefix_and_prepare_gets_no_references(data, monkeypatch):
    monkeypatch.setitem(sys.modules, "peek_mod", sys.modules[__name__])
    Peek.seen = []
    run("peek_mod:Peek", "held-out", data, {})
    assert Peek.seen[0] == ("references", 0) and len(data.references) == len(data.states)
    per_state = Peek.seen[1:]
    assert len(per_state) >= len(data.states)
    for t, n_tokens, text_is_prefix, n_hidden, member in per_state:
        assert (n_tokens, n_hidden, text_is_prefix, member) == (t, t, True, False)


def test_every_builtin_is_covered():
    assert set(reg.names()) <= set(everything()) and len(reg.names()) >= 10


@pytest.mark.parametrize("final_baseline", ["full", "truncated"])
def test_pacs_scores_only_what_its_states_read_and_values_them_the_same(data, monkeypatch, final_baseline):
    """pacs runs its scorer over each rollout only as far as its group's states read the log-ratios
    (pacs_loss.read_lengths); the values equal those from every rollout scored to its end (causal attention: a
    prefix's log-probabilities do not depend on what follows; float rounding follows the batch's shape)."""
    from sveb.estimators import pacs as pacs_mod
    from sveb.estimators import pacs_loss
    params = {**CHEAP["pacs"], "final_baseline": final_baseline}
    pacs_mod._SCORED.clear()
    short, _, _ = run("pacs", "held-out", data, params)
    pacs_mod._SCORED.clear()
    monkeypatch.setattr(pacs_mod, "read_lengths", lambda lengths, states, fb="full": dict(lengths))
    full, _, _ = run("pacs", "held-out", data, params)
    pacs_mod._SCORED.clear()
    np.testing.assert_allclose(short, full, rtol=0, atol=1e-4)  # bf16 bodies where the CPU picks them: 4e-6 seen
    lengths = {(pid, r["rollout_idx"]): len(r["response_token_ids"])
               for pid, rows in data.rollouts.items() for r in rows}
    read = {}
    for pid, rows in data.rollouts.items():
        got = pacs_loss.read_lengths({r["rollout_idx"]: len(r["response_token_ids"]) for r in rows},
                                     [(s["rollout_idx"], s["t"]) for s in data.states if s["problem_id"] == pid])
        read.update({(pid, i): n for i, n in got.items()})
    assert sum(read.values()) < sum(lengths.values())  # the case saves something: it tests the short path


@pytest.fixture(scope="module")
def end_cut(tiny_llama_builds, tmp_path_factory):
    """The test build with its first state moved to the end of its rollout (t = T): the paper's cut when a
    response has no space. In a copy of the builds' tables alone (no cache the other tests wrote), so nothing
    is read from a cache made at the old t."""
    import shutil
    tables = {"manifest.json", "candidates", "problems", "screens", "rollouts", "states", "references"}
    root = tiny_llama_builds[0]
    copy = tmp_path_factory.mktemp("end-cut") / "root"
    shutil.copytree(root, copy, ignore=lambda d, names: set(names) - tables if "manifest.json" in names else set())
    data = load_build(copy / tiny_llama_builds[2].relative_to(root))
    s = data.states[0]
    r = next(r for r in data.rollouts[s["problem_id"]] if r["rollout_idx"] == s["rollout_idx"])
    T = len(r["response_token_ids"])
    assert s["t"] < T
    data.states[0] = {**s, "t": T, "T": T, "prefix_text": r["response_text"]}
    return data


@pytest.mark.parametrize("name", everything())
def test_contract_at_a_cut_at_the_response_end(name, end_cut):
    """Every estimator values a state holding the whole response (ppo read past its values' end there once).
    Held-out alone: both protocols read a state's t through the same code, and this keeps `make test` short."""
    values, shift, _ = run(name, "held-out", end_cut)
    assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()
    assert np.all(shift == 0), f"{name} moves by up to {shift.max():.3g} when its own outcome flips"
