"""How each published process-reward-model format wants a prefix written, and where its score is read.

A prefix's response text is cut into steps at `split` (default a blank line). `cut=partial` (the default) scores the
prefix as it stands: the text after the last separator, if any, is the last step, closed where the state cuts it.
`cut=step` scores the last complete step: that trailing partial step is dropped (a prefix with no complete step
keeps its partial text, as under partial). An empty prefix is one empty step: the score read right after the
question. Each format returns (ids, pos): the token ids the model reads and the position of the score, always the
last step's end:
- step-tag (Math-Shepherd): "question step1 ки\\nstep2 ки"; at the last tag, the next-token logits of the good
  ("+") and bad ("-") tokens, score = softmax over the two;
- two-way (Qwen2.5-Math-PRM): system, user question, assistant steps each followed by "<extra_0>", through the
  chat template; a two-way head at the last separator, score = softmax[1];
- token-class (TRL's stepwise PRMs, PRMTrainer): [bos] question, then each step followed by its separator ("\\n"),
  no chat template; a two-way token-classification head at the last separator token, score = softmax[1];
- value-head (Skywork's PRMs): bos + question + "\\n", each step followed by the step token ("\\n"); a scalar value
  head at the last step token (the model's own code), score = sigmoid;
- seq-class: a sequence-classification reward model over the chat (user question, assistant prefix); its own
  pooled logit(s), score = sigmoid (one label) or softmax[1] (two).
Every score is carried as a log-odds (the logit before the sigmoid/softmax) so the calibrated read-out maps it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sveb.core.errors import UsageError

FORMATS = ("step-tag", "two-way", "token-class", "value-head", "seq-class")
CUTS = ("partial", "step")
QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


def steps_of(text: str, split: str, cut: str = "partial") -> list[str]:
    """The prefix's steps (stripped), the last one the step the score is read after."""
    if cut not in CUTS:
        raise UsageError(f"-P cut={cut}: expected one of {', '.join(CUTS)}")
    parts = text.split(split) if split else [text]
    complete, tail = parts[:-1], parts[-1]
    steps = [s.strip() for s in complete if s.strip()]
    if tail.strip() and (cut == "partial" or not steps):
        steps.append(tail.strip())
    return steps or [""]


def _enc(tok, text: str, special: bool) -> list[int]:
    from sveb.estimators.lm_read import encode
    return encode(tok, text, special)


def _last(ids: Sequence[int], token: int, what: str) -> int:
    hits = [i for i, x in enumerate(ids) if x == token]
    if not hits:
        raise UsageError(f"prm: the {what} token (id {token}) is not in the formatted prefix (the tokenizer merged it)")
    return hits[-1]


def single_token(tok, text: str, what: str) -> int:
    ids = _enc(tok, text, False)
    if len(ids) != 1:
        raise UsageError(f"-P {what}={text!r}: must be one token of the PRM's tokenizer (it is {len(ids)})")
    return ids[0]


def step_tag(tok, question: str, steps: list[str], tag: str = "ки", join: str = "\n") -> tuple[list[int], int]:
    ids = _enc(tok, question + " " + join.join(f"{s} {tag}" for s in steps), True)
    return ids, _last(ids, _enc(tok, tag, True)[-1], "step tag")


def two_way(tok, question: str, steps: list[str], sep: str = "<extra_0>",
            system: str = QWEN_SYSTEM) -> tuple[list[int], int]:
    from sveb.estimators.lm_read import chat_text
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": question}, {"role": "assistant", "content": sep.join(steps) + sep}]
    text = chat_text(tok, messages, False)
    if text is None:
        raise UsageError("prm format two-way: the PRM's tokenizer has no chat template")
    ids = _enc(tok, text, True)
    return ids, _last(ids, single_token(tok, sep, "sep"), "separator")


def token_class(tok, question: str, steps: list[str], sep: str = "\n") -> tuple[list[int], int]:
    bos = getattr(tok, "bos_token_id", None)
    ids = ([bos] if bos is not None else []) + _enc(tok, question, False)
    sep_ids = _enc(tok, sep, False)
    for s in steps:
        ids += _enc(tok, s, False) + sep_ids
    return ids, len(ids) - 1


def value_head(tok, question: str, steps: list[str], sep: str = "\n") -> tuple[list[int], int]:
    ids = _enc(tok, (getattr(tok, "bos_token", None) or "") + question + "\n", True)
    step_id = _enc(tok, sep, True)[-1]
    for s in steps:
        ids += _enc(tok, s, True) + [step_id]
    return ids, len(ids) - 1


def seq_class(tok, question: str, steps: list[str], join: str = "\n\n") -> tuple[list[int], int]:
    from sveb.estimators.lm_read import chat_text
    answer = join.join(steps)
    text = chat_text(tok, [{"role": "user", "content": question}, {"role": "assistant", "content": answer}], False)
    ids = _enc(tok, text, False) if text is not None else _enc(tok, question + "\n" + answer, True)
    return ids, len(ids) - 1


def pair_log_odds(logits: np.ndarray, good: int, bad: int) -> float:
    """log p(good) - log p(bad) of next-token logits (softmax over the two)."""
    return float(logits[good] - logits[bad])


def head_log_odds(out: np.ndarray) -> float:
    """A head's log-odds of "correct": a one-logit head's logit, a two-way head's logit[1] - logit[0]."""
    out = np.atleast_1d(np.asarray(out, np.float64))
    if len(out) == 1:
        return float(out[0])
    if len(out) == 2:
        return float(out[1] - out[0])
    raise UsageError(f"prm: a head with {len(out)} outputs; expected 1 (a value) or 2 (bad, good)")


def sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-x)))


def detect(config: dict) -> str:
    """The format of a model folder's config.json (`format=auto`)."""
    archs = " ".join(config.get("architectures") or [])
    remote = bool(config.get("auto_map"))
    if "ProcessRewardModel" in archs and remote:
        return "two-way"
    if "ForTokenClassification" in archs:
        return "token-class"
    if "ForSequenceClassification" in archs:
        return "seq-class"
    if remote:
        return "value-head"
    if "ForCausalLM" in archs:
        return "step-tag"
    raise UsageError(f"prm: cannot tell the format of architectures [{archs}]; pass -P format= one of "
                     f"{', '.join(FORMATS)}")
