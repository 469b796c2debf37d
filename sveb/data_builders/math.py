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


# Phrasings of one operation: a level's problems are its arithmetic in several wordings, so each level holds enough
# distinct questions for every seed slot (sveb.data_builders.seeds) while keeping its one operation.
PRODUCT = ("What is {a} × {b}?", "What is {a} times {b}?", "Multiply {a} by {b}.",
           "What is the product of {a} and {b}?", "Compute {a} × {b}.")
DIFFERENCE = ("What is {a} - {b}?", "What is {a} minus {b}?", "Subtract {b} from {a}.", "Compute {a} - {b}.")
X_PLUS = ("If x + {b} = {c}, what is x?", "If {b} + x = {c}, what is x?", "Solve for x: x + {b} = {c}.")
X_MINUS = ("If x - {b} = {c}, what is x?", "Solve for x: x - {b} = {c}.", "What number minus {b} equals {c}?")
HALF = ("What is half of {a}?", "What is {a} divided by 2?", "If you split {a} into two equal parts, how big is each?",
        "What is one half of {a}?")
DOUBLE = ("What is double {a}?", "What is twice {a}?", "What is {a} times 2?", "What is {a} doubled?")
PRODUCT_PLUS = ("What is {a} × {b} + {c}?", "What is {c} + {a} × {b}?")


def generate(level: int, rng: random.Random) -> tuple[str, int, str]:
    """(question, answer, template name) for one level."""
    if level == 1:
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return rng.choice(PRODUCT).format(a=a, b=b), a * b, "product"
    if level == 2:
        a, b = rng.randint(10, 29), rng.randint(1, 9)
        return rng.choice(DIFFERENCE).format(a=a, b=b), a - b, "difference"
    if level == 3:
        x, b = rng.randint(1, 12), rng.randint(1, 9)
        if rng.random() < 0.5:
            return rng.choice(X_PLUS).format(b=b, c=x + b), x, "x_plus"
        return rng.choice(X_MINUS).format(b=b, c=x), x + b, "x_minus"
    if level == 4:
        k = rng.randint(1, 75)
        if rng.random() < 0.5:
            return rng.choice(HALF).format(a=2 * k), k, "half"
        return rng.choice(DOUBLE).format(a=k), 2 * k, "double"
    if level == 5:
        a, b, c = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 9)
        return rng.choice(PRODUCT_PLUS).format(a=a, b=b, c=c), a * b + c, "product_plus"
    raise ValueError(f"unknown math level {level}")


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: ask, exclude (sample_builtin)
    def make(level: int, rng: random.Random) -> dict:
        q, a, template = generate(level, rng)
        return make_problem("math", "builtin", q, str(a), "math", meta={"level": level, "template": template})
    return sample_builtin("math", n, seed, split, LEVELS, make, **kw)


def from_record(rec: dict) -> dict:
    q = require_text(rec, "problem")
    if isinstance(rec.get("answer"), int) and not isinstance(rec.get("answer"), bool):
        rec = {**rec, "answer": str(rec["answer"])}  # an int is exact; floats and bools are not trusted
    a = require_text(rec, "answer")
    meta = {k: rec[k] for k in META_KEYS if isinstance(rec.get(k), str)}
    return make_problem("math", HUB_ID, q, a, "math", meta=meta)


def prompt(problem: dict) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": problem["question"]}]
