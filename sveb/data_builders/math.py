"""The math domain: competition-style problems with a single final answer, graded by math-verify.

builtin: seeded one- and two-step problems unlike the number domain's additions (products,
differences, one-unknown equations, halves and doubles), sized for small models.
hub: OpenR1-Math-220k (`default`), fields `problem` and `answer`.
"""

from __future__ import annotations

import random

from sveb.data_builders import Domain, make_problem, sample_builtin
from sveb.data_builders.boxed import require_text

DOMAIN = Domain("math", frozenset({"math"}), assumed_tokens=(150, 650), verifier="default", order=1)
HUB_ID, HUB_CONFIG, HUB_SPLIT = "open-r1/OpenR1-Math-220k", "default", "train"

# level -> weight in the default mix; roughly easiest first for SmolLM2-135M-Instruct
LEVELS = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}

SYSTEM = ("Solve the problem step by step, writing each calculation. "
          "End with the final answer in the form \\boxed{answer}.")

META_KEYS = ("problem_type", "question_type", "source", "uuid")


def generate(level: int, rng: random.Random) -> tuple[str, int, str]:
    """(question, answer, template name) for one level."""
    if level == 1:
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        return f"What is {a} × {b}?", a * b, "product"
    if level == 2:
        a, b = rng.randint(10, 19), rng.randint(1, 9)
        return f"What is {a} - {b}?", a - b, "difference"
    if level == 3:
        x, b = rng.randint(1, 9), rng.randint(1, 9)
        if rng.random() < 0.5:
            return f"If x + {b} = {x + b}, what is x?", x, "x_plus"
        return f"If x - {b} = {x}, what is x?", x + b, "x_minus"
    if level == 4:
        k = rng.randint(1, 20)
        if rng.random() < 0.5:
            return f"What is half of {2 * k}?", k, "half"
        return f"What is double {k}?", 2 * k, "double"
    if level == 5:
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 9)
        return f"What is {a} × {b} + {c}?", a * b + c, "product_plus"
    raise ValueError(f"unknown math level {level}")


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: warn, ask (sample_builtin)
    def make(level: int, rng: random.Random) -> dict:
        q, a, template = generate(level, rng)
        return make_problem("math", "builtin", q, str(a), "math", meta={"level": level, "template": template})
    return sample_builtin("math", n, seed, split, LEVELS, make, **kw)  # ~900 problems in all


def from_record(rec: dict) -> dict:
    q = require_text(rec, "problem")
    if isinstance(rec.get("answer"), int) and not isinstance(rec.get("answer"), bool):
        rec = {**rec, "answer": str(rec["answer"])}  # an int is exact; floats and bools are not trusted
    a = require_text(rec, "answer")
    meta = {k: rec[k] for k in META_KEYS if isinstance(rec.get(k), str)}
    return make_problem("math", HUB_ID, q, a, "math", meta=meta)


def prompt(problem: dict) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": problem["question"]}]
