"""`prm`: every format's adapter reads its score at the right token for every cut of a rollout, checked against a
forward pass by hand on the string that format's authors write (built here without sveb.estimators.prm_formats).
The PRMs are tiny random models of each format's class, saved with a tiny byte-level BPE tokenizer; the value-head
one is a small module with its own code (loaded through auto_map, as Skywork's PRMs are)."""

import importlib
import sys

import numpy as np
import pytest
import torch
from transformers import (
    AutoModel,
    AutoTokenizer,
    Qwen2ForCausalLM,
    Qwen2ForSequenceClassification,
    Qwen2ForTokenClassification,
)

from sveb import estimators as reg
from sveb.core.errors import UsageError
from sveb.core.records import State, group_for
from sveb.engines.scripted import CharTokenizer
from sveb.estimators import prm_formats as F
from sveb.evaluate.context import prepare
from sveb.evaluate.protocols import PROTOCOLS, estimate_all
from sveb.store.builds import load_build
from tests.helpers.tiny_prm import qwen_cfg, tiny_tokenizer

torch.set_num_threads(1)

SYSTEM = F.QWEN_SYSTEM

VALUE_HEAD = '''
from torch import nn
from transformers import PreTrainedModel, Qwen2Config, Qwen2Model


class TinyValueConfig(Qwen2Config):
    model_type = "tiny_value_prm"


class TinyValuePRM(PreTrainedModel):
    """A causal body and a scalar head at every position; returns (lm_logits, loss, value) as Skywork's PRM does."""
    config_class = TinyValueConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.v_head = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, **kw):
        h = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return (None, None, self.v_head(h).squeeze(-1))
'''


def save_value_head(path, vocab, code_dir):
    (code_dir / "tiny_value_prm_code.py").write_text(VALUE_HEAD)
    sys.path.insert(0, str(code_dir))
    try:
        mod = importlib.import_module("tiny_value_prm_code")
    finally:
        sys.path.remove(str(code_dir))
    mod.TinyValueConfig.register_for_auto_class()
    mod.TinyValuePRM.register_for_auto_class("AutoModel")
    cfg = mod.TinyValueConfig(**qwen_cfg(vocab).to_dict())
    mod.TinyValuePRM(cfg).save_pretrained(path)


@pytest.fixture(scope="module")
def prms(tmp_path_factory):
    """format -> the folder of a tiny PRM of that format (its tokenizer beside it)."""
    root = tmp_path_factory.mktemp("prms")
    out = {}
    for fmt, cls, kw in (("step-tag", Qwen2ForCausalLM, {}),
                         ("two-way", Qwen2ForTokenClassification, {"num_labels": 2}),
                         ("token-class", Qwen2ForTokenClassification, {"num_labels": 2}),
                         ("seq-class", Qwen2ForSequenceClassification, {"num_labels": 1}), ("value-head", None, {})):
        path = root / fmt
        tok = tiny_tokenizer(path)
        torch.manual_seed(len(fmt))
        if cls is None:
            save_value_head(path, len(tok), root)
        else:
            cls(qwen_cfg(len(tok), **kw)).save_pretrained(path)
        out[fmt] = str(path)
    return out


@pytest.fixture(autouse=True)
def fp32(monkeypatch):
    monkeypatch.setenv("SVEB_CPU_DTYPE", "float32")  # the hand pass below is float32; bf16 CPUs would round


@pytest.fixture(scope="module")
def data(tiny_llama_builds):
    return load_build(tiny_llama_builds[2])


def words(text):
    return [w.strip() for w in text.split(" ") if w.strip()] or [""]


def hand(fmt, path, question, text):
    """The score a format's authors read, written out by hand for steps split at spaces (cut = partial)."""
    tok = AutoTokenizer.from_pretrained(path)
    steps = words(text)
    if fmt == "step-tag":
        ids = tok(question + " " + "\n".join(f"{s} ки" for s in steps))["input_ids"]
        pos = max(i for i, x in enumerate(ids) if x == tok.convert_tokens_to_ids("ки"))
    elif fmt == "two-way":
        msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question},
                {"role": "assistant", "content": "<extra_0>".join(steps) + "<extra_0>"}]
        ids = tok(tok.apply_chat_template(msgs, tokenize=False))["input_ids"]
        pos = max(i for i, x in enumerate(ids) if x == tok.convert_tokens_to_ids("<extra_0>"))
    elif fmt == "token-class":
        ids = [tok.bos_token_id] + tok(question, add_special_tokens=False)["input_ids"]
        for s in steps:
            ids += tok(s, add_special_tokens=False)["input_ids"] + tok("\n", add_special_tokens=False)["input_ids"]
        pos = len(ids) - 1
    elif fmt == "value-head":
        ids = tok.encode("<s>" + question + "\n")
        for s in steps:
            ids += tok.encode(s) + [tok.encode("\n")[-1]]
        pos = len(ids) - 1
    else:
        msgs = [{"role": "user", "content": question}, {"role": "assistant", "content": " ".join(steps)}]
        ids = tok(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)["input_ids"]
        pos = len(ids) - 1
    x = torch.tensor([ids])
    with torch.no_grad():
        if fmt == "value-head":
            model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=torch.float32).eval()
            return float(torch.sigmoid(model(input_ids=x)[2][0, pos]))
        cls = {"step-tag": Qwen2ForCausalLM,
               "seq-class": Qwen2ForSequenceClassification}.get(fmt, Qwen2ForTokenClassification)
        logits = cls.from_pretrained(path, dtype=torch.float32).eval()(input_ids=x).logits[0]
    if fmt == "step-tag":
        good, bad = tok.encode("+ -", add_special_tokens=False)
        return float(torch.softmax(logits[pos, [good, bad]], -1)[0])
    if fmt == "seq-class":
        return float(torch.sigmoid(logits[0]))
    return float(torch.softmax(logits[pos], -1)[1])


