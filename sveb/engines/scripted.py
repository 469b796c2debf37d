"""A deterministic stand-in for a policy LLM, for unit tests.

Tokens are characters. For a question "What is a + b ...?" the policy writes a line of coin flips
("steps: 1 0 1 ...") and then "\\boxed{gold}" when at least half the flips are 1, else a wrong
answer. Each flip is 1 with a probability fixed per question, so the true value of any prefix is a
binomial tail that tests can compute exactly. Continuations read the flips already in the prefix.
With `loop_probability` q > 0 (off by default), after each flip the policy enters, with probability q,
a loop that writes LOOP until the budget cuts it off (graded wrong); a prefix holding LOOP loops on.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sveb.core.config import SamplingConfig
from sveb.engines.base import Completion, Request

ASSISTANT = "<|assistant|>"
LOOP = "~"  # written forever once the policy loops
STEPS = "steps: "


def after_flip(k: int) -> int:
    """Response index of the character after flip k (1-based): where a loop entered after flip k starts."""
    return len(STEPS) + 2 * k - 1


class CharTokenizer:
    eos_token_id = 0

    def encode_chat(self, messages: list[dict]) -> list[int]:
        return self.encode(self.render_chat(messages))

    def render_chat(self, messages: list[dict]) -> str:
        return "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages) + ASSISTANT

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


def flip_probability(question: str) -> float:
    h = int(hashlib.sha256(question.encode()).hexdigest()[:8], 16)
    return 0.2 + 0.6 * (h % 1000) / 1000


def gold_of(question: str) -> int:
    m = re.search(r"What is ([\d +]+)\?", question)
    return sum(int(x) for x in m.group(1).split("+")) if m else 0


def render(flips: list[int], gold: int, n_flips: int) -> str:
    answer = gold if sum(flips) * 2 >= n_flips else gold + 1
    return "steps: " + " ".join(map(str, flips)) + f". The answer is \\boxed{{{answer}}}."


@dataclass(frozen=True)
class Fault:
    """A process killed once, mid-shard, for fault tests: at this engine's `at`-th generate call of kind
    `desc`, unless `marker` exists (it is created first, so a restarted worker goes on). The engine's own
    process dies (a worker lost mid-shard); with `pid_file`, the process named there dies first (the driver)."""
    desc: str
    at: int
    marker: str
    pid_file: str | None = None

    def strike(self) -> None:
        if os.path.exists(self.marker):
            return
        Path(self.marker).write_text(str(os.getpid()))
        if self.pid_file:
            os.kill(int(Path(self.pid_file).read_text()), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


class ScriptedEngine:
    fingerprint = "scripted"
    uses_model = False   # characters are its tokens: no --model weights, no model tokenizer
    own_tokenizer = CharTokenizer  # what reads the ids of its builds (a stand-in model has no tokenizer)

    @classmethod
    def from_options(cls, o) -> ScriptedEngine:
        return cls()   # deterministic: the seeds are the requests', the model is not read

    def __init__(self, n_flips: int = 8, fault: Fault | None = None, trace: str | None = None,
                 loop_probability: float = 0.0, flip_shift: float = 0.0):
        self.tokenizer = self.own_tokenizer()
        self.n_flips, self.loop_probability = n_flips, loop_probability
        self.flip_shift = flip_shift  # another policy: every flip probability moved by this much (clipped to [0, 1])
        self.calls: list[int] = []   # number of requests per generate call (tests inspect it)
        self.fault, self.trace, self._seen = fault, trace, {}

    def _complete(self, text: str, seed: int, budget: int) -> str:
        head, _, so_far = text.rpartition(ASSISTANT)
        if LOOP in so_far:
            return LOOP * (budget + 1)
        question = head.split("<|user|>")[-1].strip()
        body = so_far[len(STEPS):].split(".")[0] if so_far.startswith(STEPS) else ""
        done = [int(c) for c in body if c in "01"]  # flips are one character: never cut
        rng = random.Random(seed)
        p = min(1.0, max(0.0, flip_probability(question) + self.flip_shift))
        flips = done + [int(rng.random() < p) for _ in range(self.n_flips - len(done))]
        full = render(flips, gold_of(question), self.n_flips)
        if self.loop_probability > 0:  # drawn after the flips, so the flips are those of q = 0
            pending = [after_flip(k) for k in range(1, self.n_flips + 1) if after_flip(k) >= len(so_far)]
            start = next((i for i in pending if rng.random() < self.loop_probability), None)
            if start is not None:
                full = full[:start] + LOOP * (budget + len(so_far) + 1 - start)
        if not full.startswith(so_far):
            raise AssertionError(f"scripted prefix diverged: {so_far!r}")
        return full[len(so_far):]

    def generate(self, requests: Sequence[Request], params: SamplingConfig, desc: str = "") -> list[Completion]:
        self.calls.append(len(requests))
        if self.trace:  # which process served which call: tests of distributed builds read it
            with open(self.trace, "a") as f:
                f.write(f"{os.getpid()} {desc} {len(requests)}\n")
        n = self._seen[desc] = self._seen.get(desc, -1) + 1
        if self.fault and self.fault.desc == desc and self.fault.at == n:
            self.fault.strike()
        out = []
        for r in requests:
            text = self.tokenizer.decode(r.prompt_token_ids)
            full = self._complete(text, r.seed, r.budget(params))
            cont = full[: r.budget(params)]
            ids = tuple(ord(c) for c in cont)
            out.append(Completion(ids, "stop" if cont == full else "length"))
        return out
