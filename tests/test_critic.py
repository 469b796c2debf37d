"""The PPO critic: GAE targets, the value read position, training, checkpoints and resume."""

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from sveb.estimators.ppo import gae_targets
from sveb.lm.critic import Critic, CriticConfig, latest_epoch, make_seq
from tests.helpers.tiny_llama import seqs_two_problems, tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny") / "llama")


def brute_gae(v, R, gamma, lam):
    T = len(v)
    vv = list(v) + [0.0]
    r = [0.0] * (T - 1) + [R]
    delta = [r[t] + gamma * vv[t + 1] - vv[t] for t in range(T)]
    return np.array([v[t] + sum((gamma * lam) ** i * delta[t + i] for i in range(T - t)) for t in range(T)])


def test_gae_hand_case():
    # deltas 0.3, -0.1, 0.6; A = 0.4, 0.2, 0.6 with gamma*lam = 0.5
    np.testing.assert_allclose(gae_targets(np.array([0.2, 0.5, 0.4]), 1.0, 1.0, 0.5), [0.6, 0.7, 1.0])
    np.testing.assert_allclose(gae_targets(np.array([0.3]), 0.0, 1.0, 0.95), [0.0])
    assert gae_targets(np.zeros(0), 1.0, 1.0, 1.0).shape == (0,)


@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (1.0, 0.95), (0.9, 0.7), (1.0, 0.0)])
def test_gae_matches_brute_force(gamma, lam):
    rng = np.random.default_rng(1)
    for T in (1, 2, 7, 30):
        v, R = rng.random(T), float(rng.integers(0, 2))
        np.testing.assert_allclose(gae_targets(v, R, gamma, lam), brute_gae(v, R, gamma, lam), atol=1e-12)
        if gamma == lam == 1.0:  # Monte Carlo: the final reward everywhere
            np.testing.assert_allclose(gae_targets(v, R, gamma, lam), np.full(T, R), atol=1e-12)
        if lam == 0.0:           # TD(0): r_t + gamma V(s_{t+1})
            np.testing.assert_allclose(gae_targets(v, R, gamma, lam), np.append(gamma * v[1:], R), atol=1e-12)


def test_zero_init_head_gives_zero_values(tiny):
    c = Critic(CriticConfig(model=tiny), tiny)
    seqs = seqs_two_problems(4)
    vals = c.values(seqs)
    assert all(np.all(vals[s.key] == 0.0) and len(vals[s.key]) == s.T for s in seqs)


@pytest.mark.parametrize("train_layers", [0, 1, 2])
def test_value_read_at_last_token_of_state(tiny, train_layers):
    """V(s_t) = head(hidden at position P-1+t) of a plain forward pass over prompt + response."""
    c = Critic(CriticConfig(model=tiny, train_layers=train_layers), tiny, dtype="float32")  # exact math: fp32
    torch.manual_seed(1)
    torch.nn.init.normal_(c.model.head.weight)
    c.model.head.bias.data.fill_(0.1)
    seqs = seqs_two_problems(5)  # different lengths: padded together in one batch
    got = c.values(seqs)
    lm = LlamaForCausalLM.from_pretrained(tiny).eval()
    for s in seqs:
        with torch.no_grad():
            h = lm.model(input_ids=torch.tensor([s.ids])).last_hidden_state[0]
            want = c.model.head(h).squeeze(-1)[s.prompt_len - 1: s.prompt_len - 1 + s.T].double().numpy()
        np.testing.assert_allclose(got[s.key], want, rtol=1e-4, atol=1e-5)


def test_through_end_adds_v_at_the_last_response_token(tiny):
    """A state holding the whole response (t = T) reads V(s_T) at the response's last token: the same values
    before it, one more at the end."""
    c = Critic(CriticConfig(model=tiny), tiny, dtype="float32")
    torch.manual_seed(2)
    torch.nn.init.normal_(c.model.head.weight)
    prompt, resp = [65, 66, 10], [97, 98, 99, 100]
    short, whole = make_seq(("s",), prompt, resp, 1.0), make_seq(("w",), prompt, resp, 1.0, through_end=True)
    assert (short.T, whole.T, len(whole.ids)) == (4, 5, 7)
    got = c.values([short, whole])
    lm = LlamaForCausalLM.from_pretrained(tiny).eval()
    with torch.no_grad():
        h = lm.model(input_ids=torch.tensor([prompt + resp])).last_hidden_state[0]
        want = c.model.head(h).squeeze(-1)[len(prompt) - 1:].double().numpy()
    np.testing.assert_allclose(got[("w",)], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[("s",)], want[:-1], rtol=1e-4, atol=1e-5)


