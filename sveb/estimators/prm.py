"""`prm`: a process reward model read as a value estimator at the cut. The prefix is written the way the PRM's
format wants it (sveb.estimators.prm_formats: steps, separators, chat template) and the score is read at the end of
its last step; one forward pass per state, no sampling, nothing past the cut (held-out safe by construction).
The model comes through SVEB's model resolution (`model`: a directory or a hub id; it must be given). Formats that
ship their head as the model's own code (two-way with an auto_map, value-head) are loaded with trust_remote_code.
Read-outs: raw (the PRM's own probability of "correct" at the last step), calibrated (a logistic map of its
log-odds fitted on the train build's states and references: sveb.estimators.calibrate).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sveb.core.errors import UsageError
from sveb.estimators import prm_formats as F
from sveb.estimators.base import Context
from sveb.estimators.lm_signal import Prefix, SignalEstimator

KIND = {"step-tag": "causal", "token-class": "token", "value-head": "remote", "seq-class": "sequence"}
SEP = {"two-way": "<extra_0>", "token-class": "\n", "value-head": "\n"}


def value_of(out):
    """A value-head model's per-position values: its output's `value`/`values`, or the last element of a tuple."""
    for name in ("value", "values"):
        if getattr(out, name, None) is not None:
            return getattr(out, name)
    if isinstance(out, (tuple, list)):
        return out[-1]
    return out


@dataclass
class PRM(SignalEstimator):
    """model (a PRM's directory or hub id), format (auto | step-tag | two-way | token-class | value-head |
    seq-class), split (the policy's step separator), cut (partial | step), sep ("" = the format's), tag, good, bad
    (step-tag), system (two-way), readout (raw | calibrated), C, train_build."""
    description = "a process reward model's score at the prefix's last step (Math-Shepherd, Qwen, TRL, Skywork formats)"

    model: str = ""
    format: str = "auto"
    split: str = "\n\n"
    cut: str = "partial"
    sep: str = ""
    tag: str = "ки"
    good: str = "+"
    bad: str = "-"
    system: str = F.QWEN_SYSTEM

    def load(self, build, ctx: Context) -> None:
        from sveb.estimators.lm_read import compute_dtype, load_model, load_tokenizer, resolved, unescape
        from sveb.lm.checkpoints import resident
        self._split = unescape(self.split)  # the parameters stay as given: they are the stored fingerprint
        if not self.model:
            raise UsageError("prm: name the process reward model with -P model=<directory or hub id>")
        if self.cut not in F.CUTS:
            raise UsageError(f"-P cut={self.cut}: expected one of {', '.join(F.CUTS)}")
        path = resolved(self.model)
        config = json.loads((Path(path) / "config.json").read_text())
        fmt = F.detect(config) if self.format == "auto" else self.format
        if fmt not in F.FORMATS:
            raise UsageError(f"-P format={self.format}: expected auto or one of {', '.join(F.FORMATS)}")
        kind = KIND.get(fmt) or ("remote" if config.get("auto_map") else "token")
        if kind == "remote" and not config.get("auto_map"):
            raise UsageError(f"prm: format {fmt} reads the model's own code, and {self.model}'s config.json has no "
                             f"auto_map (install its authors' package and save the model with its code)")
        self._fmt, self._kind = fmt, kind
        self._lm = resident(("prm", path, kind, compute_dtype()), lambda: load_model(path, kind))
        self._tok = load_tokenizer(path, trust_remote_code=kind == "remote")
        self._sep = unescape(self.sep) or SEP.get(fmt, "")
        if fmt == "step-tag":
            from sveb.estimators.lm_read import encode
            ids = encode(self._tok, f"{self.good} {self.bad}")
            if len(ids) != 2:
                raise UsageError(f"-P good={self.good} bad={self.bad}: each must be one token of the PRM's tokenizer")
            self._good, self._bad = ids
        self._diag_fmt = {"format": fmt}

    def ids(self, p: Prefix) -> tuple[list[int], int]:
        """The formatted prefix and the position its score is read at."""
        q, steps = str(p.problem.get("question", "")), F.steps_of(p.text, self._split, self.cut)
        if self._fmt == "step-tag":
            return F.step_tag(self._tok, q, steps, self.tag)
        if self._fmt == "two-way":
            return F.two_way(self._tok, q, steps, self._sep, self.system)
        if self._fmt == "token-class":
            return F.token_class(self._tok, q, steps, self._sep)
        if self._fmt == "value-head":
            return F.value_head(self._tok, q, steps, self._sep)
        return F.seq_class(self._tok, q, steps, self._split or "\n\n")

    def signals(self, p: Prefix) -> np.ndarray:
        from sveb.estimators.lm_read import forward, logits_of
        ids, pos = self.ids(p)
        out = forward(self._lm, ids)
        if self._fmt == "step-tag":
            return np.array([F.pair_log_odds(logits_of(out, pos), self._good, self._bad)])
        if self._fmt == "value-head":
            v = value_of(out)[0]
            return np.array([F.head_log_odds(v[pos].float().cpu().numpy())])
        if self._fmt == "seq-class":
            return np.array([F.head_log_odds(out.logits[0].float().cpu().numpy())])
        return np.array([F.head_log_odds(logits_of(out, pos))])

    def raw(self, s: np.ndarray) -> float:
        return F.sigmoid(s[0])

    def diagnostics(self) -> dict[str, object]:
        return {**getattr(self, "_diag_fmt", {}), **super().diagnostics()}
