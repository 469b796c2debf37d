"""Model I/O for the estimators that read a language model's outputs at a prefix (judge, prm, logprob, entropy):
loading through SVEB's model resolution in the compute dtype, a tokenizer, one forward pass. The math on the
outputs lives in pure functions beside each estimator (intrinsic.py, judge.py, prm_formats.py).

A model-free engine's build (scripted: its stand-in model is a test's random weights in a folder without a
tokenizer) is read with the tokenizer that engine declares (sveb.engines.registry.own_tokenizer: the scripted
engine's characters), which made its token ids; any other model without a tokenizer is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sveb.core.errors import UsageError


def unescape(s: str) -> str:
    """A parameter as typed on the command line (`-P split=\\n\\n`): backslash-n and backslash-t as the characters."""
    return s.replace("\\n", "\n").replace("\\t", "\t")


def resolved(spec: str) -> str:
    from sveb.core.models import resolve  # per call: tests patch sveb.core.models.resolve
    return resolve(spec)


def compute_dtype() -> str:
    from sveb.core.device import pick_dtype  # per call: tests patch sveb.core.device
    return pick_dtype("auto")


def load_model(path: str, kind: str = "causal", trust_remote_code: bool = False):
    """A model in the compute dtype (from_pretrained(dtype=...), never a cast after loading), on the device,
    in eval mode. kind: causal | token | sequence | remote (AutoModel with the model's own code)."""
    import torch
    import transformers as tf

    from sveb.core.device import torch_device
    cls = {"causal": tf.AutoModelForCausalLM, "token": tf.AutoModelForTokenClassification,
           "sequence": tf.AutoModelForSequenceClassification, "remote": tf.AutoModel}[kind]
    kw = {"trust_remote_code": True} if trust_remote_code or kind == "remote" else {}
    model = cls.from_pretrained(path, dtype=getattr(torch, compute_dtype()), **kw)
    return model.to(torch_device()).eval()


def load_tokenizer(path: str, engine: str = "", trust_remote_code: bool = False):
    """The model folder's tokenizer; for a folder without one, the tokenizer `engine` declares (the model-free
    engine whose build this stand-in model reads: sveb.engines.registry.own_tokenizer), else a one-line error."""
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception as e:  # noqa: BLE001 (a weights-only folder raises one of several types)
        from sveb.engines.registry import own_tokenizer
        tok = own_tokenizer(engine) if engine else None
        if tok is not None:  # its ids are the engine's own (scripted: characters)
            return tok
        raise UsageError(f"model {path}: no tokenizer could be loaded ({type(e).__name__})") from None


def encode(tok, text: str, special: bool = False) -> list[int]:
    """Token ids of text (`special`: with the tokenizer's own added tokens, e.g. a BOS)."""
    if not hasattr(tok, "convert_tokens_to_ids"):  # the character tokenizer
        return tok.encode(text)
    return list(tok.encode(text, add_special_tokens=special))


def chat_text(tok, messages: list[dict], generation_prompt: bool) -> str | None:
    """The messages rendered by the tokenizer's chat template; None without one."""
    if not getattr(tok, "chat_template", None):
        return None
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)


def forward(model, ids: Sequence[int]):
    """The model's output on one sequence (no padding: a position's output is exactly that of its prefix)."""
    import torch
    x = torch.tensor([list(ids)], dtype=torch.long, device=model.device)
    with torch.no_grad():
        return model(input_ids=x, attention_mask=torch.ones_like(x))


def logits_of(out, pos: int | None = None) -> np.ndarray:
    """Float64 logits of a one-sequence output (an object with .logits, or a tuple led by them): [L, K], or [K]
    at position `pos` alone (a [L, vocab] copy is not made to read one row)."""
    t = (out.logits if hasattr(out, "logits") else out[0])[0]
    t = t if pos is None else t[pos]
    return t.float().cpu().numpy().astype(np.float64)


def token_stats(model, ids: Sequence[int], start: int, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(log p of ids[start:] given what precedes each, next-token entropy at positions start-1 .. len-1) under the
    model's distribution at `temperature`, computed in torch (a [L, vocab] float64 copy of a 49k vocabulary is
    not kept); from the same log-softmax as the pure functions in intrinsic.py."""
    import torch
    out = forward(model, ids)
    logits = out.logits[0, start - 1:].float() / max(temperature, 1e-6)  # the prompt's own rows are not read
    logp = torch.log_softmax(logits.double(), dim=-1)
    tgt = torch.tensor(list(ids[start:]), dtype=torch.long, device=logp.device)
    lp = logp[torch.arange(len(tgt), device=logp.device), tgt] if len(tgt) else logp.new_zeros(0)
    ent = -(logp.exp() * logp).sum(-1)
    return lp.cpu().numpy(), ent.cpu().numpy()