def test_training_reduces_loss(tiny, tmp_path):
    losses = []
    c = Critic(CriticConfig(model=tiny, lr=3e-3, epochs=8, batch=4, train_layers=1), tiny)
    c.fit(seqs_two_problems(12), tmp_path, "k", on_epoch=lambda e, loss: losses.append(loss))
    assert len(losses) == 8 and losses[-1] < 0.5 * losses[0]
    vals = c.values(seqs_two_problems(12))
    a = np.mean([v.mean() for k, v in vals.items() if k[1] % 2 == 0])
    b = np.mean([v.mean() for k, v in vals.items() if k[1] % 2 == 1])
    assert a > b + 0.3


def _weights(c):
    return {k: v.clone() for k, v in c.model.trainable().state_dict().items()}


def test_checkpoint_resume_matches_uninterrupted_run(tiny, tmp_path):
    cfg = CriticConfig(model=tiny, lr=3e-3, epochs=3, batch=3, grad_accum=2, train_layers=1, seed=5)
    data = seqs_two_problems(12)
    full = Critic(cfg, tiny)
    ckpt_full = full.fit(data, tmp_path / "a", "k")
    assert latest_epoch(ckpt_full) == 3

    class Stop(Exception):
        pass

    def stop_after_1(epoch, loss):
        if epoch == 1:
            raise Stop

    with pytest.raises(Stop):
        Critic(cfg, tiny).fit(data, tmp_path / "b", "k", on_epoch=stop_after_1)
    seen = []
    again = Critic(cfg, tiny)
    ckpt = again.fit(data, tmp_path / "b", "k", on_epoch=lambda e, loss: seen.append(e))
    assert seen == [2, 3] and ckpt.name == ckpt_full.name
    w_full, w_again = _weights(full), _weights(again)
    assert all(torch.equal(w_full[k], w_again[k]) for k in w_full)
    assert not (ckpt / "epoch-2" / "optim.pt").exists() and (ckpt / "epoch-3" / "optim.pt").exists()
    # a finished checkpoint is reused: no epoch runs, same weights
    reused, seen = Critic(cfg, tiny), []
    reused.fit(data, tmp_path / "b", "k", on_epoch=lambda e, loss: seen.append(e))
    assert seen == [] and all(torch.equal(w_full[k], v) for k, v in _weights(reused).items())


def test_token_ids_outside_the_critic_vocab_are_an_error(tiny, tmp_path):
    c = Critic(CriticConfig(model=tiny), tiny)
    with pytest.raises(ValueError, match="vocab"):
        c.values([make_seq(("x", 0), [300, 1], [2, 3], 1.0)])


@pytest.mark.parametrize("flags, want", [({"avx2", "avx512f", "avx512_bf16"}, "bfloat16"), ({"avx2", "fma"}, "float32"),
                                         ({"avx2", "amx_bf16"}, "bfloat16")])
def test_a_cpu_critic_trains_in_bf16_only_where_the_cpu_has_it(monkeypatch, flags, want):
    """The critic's dtype is the one the hidden pass and vLLM pick (sveb.core.device.pick_dtype): bf16 where the
    CPU has it natively, fp32 where bf16 would be emulated; a GPU is always bf16."""
    from sveb.core import device
    from sveb.lm.value_model import default_dtype
    monkeypatch.setattr(device, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(device, "torch_device", lambda: "cpu")
    monkeypatch.delenv("SVEB_CPU_DTYPE", raising=False)  # .ci/run's forced rerun: the flags decide here
    assert default_dtype("cpu") == want and default_dtype("cuda") == "bfloat16"
