"""The estimator contract, for every registered estimator (and the example plugin) under both protocols,
on a scripted build whose model is a tiny random Llama (real hidden states, real critics, in seconds):

- one finite value in [0, 1] per state;
- the same values on a second run (a fresh estimator object);
- held-out: flipping the state's own rollout's reward changes nothing (measured with estimate_all's
  own-outcome machinery: the estimator is rerun on the group with that reward flipped).
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from sveb import estimators as reg
from sveb.builds import load_build
from sveb.config import BuildConfig, SamplingConfig
from sveb.engines.scripted import ScriptedEngine
from sveb.estimators.base import Estimator
from sveb.evaluate import PROTOCOLS, estimate_all, hidden_provider
from sveb.pipeline import build
from test_critic import tiny_llama

torch.set_num_threads(1)

# the cheapest settings where an estimator trains (the contract does not depend on them)
CHEAP = {"ppo-1": {"epochs": "1", "batch": "32"}, "ppo-n": {"epochs": "1", "batch": "32"}, "pacs": {"epochs": "1"}}
# the example plugin's class, by import path (test_plugin_on_cpu.py installs it and goes through the CLI)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "sveb-example-plugin"))
EXTRA = ["sveb_example_plugin:GroupMedian"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("contract")
    src = tmp / "dapo.jsonl"
    src.write_text("\n".join(json.dumps({"prompt": f"What is {a} + {b}?", "solution": str(a + b)})
                             for a in range(1, 10) for b in range(1, 10)))
    model = tiny_llama(tmp / "llama")
    root = tmp / "root"
    for split, seed in (("train", 4), ("test", 3)):  # ppo-1 trains on the disjoint train split
        cfg = BuildConfig(domain="number", model=model, source=str(src), split=split, problems=3, oversample=3,
                          rollouts=8, states_per_problem=2, mc=4, mc_extra=4, min_acc=0.1, max_acc=0.9, seed=seed,
                          min_novel_numbers=0, sampling=SamplingConfig(max_tokens=120), engine="scripted")
        bdir = build(cfg, root, engine=ScriptedEngine())
    return load_build(bdir)


def run(name: str, protocol: str, data, params=None):
    est = reg.make(name, params if params is not None else CHEAP.get(name, {}))
    est.prepare(data, None)
    return estimate_all(est, data, protocol, hidden_provider(est, data), own=protocol == "held-out")


def everything() -> list[str]:
    return [*reg.names(), *EXTRA]


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


def test_the_flip_check_catches_an_estimator_that_reads_its_own_outcome(data, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "leaky_mod", sys.modules[__name__])
    _, shift, _ = run("leaky_mod:Leaky", "held-out", data, {})
    assert np.all(shift == 1)


def test_every_builtin_is_covered():
    assert set(reg.names()) <= set(everything()) and len(reg.names()) >= 10