def cuts(data):
    """One rollout of the test build and a state at every cut t = 0 .. T of it."""
    pid = sorted(data.rollouts)[0]
    r = data.rollouts[pid][0]
    ids = list(r["response_token_ids"])
    return pid, [State(f"cut{t}", pid, r["rollout_idx"], t, CharTokenizer().decode(ids[:t]))
                 for t in range(len(ids) + 1)]


@pytest.mark.parametrize("fmt", F.FORMATS)
def test_every_format_reads_its_score_at_the_right_token_for_every_cut(fmt, prms, data):
    est = reg.make("prm", {"model": prms[fmt], "format": fmt, "split": " "})
    prepare(est, data.public())
    pid, states = cuts(data)
    group = group_for(data.public(), pid)
    got = est.estimate(group, states)
    q = data.problems[pid]["question"]
    want = [hand(fmt, prms[fmt], q, s.prefix_text) for s in states]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)
    assert np.ptp(got) > 0  # the cuts differ: a read at a fixed position would not
    assert est.diagnostics()["format"] == fmt


def test_auto_detects_each_format_from_its_config(prms):
    import json
    from pathlib import Path
    cfg = lambda f: json.loads((Path(prms[f]) / "config.json").read_text())  # noqa: E731
    assert [F.detect(cfg(f)) for f in ("step-tag", "token-class", "seq-class", "value-head")] == [
        "step-tag", "token-class", "seq-class", "value-head"]
    assert F.detect({"architectures": ["Qwen2ForProcessRewardModel"], "auto_map": {"AutoModel": "m.X"}}) == "two-way"
    with pytest.raises(UsageError, match="cannot tell the format"):
        F.detect({"architectures": ["BertModel"]})


def test_steps_at_the_cut():
    assert F.steps_of("a\n\nb\n\nc", "\n\n") == ["a", "b", "c"]
    assert F.steps_of("a\n\nb\n\nc", "\n\n", "step") == ["a", "b"]  # mid-step: the partial step dropped
    assert F.steps_of("a\n\nb\n\n", "\n\n", "step") == ["a", "b"]   # at a step's end: nothing dropped
    assert F.steps_of("abc", "\n\n", "step") == ["abc"]             # no complete step: the partial text kept
    assert F.steps_of("", "\n\n") == [""]                            # an empty prefix: one empty step


def test_cut_step_values_a_mid_step_state_as_its_last_complete_step(prms, data):
    est = reg.make("prm", {"model": prms["step-tag"], "format": "step-tag", "split": " ", "cut": "step"})
    prepare(est, data.public())
    pid, states = cuts(data)
    got = est.estimate(group_for(data.public(), pid), states)
    for s, v in zip(states, got):
        text = s.prefix_text
        if " " in text.strip():  # a complete step exists: the value is the one at its end
            b = text.rstrip().rfind(" ") if not text.endswith(" ") else len(text) - 1
            boundary = next(x for x in states if x.prefix_text == text[: b + 1])
            assert v == pytest.approx(got[states.index(boundary)], abs=1e-12), (s.t, boundary.t)


def test_prm_needs_a_model_and_a_known_format(prms, data):
    with pytest.raises(UsageError, match="-P model="):
        prepare(reg.make("prm"), data.public())
    with pytest.raises(UsageError, match="-P format=nope"):
        prepare(reg.make("prm", {"model": prms["step-tag"], "format": "nope"}), data.public())
    with pytest.raises(UsageError, match="auto_map"):
        prepare(reg.make("prm", {"model": prms["step-tag"], "format": "value-head"}), data.public())


@pytest.mark.parametrize("readout", ["raw", "calibrated"])
def test_prm_keeps_the_contract_under_both_protocols(readout, prms, data):
    """Finite values in [0, 1], the same on a rerun, and held-out: the own outcome flipped moves nothing."""
    runs = []
    for protocol in PROTOCOLS:
        for _ in range(2):
            est = reg.make("prm", {"model": prms["token-class"], "readout": readout, "split": " "})
            prepare(est, data.public())
            values, shift, _ = estimate_all(est, data.public(), protocol, None, own=protocol == "held-out")
            assert np.isfinite(values).all() and (values >= 0).all() and (values <= 1).all()
            assert np.all(shift == 0) or protocol == "in-group"
            runs.append(values)
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])  # the prefix alone is read: the protocols agree
    if readout == "calibrated":
        assert est.diagnostics()["train states"] > 0
