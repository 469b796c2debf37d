"""The shared hidden-state pass passes a group's common prompt once and reuses its keys and values for every
response: each tap (last layer at the response positions, any layer at every position) equals a plain forward
over prompt + response, for empty and one-token responses, batches split by the token budget, and a rollout
whose prompt differs from its group's."""

import numpy as np
import pytest
import torch

from sveb.core import device
from sveb.lm.hidden import HiddenStates, from_store
from tests.helpers.tiny_llama import tiny_llama

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_llama(tmp_path_factory.mktemp("tiny-pass") / "llama", layers=3)


def group(seed=0):
    rng = np.random.default_rng(seed)
    prompt = rng.integers(1, 200, 9).tolist()
    rows = [{"rollout_idx": i, "prompt_token_ids": prompt,
             "response_token_ids": rng.integers(1, 200, [0, 1, 5, 12, 3][i % 5]).tolist()} for i in range(7)]
    return rows + [{"rollout_idx": 7, "prompt_token_ids": [5, 6], "response_token_ids": [7, 8, 9]}]


def test_shared_prompt_pass_equals_a_full_forward(tiny, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    rows = group()
    out = HiddenStates(tmp_path / "b", tiny, batch_tokens=40)._forward(rows, [-1, 1], [-2, -1])
    model = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    for r in rows:
        p = len(r["prompt_token_ids"])
        with torch.no_grad():
            res = model.base_model(input_ids=torch.tensor([r["prompt_token_ids"] + r["response_token_ids"]]),
                                   output_hidden_states=True)
        for (kind, k), dest in out.items():
            want = (res.last_hidden_state if k == -1 else res.hidden_states[k])[0].numpy()
            want = want[p:] if kind == "resp" else want
            got = from_store(dest[r["rollout_idx"]])
            assert got.shape == want.shape, (kind, k, r["rollout_idx"])
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_a_groups_prompt_is_passed_once(tiny, tmp_path, monkeypatch):
    from sveb.lm import hidden_pass
    monkeypatch.setattr(device, "pick_dtype", lambda spec="auto": "float32")
    hs = HiddenStates(tmp_path / "b", tiny)
    seen = []
    real = hidden_pass.run
    monkeypatch.setattr(hidden_pass, "run", lambda m, d, ids, *a: seen.append(tuple(ids.shape)) or real(m, d, ids, *a))
    rows = [r for r in group() if r["rollout_idx"] < 7]  # one prompt of 9 tokens; responses 0, 1, 5, 12, 3, 0, 1
    hs.group("p0", rows)
    # the prompt alone once; the responses in batches, none for the two empty ones; every response token once
    assert seen[0] == (1, 9) and seen[1:] and all(s[0] <= 5 for s in seen[1:])
    assert sum(s[0] for s in seen[1:]) == 5


def cost(batches, lengths, call):
    return sum(len(b) * max(lengths[i] for i in b) + call for b in batches)


@pytest.mark.parametrize("seed", range(20))
def test_plan_batches_is_the_cheapest_partition(seed):
    """Against every contiguous partition of the sorted lengths (brute force): the planner's cost is the
    least, every nonzero length is in exactly one batch, and batches respect the token budget."""
    import itertools

    from sveb.lm.hidden_pass import plan_batches
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 60, int(rng.integers(1, 9))).tolist()
    prompt, budget, call = int(rng.integers(0, 20)), int(rng.integers(60, 400)), int(rng.integers(0, 80))
    got = plan_batches(lengths, prompt, budget, call)
    assert sorted(i for b in got for i in b) == [i for i, t in enumerate(lengths) if t > 0]
    assert all(len(b) == 1 or len(b) * (prompt + max(lengths[i] for i in b)) <= budget for b in got)
    order = sorted((i for i, t in enumerate(lengths) if t > 0), key=lambda i: lengths[i])
    best = np.inf
    for k in range(len(order)):
        for cuts in itertools.combinations(range(1, len(order)), k):
            parts = [order[a:b] for a, b in zip((0,) + cuts, cuts + (len(order),))]
            if all(len(b) == 1 or len(b) * (prompt + max(lengths[i] for i in b)) <= budget for b in parts):
                best = min(best, cost(parts, lengths, call))
    assert cost(got, lengths, call) == (best if order else 0)


def test_plan_batches_known_answers():
    from sveb.lm.hidden_pass import plan_batches
    # free calls: every row alone pads nothing; dear calls: one batch
    assert plan_batches([3, 1, 2], 0, 10**6, 0) in ([[1], [2], [0]],)
    assert plan_batches([3, 1, 2], 0, 10**6, 1000) == [[1, 2, 0]]
    # one long response among short ones goes alone once a call costs less than its padding
    assert plan_batches([2, 2, 2, 100], 0, 10**6, 32) == [[0, 1, 2], [3]]
    assert plan_batches([0, 0], 5, 100, 32) == []


def test_critic_values_and_gradient_split_by_length_equal_one_padded_batch(monkeypatch):
    """The critic runs a micro-batch in parts of similar length: values and the summed loss's gradient are
    those of the whole batch padded to its longest rollout (CALL_TOKENS huge: one part, the earlier way)."""
    import tempfile
    from pathlib import Path

    from sveb.lm import hidden_pass
    from sveb.lm.critic import Critic, CriticConfig, make_seq
    path = tiny_llama(Path(tempfile.mkdtemp()) / "llama", layers=3)
    rng = np.random.default_rng(1)
    seqs = [make_seq(("b", "p", i), rng.integers(1, 200, 6).tolist(), rng.integers(1, 200, n).tolist(), float(i % 2))
            for i, n in enumerate([1, 40, 3, 2, 37, 5, 1, 4])]
    # fp32: exact up to summation order (in bf16, where the CPU picks it, the batch shape moves the rounding)
    critic = Critic(CriticConfig(model=path, train_layers=2), path, device="cpu", dtype="float32")
    critic.model.head.weight.data.normal_(0, 0.1)
    runs = {}
    for name, call in (("split", 32), ("one", 10**9)):
        monkeypatch.setitem(hidden_pass.CALL_TOKENS, "cpu", call)
        critic.model.zero_grad(set_to_none=True)
        loss = critic._loss_sum(seqs)
        loss.backward()
        grads = [p.grad.clone() for p in critic.model.trainable().parameters() if p.grad is not None]
        runs[name] = ([v.detach().clone() for v in critic._values_batch(seqs)], loss.item(), grads)
        if name == "split":  # the parts really differ from one batch
            parts = hidden_pass.plan_batches([len(s.ids) for s in seqs], 0, 1 << 62, call)
            assert len(parts) > 1
    (va, la, ga), (vb, lb, gb) = runs["split"], runs["one"]
    assert len(ga) == len(gb) > 0
    for a, b in zip(va, vb):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    assert abs(la - lb) < 1e-4 * max(1.0, abs(lb))
    for a, b in zip(ga, gb):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, rtol=1e-4)
