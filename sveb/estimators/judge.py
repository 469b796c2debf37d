"""`judge`: a language model asked whether the partial solution will end correct (QVal-style prompting), read
without sampling: value = P(yes) / (P(yes) + P(no)) over the answer tokens of its next-token distribution at the
end of the prompt. The judge is the build's policy unless `model` names another (a directory or hub id, through
SVEB's model resolution). It sees the problem and the prefix's text alone: held-out safe by construction.

The prompt is `template` with {question} and {prefix} replaced, sent as one user message through the judge's chat
template (with the assistant's header after it) where `chat` is on and the tokenizer has one; else as plain text
followed by "\\nAnswer:". `yes` and `no` are comma-separated answer words; each counts by its first token (their
probabilities summed). Read-outs: raw (that probability), calibrated (a logistic map of its log-odds fitted on the
train build: sveb.estimators.calibrate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sveb.core.config import BuildConfig
from sveb.core.errors import UsageError
from sveb.estimators.base import Context
from sveb.estimators.lm_signal import Prefix, SignalEstimator

TEMPLATE = ("Here is a math problem and the beginning of a solution to it.\n\nProblem: {question}\n\n"
            "Partial solution: {prefix}\n\nIf this solution is continued, will it reach the correct final answer? "
            "Answer Yes or No.")


def render(template: str, question: str, prefix: str) -> str:
    """The judge's question (str.replace: braces in a problem or a template are kept as they are)."""
    return template.replace("{question}", question).replace("{prefix}", prefix)


def answer_ids(first_token, words: str) -> list[int]:
    """Distinct first-token ids of the comma-separated words."""
    out: list[int] = []
    for w in (w.strip() for w in words.split(",")):
        if w:
            i = first_token(w)
            if i not in out:
                out.append(i)
    return out


def yes_log_odds(logits: np.ndarray, yes: list[int], no: list[int]) -> float:
    """log P(yes) - log P(no) from next-token logits (the softmax's normaliser cancels)."""
    z = np.asarray(logits, np.float64)

    def lse(ids):
        a = z[ids]
        return float(a.max() + np.log(np.exp(a - a.max()).sum()))
    return lse(yes) - lse(no)


def yes_probability(logits: np.ndarray, yes: list[int], no: list[int]) -> float:
    return float(1.0 / (1.0 + np.exp(-yes_log_odds(logits, yes, no))))


def judge_ids(tok, body: str, chat: bool) -> list[int]:
    """The ids the judge reads: the chat-rendered user message and the assistant's header, or the plain text."""
    from sveb.estimators.lm_read import chat_text, encode
    text = chat_text(tok, [{"role": "user", "content": body}], True) if chat else None
    if text is not None:
        return encode(tok, text, special=False)
    return encode(tok, body + "\nAnswer:", special=True)


@dataclass
class Judge(SignalEstimator):
    """model ("" = the policy), template ({question}, {prefix}), yes, no (answer words), chat (0 | 1), readout
    (raw | calibrated), C, train_build."""
    description = "a language model (the policy by default) asked if the partial solution will end correct: P(yes)"

    model: str = ""
    template: str = TEMPLATE
    yes: str = "Yes,yes"
    no: str = "No,no"
    chat: bool = True

    def load(self, build, ctx: Context) -> None:
        from sveb.estimators.lm_read import compute_dtype, encode, load_model, load_tokenizer, resolved, unescape
        from sveb.lm.checkpoints import resident
        self._template = unescape(self.template)  # the parameter stays as given: it is the stored fingerprint
        if "{prefix}" not in self._template:
            raise UsageError("-P template: must hold {prefix} (the partial solution the judge is asked about)")
        path = resolved(self.model or build.manifest.model)
        self._lm = resident(("judge", path, compute_dtype()), lambda: load_model(path))
        # the policy as judge: a stand-in model without a tokenizer reads the ids its model-free engine made
        engine = "" if self.model else BuildConfig.from_manifest(build.manifest).engine
        self._tok = load_tokenizer(path, engine)
        first = lambda w: encode(self._tok, w)[0]  # noqa: E731
        self._yes, self._no = answer_ids(first, self.yes), answer_ids(first, self.no)
        if not self._yes or not self._no or set(self._yes) & set(self._no):
            raise UsageError(f"-P yes={self.yes} no={self.no}: need distinct first tokens for yes and no")

    def ids(self, p: Prefix) -> list[int]:
        return judge_ids(self._tok, render(self._template, str(p.problem.get("question", "")), p.text), self.chat)

    def signals(self, p: Prefix) -> np.ndarray:
        from sveb.estimators.lm_read import forward, logits_of
        logits = logits_of(forward(self._lm, self.ids(p)), -1)
        return np.array([yes_log_odds(logits, self._yes, self._no)])

    def raw(self, s: np.ndarray) -> float:
        return float(1.0 / (1.0 + np.exp(-s[0])))
