"""The critics' frozen features from the shared hidden-state pass (sveb.lm.hidden.SharedFeatures) equal
what a critic's own frozen-body pass computes, and switching source drops the other source's cache."""

import numpy as np
import pytest
import torch

from sveb.core import device
from sveb.lm.critic import Critic, CriticConfig, make_seq
from sveb.lm.hidden import HiddenStates, SharedFeatures
from tests.helpers.tiny_llama import rollouts, tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-shared") / "llama", layers=4)


@pytest.mark.parametrize("train_layers", [1, 2])
def test_shared_pass_features_equal_the_critics_own(tiny, tmp_path, monkeypatch, train_layers):
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")  # compare like with like
    rows = {"p0": rollouts(), "p1": rollouts(3, seed=1)}
    shared = SharedFeatures(tiny, -(train_layers + 1))
    shared.add("fp", tmp_path / "build", rows)
    seqs = [make_seq(("fp", pid, r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], r["reward"])
            for pid in rows for r in rows[pid]]
    critic = Critic(CriticConfig(model=tiny, train_layers=train_layers), tiny, device="cpu")
    own = dict(zip([s.key for s in seqs], critic.features(seqs)))
    got = shared(seqs)
    assert set(got) == set(own)
    for k, f in own.items():
        assert got[k].shape == f.shape == (len(seqs[[s.key for s in seqs].index(k)].ids), 32)
        np.testing.assert_allclose(got[k].numpy(), f.numpy(), rtol=2e-3, atol=2e-3)  # float16 storage
    # the pass was stored once per problem and is read back, not recomputed
    assert len(list((tmp_path / "build" / "features").rglob("*.npz"))) == 2 * (1 + (train_layers != 2))
    # values through the shared features match the own pass's, and switching source clears the cache
    critic.model.head.bias.data.fill_(0.3)
    critic.model.head.weight.data.normal_(0, 0.1)
    v_own = critic.values(seqs)
    critic.use_features(shared)
    assert not critic._cache
    v_shared = critic.values(seqs)
    for k in v_own:
        np.testing.assert_allclose(v_shared[k], v_own[k], atol=5e-3)


def test_shared_features_store_the_default_critic_input_with_any_consumer(tiny, tmp_path, monkeypatch):
    """A hista-style consumer (last layer, response positions) pays the pass; the critics' default input
    layer is written in the same pass, so a later critic reads it without a second forward."""
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    rows = rollouts()
    hs = HiddenStates(tmp_path / "b", tiny)
    hs.group("p0", rows)
    calls = []
    real = HiddenStates._forward
    monkeypatch.setattr(HiddenStates, "_forward", lambda self, *a: calls.append(a) or real(self, *a))
    shared = SharedFeatures(tiny, -3)
    shared.add("fp", tmp_path / "b", {"p0": rows})
    seqs = [make_seq(("fp", "p0", r["rollout_idx"]), r["prompt_token_ids"], r["response_token_ids"], 0.0) for r in rows]
    out = shared(seqs)
    assert not calls and len(out) == len(rows)
