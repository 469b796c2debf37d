"""`judge`: P(yes) / (P(yes) + P(no)) read at the end of the judge's prompt equals a forward pass by hand, for the
policy (a tiny random Llama read with the scripted build's character tokenizer) and for another model named by
`model` (a tiny Qwen2 with a chat template); the prefix alone is read, so both protocols agree and held-out holds."""

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, LlamaForCausalLM, Qwen2ForCausalLM

from sveb import estimators as reg
from sveb.core.errors import UsageError
from sveb.core.records import group_for
from sveb.engines.scripted import CharTokenizer
from sveb.estimators.judge import TEMPLATE, answer_ids, render, yes_log_odds, yes_probability
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import PROTOCOLS, estimate_all
from sveb.store.builds import load_build
from tests.helpers.tiny_prm import qwen_cfg, tiny_tokenizer

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def fp32(monkeypatch):
    monkeypatch.setenv("SVEB_CPU_DTYPE", "float32")


@pytest.fixture(scope="module")
def data(tiny_llama_builds):
    return load_build(tiny_llama_builds[2])


def test_yes_probability_is_the_softmax_share_of_the_answer_tokens():
    z = np.array([0.3, -1.0, 2.0, 0.5, -0.2])
    p = np.exp(z) / np.exp(z).sum()
    assert yes_probability(z, [2, 4], [0]) == pytest.approx((p[2] + p[4]) / (p[2] + p[4] + p[0]), abs=1e-12)
    assert yes_log_odds(z, [1], [1]) == 0.0
    assert yes_log_odds(np.array([1000.0, 0.0]), [0], [1]) == pytest.approx(1000.0)  # no overflow


def test_render_and_answer_ids():
    assert render("Q: {question} P: {prefix}", "x = {1}", "\\boxed{2}") == "Q: x = {1} P: \\boxed{2}"
    assert answer_ids(lambda w: ord(w[0]), "Yes, yes,Y") == [ord("Y"), ord("y")]


def states_of(data, n=6):
    return [s for s in data.states][:n]


def test_policy_judge_equals_a_hand_forward_pass(data, tiny_llama_builds):
    """The tiny Llama has no tokenizer: the scripted build's ids are characters, and so are the judge's."""
    est = reg.make("judge")
    prepare(est, data.public())
    model = LlamaForCausalLM.from_pretrained(tiny_llama_builds[3], dtype=torch.float32).eval()
    tok = CharTokenizer()
    for s in states_of(data):
        from sveb.core.records import State
        st = State(s["state_id"], s["problem_id"], s["rollout_idx"], s["t"], s["prefix_text"])
        got = est.estimate(group_for(data.public(), s["problem_id"]), [st])[0]
        body = TEMPLATE.replace("{question}", data.problems[s["problem_id"]]["question"]).replace(
            "{prefix}", s["prefix_text"])
        with torch.no_grad():
            z = model(input_ids=torch.tensor([tok.encode(body + "\nAnswer:")])).logits[0, -1]
        p = torch.softmax(z.double(), -1)
        y, n = p[ord("Y")] + p[ord("y")], p[ord("N")] + p[ord("n")]
        assert got == pytest.approx(float(y / (y + n)), abs=1e-6)


def test_another_model_as_judge_reads_after_its_chat_templates_assistant_header(data, tmp_path):
    tok = tiny_tokenizer(tmp_path / "judge")
    torch.manual_seed(1)
    Qwen2ForCausalLM(qwen_cfg(len(tok))).save_pretrained(tmp_path / "judge")
    template = "Problem: {question}\\nSo far: {prefix}\\nCorrect in the end?"
    est = reg.make("judge", {"model": str(tmp_path / "judge"), "template": template})
    prepare(est, data.public())
    tok = AutoTokenizer.from_pretrained(tmp_path / "judge")
    model = Qwen2ForCausalLM.from_pretrained(tmp_path / "judge", dtype=torch.float32).eval()
    yes = sorted({tok.encode(w, add_special_tokens=False)[0] for w in ("Yes", "yes")})
    no = sorted({tok.encode(w, add_special_tokens=False)[0] for w in ("No", "no")})
    got = est.estimate(group_for(data.public(), data.states[0]["problem_id"]),
                       [_state(data.states[0])])[0]
    s = data.states[0]
    body = f"Problem: {data.problems[s['problem_id']]['question']}\nSo far: {s['prefix_text']}\nCorrect in the end?"
    text = tok.apply_chat_template([{"role": "user", "content": body}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    with torch.no_grad():
        z = model(input_ids=torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])).logits[0, -1]
    p = torch.softmax(z.double(), -1)
    assert got == pytest.approx(float(p[yes].sum() / (p[yes].sum() + p[no].sum())), abs=1e-6)


def _state(s):
    from sveb.core.records import State
    return State(s["state_id"], s["problem_id"], s["rollout_idx"], s["t"], s["prefix_text"])


def test_bad_parameters_are_one_line(data):
    with pytest.raises(UsageError, match="must hold \\{prefix\\}"):
        prepare(reg.make("judge", {"template": "no placeholder"}), data.public())
    with pytest.raises(UsageError, match="distinct first tokens"):
        prepare(reg.make("judge", {"yes": "yes", "no": "yellow"}), data.public())
    with pytest.raises(UsageError, match="readout=best"):
        prepare(reg.make("judge", {"readout": "best"}), data.public())


@pytest.mark.parametrize("readout", ["raw", "calibrated"])
def test_judge_keeps_the_contract_under_both_protocols(readout, data):
    out = {}
    for protocol in PROTOCOLS:
        est = reg.make("judge", {"readout": readout})
        prepare(est, data.public())
        values, shift, _ = estimate_all(est, data.public(), protocol, None, own=protocol == "held-out")
        assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()
        if protocol == "held-out":
            assert np.all(shift == 0)
        out[protocol] = values
    np.testing.assert_array_equal(out["held-out"], out["in-group"])  # it reads the prefix alone


def test_judge_cal_is_the_judge_read_through_its_calibration():
    """`judge-cal` is `judge` with readout=calibrated (a name of its own, so Table 4 shows both read-outs), in the
    external family beside it."""
    from sveb.estimators import families, params_fp
    assert reg.make("judge-cal").readout == "calibrated" and reg.make("judge").readout == "raw"
    assert params_fp(reg.make("judge-cal")) == params_fp(reg.make("judge", {"readout": "calibrated"}))
    assert families.declared_members()["external"][:2] == ("judge", "judge-cal")
