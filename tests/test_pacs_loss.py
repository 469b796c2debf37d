"""The PACS loss kernel (sveb.estimators.pacs_loss) against the authors' code (conformance cases), hand cases
and autograd; the estimator's training step runs that kernel; its parameters (weight, logprob_temperature,
final_baseline)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sveb.core.config import fingerprint
from sveb.core.errors import UsageError
from sveb.estimators import make
from sveb.estimators.base import ProblemGroup, Rollout, State
from sveb.estimators.pacs_loss import (
    balanced_weights,
    logprob_temperature,
    mismatches,
    pacs_group,
    prefix_psi,
    run_case,
)

torch.set_num_threads(1)
FIXTURE = Path(__file__).parent / "fixtures" / "conformance" / "pacs" / "pacs.jsonl"
CASES = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def test_the_fixture_covers_every_rule_and_both_losses():
    rules = {t for c in CASES for t in c["rules"]}
    assert {"weighted", "unweighted", "balanced", "unbalanced", "all-same", "zero-ratio", "large-psi"} <= rules
    assert {c["use_weight"] for c in CASES} == {True, False} and len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conformance_case(case):
    assert mismatches(case) == []
    out = run_case(case)
    assert set(out) == {"psi", "loss", "grad_log_ratio_sum"} and isinstance(out["loss"], float)
    assert len(out["psi"]) == len(out["grad_log_ratio_sum"]) == len(case["rewards"])


def test_a_wrong_answer_does_not_conform():
    case = next(c for c in CASES if "unbalanced" in c["rules"] and c["use_weight"] and "zero-ratio" not in c["rules"])
    unweighted = run_case({**case, "use_weight": False})
    assert mismatches(case, unweighted)  # the weights matter on an unbalanced group
    got = run_case(case)
    assert mismatches(case, {**got, "psi": [p * (1 + 1e-8) for p in got["psi"]]})


def test_balanced_weights_hand_cases():
    w = balanced_weights([1.0, 0.0, 0.0, 0.0])  # G = 4, one correct: 4 / (2 * 1), 4 / (2 * 3)
    assert w.tolist() == [2.0, float(np.float32(2 / 3))] + [float(np.float32(2 / 3))] * 2
    assert w == pytest.approx([2, 2 / 3, 2 / 3, 2 / 3], rel=1e-7)
    assert balanced_weights([1.0] * 4).tolist() == [1.0] * 4
    assert balanced_weights([0.0] * 3).tolist() == [1.0] * 3
    assert balanced_weights([1.0, 0.0, 1.0, 0.0]).tolist() == [1.0] * 4
    assert balanced_weights([0.0, 0.5, 1.0, 1.0]).tolist() == pytest.approx([4 / 3, 4 / 3, 2 / 3, 2 / 3], rel=1e-7)


@pytest.mark.parametrize("use_weight", [True, False])
@pytest.mark.parametrize("G,beta,seed", [(2, 1.0, 0), (4, 0.5, 1), (7, 2.0, 2), (16, 1.0, 3)])
def test_gradient_equals_autograd(use_weight, G, beta, seed):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(scale=5.0, size=G), dtype=torch.float64, requires_grad=True)
    R = np.zeros(G)
    R[rng.choice(G, size=max(1, G // 3), replace=False)] = 1.0
    r = beta * x
    psi = r - (r.sum() - r) / (G - 1)
    w = torch.as_tensor(balanced_weights(R)) if use_weight else None
    loss = torch.nn.BCEWithLogitsLoss(weight=w)(psi, torch.as_tensor(R))  # the authors' criterion, one group
    loss.backward()
    p, value, grad = pacs_group(x.detach().numpy(), R, beta, use_weight)
    assert p == pytest.approx(psi.detach().numpy(), rel=1e-12, abs=1e-12)
    assert value == pytest.approx(loss.item(), rel=1e-12)
    assert grad == pytest.approx(x.grad.numpy(), rel=1e-10, abs=1e-15)


def test_group_needs_two_rollouts():
    with pytest.raises(ValueError):
        pacs_group([0.3], [1.0], 1.0, True)


def test_prefix_psi_differs_from_the_same_length_baseline_only_at_the_end():
    own = np.array([0.0, 1.0, 3.0])                         # T = 2
    others = [np.array([0.0, -1.0, -1.0, 2.0]), np.array([0.0, 0.5])]  # T = 3, T = 1
    for t in (0, 1):
        assert prefix_psi(own, others, t, "full") == prefix_psi(own, others, t, "truncated")
    assert prefix_psi(own, others, 1, "full") == pytest.approx(1.0 - (-1.0 + 0.5) / 2)
    assert prefix_psi(own, others, 2, "truncated") == pytest.approx(3.0 - (-1.0 + 0.5) / 2)
    assert prefix_psi(own, others, 2, "full") == pytest.approx(3.0 - (2.0 + 0.5) / 2)  # the sequence-level psi
    assert prefix_psi(own, [], 2, "full") == 3.0


def test_logprob_temperature_defaults_to_the_builds_sampling_temperature():
    m = {"config": {"sampling": {"temperature": 0.7}}}
    assert logprob_temperature(None, m, m) == (0.7, "")
    assert logprob_temperature(1.0, m, m) == (1.0, "")
    T, note = logprob_temperature(None, m, {"config": {"sampling": {"temperature": 1.0}}})
    assert T == 0.7 and "train build" in note
    with pytest.raises(UsageError, match="logprob_temperature"):
        logprob_temperature(None, {"model": "x"}, m)
    with pytest.raises(UsageError, match="logprob_temperature=0"):
        logprob_temperature(0.0, m, m)


def test_parameters_and_their_validation():
    est = make("pacs")
    assert (est.weight, est.logprob_temperature, est.final_baseline) == ("balanced", None, "full")
    sveb = make("pacs", {"weight": "none", "logprob_temperature": "1.0", "final_baseline": "truncated"})
    assert (sveb.weight, sveb.logprob_temperature, sveb.final_baseline) == ("none", 1.0, "truncated")
    for key, bad in (("weight", "question"), ("final_baseline", "half")):
        with pytest.raises(UsageError, match=f"{key}={bad}"):
            make("pacs", {key: bad}).prepare(None)


class Stub:
    manifest = {"build_fp": "b"}


def test_final_baseline_changes_only_a_state_at_its_rollouts_end(tmp_path):
    scores = {("p", 0): np.array([0.0, 1.0, 2.0]), ("p", 1): np.array([0.0, -1.0, -1.0, -4.0]),
              ("p", 2): np.array([0.0, 0.5, 0.5, 0.5, 0.5])}
    rolls = tuple(Rollout(i, (1,), (5,) * (2 + i), "x", float(i == 1)) for i in range(3))
    group = ProblemGroup({"problem_id": "p"}, rolls, rolls)
    states = [State("a", "p", 0, 1, ""), State("b", "p", 0, 2, "")]
    v = {}
    for how in ("full", "truncated"):
        est = make("pacs", {"final_baseline": how, "value": "sigmoid"})
        est._data, est._train, est._scores = Stub(), (tmp_path, ()), scores
        v[how] = est.estimate(group, states)
    assert v["full"][0] == v["truncated"][0] == pytest.approx(1 / (1 + np.exp(-(1.0 - (-1.0 + 0.5) / 2))))
    assert v["truncated"][1] == pytest.approx(1 / (1 + np.exp(-(2.0 - (-1.0 + 0.5) / 2))))
    assert v["full"][1] == pytest.approx(1 / (1 + np.exp(-(2.0 - (-4.0 + 0.5) / 2))))


# ---- the training step on a tiny model ----

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tests.helpers.tiny_llama import tiny_llama
    return tiny_llama(tmp_path_factory.mktemp("tiny-pacs") / "llama")


def _seqs():
    from sveb.estimators.pacs import make_pseq
    rng = np.random.default_rng(0)
    out = []
    for g, rewards in (("A", [1, 0, 0, 0]), ("B", [1, 1, 0])):
        for i, R in enumerate(rewards):
            resp = rng.integers(97, 123, rng.integers(3, 8)).tolist()
            out.append(make_pseq((g, i), g, [65 + len(out) % 3, 10], resp, float(R)))
    return out


def _scorer(tiny, **kw):
    from sveb.estimators.pacs import PacsConfig, PacsScorer
    scorer = PacsScorer(PacsConfig(model=tiny, beta=0.5, train_layers=1, **kw), tiny, device="cpu", dtype="float32")
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a trained policy: pi_theta != pi_ref, so the log-ratios are not 0
        for p in scorer.model.trainable().parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.1)
    return scorer


def _grads(scorer):
    """The trained parameters' gradients (the critic's value head, unused by PACS, has none)."""
    out = {k: p.grad.detach().clone() for k, p in scorer.model.trainable().named_parameters() if p.grad is not None}
    assert out and not any(k.startswith("head") for k in out)
    return out


@pytest.mark.parametrize("weight, grad_bytes", [("balanced", None), ("none", None), ("balanced", 0)])
def test_training_step_is_the_gradient_of_the_authors_loss(tiny, weight, grad_bytes, monkeypatch):
    """The step's gradient is the authors' loss's, whether a group's graph is held at once or (grad_bytes 0: a
    group too large for GRAD_BYTES) rebuilt one rollout at a time."""
    import sveb.estimators.pacs_scorer as pacs_scorer
    if grad_bytes is not None:
        monkeypatch.setattr(pacs_scorer, "GRAD_BYTES", grad_bytes)
    scorer, seqs = _scorer(tiny, weight=weight, temperature=0.7), _seqs()
    scorer.model.trainable().zero_grad(set_to_none=True)
    loss, n = scorer._backward(seqs)
    got = _grads(scorer)
    scorer.model.trainable().zero_grad(set_to_none=True)
    direct = 0.0
    for g in ("A", "B"):   # the loss straight through autograd: BCEWithLogits(weight) of psi, mean over groups
        members = [s for s in seqs if s.group == g]
        x = torch.stack([(lp - lr).sum() for lp, lr in zip(scorer._logprobs(members), scorer.reference(members))])
        r = 0.5 * x.double()
        psi = r - (r.sum() - r) / (len(r) - 1)
        R = torch.tensor([s.reward for s in members], dtype=torch.float64)
        w = torch.as_tensor(balanced_weights(R.numpy())) if weight == "balanced" else None
        group_loss = torch.nn.BCEWithLogitsLoss(weight=w)(psi, R)
        (group_loss / 2).backward()
        direct += group_loss.item()
    assert n == 2 and loss == pytest.approx(direct, rel=1e-6)
    want = _grads(scorer)
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-7)


def test_log_probs_at_the_temperature_and_the_reference_per_temperature(tiny):
    from transformers import AutoModelForCausalLM
    scorer, seqs = _scorer(tiny, temperature=0.7), _seqs()
    ref07 = [t.clone() for t in scorer.reference(seqs)]
    lm = AutoModelForCausalLM.from_pretrained(tiny, dtype=torch.float32).eval()
    for s, lp in zip(seqs, ref07):   # pi_ref = the untrained policy, log_softmax(logits / 0.7)
        with torch.no_grad():
            logits = lm(torch.tensor([s.ids])).logits[0, s.prompt_len - 1: s.prompt_len - 1 + s.T]
        want = torch.log_softmax(logits / 0.7, -1).gather(1, torch.tensor(s.targets)[:, None])[:, 0]
        torch.testing.assert_close(lp, want, rtol=1e-4, atol=1e-5)
    scorer.cfg = dataclasses.replace(scorer.cfg, temperature=1.0)   # a resident scorer handed another config
    ref1 = scorer.reference(seqs)
    assert not torch.allclose(ref1[0], ref07[0])


def test_a_batchs_log_probs_equal_each_rollouts_own(tiny):
    """The head runs once over a batch's response positions: each rollout's log-probs are those it gets alone."""
    scorer, seqs = _scorer(tiny, temperature=0.7), _seqs()
    with torch.no_grad():
        together = scorer._logprobs(seqs)
        alone = [scorer._logprobs([s])[0] for s in seqs]
    for s, a, b in zip(seqs, together, alone):
        assert a.shape == (s.T,)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_the_former_loss_keeps_its_checkpoint_fingerprint():
    """weight=none at temperature 1 (the pacs-sveb preset) trains in the checkpoints and group order of before."""
    from sveb.estimators.pacs import PacsConfig, PacsScorer
    old_fields = [(f.name, f.type, f) for f in dataclasses.fields(PacsConfig)
                  if f.name not in ("weight", "temperature")]
    Old = dataclasses.make_dataclass("PacsConfig", old_fields, frozen=True)
    scorer = object.__new__(PacsScorer)
    scorer.features_fn, scorer.device, scorer.dtype = None, "cpu", "float32"
    scorer.cfg = PacsConfig(model="m", weight="none", temperature=1.0)
    assert scorer.fingerprint("k") == fingerprint("critic", "k", Old(model="m"), "own-pass", "cpu", "float32")
    scorer.cfg = PacsConfig(model="m")
    assert scorer.fingerprint("k") != fingerprint("critic", "k", Old(model="m"), "own-pass", "cpu", "float32")


def test_read_lengths_cover_what_prefix_psi_reads():
    from sveb.estimators.pacs_loss import read_lengths
    T = {0: 10, 1: 4, 2: 7}
    assert read_lengths(T, [(0, 5), (2, 3)]) == {0: 5, 1: 4, 2: 5}  # up to the largest t, stopped at each end
    assert read_lengths(T, [(1, 4)]) == T                              # a state at its rollout's end: full sums
    assert read_lengths(T, [(1, 4)], "truncated") == {0: 4, 1: 4, 2: 4}
    assert read_lengths(T, []) == {0: 0, 1: 0, 2: 0}
    # every read of prefix_psi for these states stays inside the lengths (NaN beyond them would show)
    rng = np.random.default_rng(0)
    for _ in range(200):
        T = {i: int(n) for i, n in enumerate(rng.integers(0, 12, 5))}
        states = [(i, int(rng.integers(0, T[i] + 1))) for i in rng.choice(5, 3)]
        for fb in ("full", "truncated"):
            L = read_lengths(T, states, fb)
            arr = {i: np.r_[rng.normal(size=L[i] + 1), np.full(T[i] - L[i], np.nan)] for i in T}
            for i, t in states:
                assert np.isfinite(prefix_psi(arr[i], [arr[j] for j in T if j != i], t, fb))
