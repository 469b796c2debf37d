"""The probe's features: hand cases for the pure functions, and tracks from the shared pass equal to what a
plain forward of the tiny random Llama gives (hidden state at the prefix's last token, next-token entropy)."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from sveb.core import device
from sveb.estimators.probe_features import Track, Tracks, lm_head_weight, loo_logit, pooled, scalars, state_row
from sveb.estimators.probe_features import read_positions as pf_read_positions
from sveb.lm.hidden import HiddenStates
from tests.helpers.tiny_llama import rollouts, tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-probe") / "llama", layers=3)


def test_pooling_scalars_and_loo_logit_by_hand():
    H = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.testing.assert_array_equal(pooled(H, 3, "last", 4), [6, 7])
    np.testing.assert_array_equal(pooled(H, 3, "mean", 2), [5, 6])     # rows 2, 3
    np.testing.assert_array_equal(pooled(H, 1, "mean", 8), [1, 2])     # rows 0, 1: the window stops at u = 0
    np.testing.assert_array_equal(pooled(H, 99, "last", 1), [10, 11])  # past the end: the last row
    np.testing.assert_allclose(scalars(np.array([1.0, 2, 3, 4]), 2, 2, 100), [3, 2.5, np.log(3), 0.02])
    assert loo_logit([1, 1, 0]) == pytest.approx(np.log(2.5 / 1.5))
    assert loo_logit([]) == 0.0 and np.isfinite(loo_logit([1, 1]))


def test_state_row_plain_and_relative():
    own = Track(np.array([[1.0, 0], [3, 1]]), np.array([0.5, 1.5]))
    others = [Track(np.array([[0.0, 0], [1, 1]]), np.array([1.0, 1.0])),
              Track(np.array([[2.0, 2]]), np.array([2.0]))]  # shorter: read at min(t, T_j)
    kw = dict(pool="last", window=1, max_tokens=10)
    h, s, o = state_row(own, 1, others, [1.0, 0.0], relative=False, **kw)
    np.testing.assert_array_equal(h, [3, 1])
    np.testing.assert_allclose(s, [1.5, 1.5, np.log(2), 0.1, 0.5, 0.0])
    assert o == 0.0  # logit(1/2)
    h, s, o = state_row(own, 1, others, [1.0, 1.0], relative=True, **kw)
    np.testing.assert_array_equal(h, [3 - 1.5, 1 - 1.5])
    np.testing.assert_allclose(s, [0.0, 0.0, np.log(2), 0.1])
    assert o == pytest.approx(np.log(2.5 / 0.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])  # real checkpoints ship in bf16
@pytest.mark.parametrize("tied", [False, True])
def test_lm_head_weight_is_the_models(tmp_path, tied, dtype):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    m = LlamaForCausalLM(cfg).to(dtype)
    m.save_pretrained(tmp_path)
    want = m.get_output_embeddings().weight.detach().float().numpy()
    got = lm_head_weight(str(tmp_path))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layer", [-1, -2])
def test_tracks_equal_a_plain_forward(tiny, tmp_path, monkeypatch, layer):
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    rows = rollouts(4)
    tracks = Tracks(HiddenStates(tmp_path / "b", tiny), tiny, layer).group("p0", rows)
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    for r in rows:
        ids = torch.tensor([r["prompt_token_ids"] + r["response_token_ids"]])
        P, T = len(r["prompt_token_ids"]), len(r["response_token_ids"])
        with torch.no_grad():
            out = model(ids, output_hidden_states=True)
        logp = torch.log_softmax(out.logits[0, P - 1: P + T], -1)
        ent = -(logp.exp() * logp).sum(-1).numpy()
        tr = tracks[r["rollout_idx"]]
        assert tr.H.shape == (T + 1, 32) and tr.ent.shape == (T + 1,)
        np.testing.assert_allclose(tr.ent, ent, atol=2e-3)  # float16 storage of the pass
        np.testing.assert_allclose(tr.H, out.hidden_states[layer][0, P - 1: P + T].numpy(), atol=3e-3)
        # a state reads its own rollout up to t only: a pass over the prefix alone gives the same features
        t = T // 2
        with torch.no_grad():
            cut = model(ids[:, :P + t], output_hidden_states=True)
        np.testing.assert_allclose(tr.prefix(t).H, cut.hidden_states[layer][0, P - 1:].numpy(), atol=3e-3)
    # one pass stored both layers; a second read loads them instead of recomputing
    assert len(list((tmp_path / "b" / "features").rglob("*.npz"))) == len({layer, -1})


def test_a_final_layer_probe_runs_no_pass_of_its_own_and_caches_its_entropies(tiny, tmp_path, monkeypatch):
    """A group sharing one prompt (every real build's): the tracks come from the shared pass plus the prompt's
    short pass, equal a plain forward, write no every-position features, and a second read of the group
    (probe-mc, the other protocol) takes the entropies from their cache instead of the LM head."""
    import sveb.estimators.probe_features as pf
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    prompt = rollouts(1)[0]["prompt_token_ids"]
    rows = [r | {"prompt_token_ids": prompt} for r in rollouts(4)]
    calls = []
    real = pf.entropies
    monkeypatch.setattr(pf, "entropies", lambda *a, **k: calls.append(1) or real(*a, **k))
    hs = HiddenStates(tmp_path / "b", tiny)
    tracks = Tracks(hs, tiny, -1).group("p0", rows)
    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    P = len(prompt)
    for r in rows:
        ids = torch.tensor([prompt + r["response_token_ids"]])
        with torch.no_grad():
            out = model(ids, output_hidden_states=True)
        logp = torch.log_softmax(out.logits[0, P - 1:], -1)
        np.testing.assert_allclose(tracks[r["rollout_idx"]].H, out.hidden_states[-1][0, P - 1:].numpy(), atol=1e-4)
        np.testing.assert_allclose(tracks[r["rollout_idx"]].ent, -(logp.exp() * logp).sum(-1).numpy(), atol=1e-4)
    assert not hs._full_dir(-1).exists()  # no pass of the final layer at every position: the shared one serves
    assert len(calls) == 1  # the group's positions through the head in one product
    again = Tracks(HiddenStates(tmp_path / "b", tiny), tiny, -1).group("p0", rows)
    assert len(calls) == 1  # read from the cache
    for i, tr in tracks.items():
        np.testing.assert_array_equal(again[i].ent, tr.ent)
        np.testing.assert_array_equal(again[i].H, tr.H)


def test_read_positions_by_hand():
    # a state at t reads positions t - window + 1 .. t of its own rollout and of every other, stopped at the end
    got = pf_read_positions({0: 10, 1: 3}, {2, 6}, 3)
    np.testing.assert_array_equal(got[0], [0, 1, 2, 4, 5, 6])
    np.testing.assert_array_equal(got[1], [0, 1, 2])  # both windows end at min(t, len - 1) = 2
    np.testing.assert_array_equal(pf_read_positions({0: 5}, set(), 8)[0], [])


def test_an_entropy_does_not_depend_on_what_is_computed_beside_it():
    rng = np.random.default_rng(0)
    head, h = rng.normal(size=(50, 8)).astype(np.float32), rng.normal(size=(300, 8)).astype(np.float32)
    from sveb.estimators.probe_features import entropies
    full = entropies(h, head)
    for rows in ([0], [299], [3, 17, 256, 257], list(range(0, 300, 7))):
        np.testing.assert_array_equal(entropies(h[rows], head), full[rows])


def test_tracks_compute_only_the_entropies_the_states_read(tiny, tmp_path, monkeypatch):
    """With the states' positions, the head runs on their windows only; each entropy equals the one computed at
    every position, bit for bit; the rest are NaN, and a state whose window is missing is refused, not fed NaN.
    A later call with more positions computes only the new ones and keeps the cached ones."""
    import sveb.estimators.probe_features as pf
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    prompt = rollouts(1)[0]["prompt_token_ids"]
    rows = [r | {"prompt_token_ids": prompt} for r in rollouts(4)]
    full = Tracks(HiddenStates(tmp_path / "full", tiny), tiny, -1, 2).group("p0", rows)
    rows_seen = []
    real = pf.entropies
    monkeypatch.setattr(pf, "entropies", lambda h, *a, **k: rows_seen.append(len(h)) or real(h, *a, **k))
    hs = HiddenStates(tmp_path / "b", tiny)
    sparse = Tracks(hs, tiny, -1, 2).group("p0", rows, {3})
    want = pf.read_positions({i: len(t.ent) for i, t in full.items()}, {3}, 2)
    assert rows_seen == [sum(len(p) for p in want.values())]
    for i, tr in sparse.items():
        np.testing.assert_array_equal(tr.ent[want[i]], full[i].ent[want[i]])
        assert np.isnan(np.delete(tr.ent, want[i])).all()
        np.testing.assert_array_equal(tr.H, full[i].H)
    others = [sparse[j] for j in sparse if j != 0]
    a = state_row(sparse[0].prefix(3), 3, others, [1.0] * 3, pool="last", window=2, max_tokens=50, relative=True)
    b = state_row(full[0].prefix(3), 3, [full[j] for j in full if j != 0], [1.0] * 3, pool="last", window=2,
                  max_tokens=50, relative=True)
    np.testing.assert_array_equal(a[1], b[1])
    with pytest.raises(RuntimeError, match="not computed"):
        state_row(sparse[3].prefix(6), 6, [sparse[j] for j in sparse if j != 3], [1.0] * 3, pool="last", window=2,
                  max_tokens=50, relative=False)
    more = Tracks(HiddenStates(tmp_path / "b", tiny), tiny, -1, 2).group("p0", rows, {3, 6})
    new = pf.read_positions({i: len(t.ent) for i, t in full.items()}, {3, 6}, 2)
    assert rows_seen[1] == sum(len(new[i]) - len(want[i]) for i in new)
    for i, tr in more.items():
        np.testing.assert_array_equal(tr.ent[new[i]], full[i].ent[new[i]])
    Tracks(HiddenStates(tmp_path / "b", tiny), tiny, -1, 2).group("p0", rows, {6, 3})
    assert len(rows_seen) == 2  # everything read from the cache now
