"""The number domain: arithmetic word problems whose solutions pass through intermediate numbers.

builtin: seeded procedural problems in difficulty levels sized for small models.
hub: DAPO-Math-17k (processed, `en`); the paper keeps problems whose correct responses hold >= 4
distinct numbers found neither in the question nor in the answer (applied after sampling, see
`novel_numbers`).
"""

from __future__ import annotations

import random
import re

from sveb.data_builders import Domain, SkipRow, make_problem, sample_builtin

DOMAIN = Domain("number", frozenset({"math"}), assumed_tokens=(120, 450), verifier="default", order=0,
                novel_numbers=4)  # the paper's filter on DAPO-Math (the docstring above)
HUB_ID, HUB_CONFIG, HUB_SPLIT = "open-r1/DAPO-Math-17k-Processed", "en", "train"

NAMES = ["Tom", "Ana", "Li", "Sam", "Maya", "Ben", "Zoe", "Omar", "Kim", "Lea"]
ITEMS = ["apples", "pens", "coins", "books", "cards", "stickers", "marbles", "cookies"]

# level -> weight in the default mix. Measured on SmolLM2-135M-Instruct (T=0.7, 8 problems x 16
# samples, benchmarks/number_levels.py): mean accuracy 0.43 / 0.07 / 0.08 / 0.11 / 0.02 for levels 1-5,
# share of problems inside [0.1, 0.8] 1.00 / 0.12 / 0.38 / 0.50 / 0.00. Level 5 stays available
# (number.generate) for stronger models but is left out of the default mix.
LEVELS = {1: 2.0, 2: 1.0, 3: 1.5, 4: 2.0, 5: 0.0}

# A worked example makes the small model write one calculation per line (intermediate numbers).
SYSTEM = ("Solve the problem step by step, one calculation per line, then give the final answer as "
          "\\boxed{answer}.\nExample:\nQuestion: Sam has 4 pens. Sam gets 3 more pens. Sam gives away 2 pens. "
          "How many pens does Sam have now?\nAnswer: 4 + 3 = 7. 7 - 2 = 5. The answer is \\boxed{5}.")


def _chain(rng: random.Random, terms: int) -> tuple[str, int, list[int]]:
    nums = [rng.randint(1, 9) for _ in range(terms)]
    partial, total = [], 0
    for x in nums:
        total += x
        partial.append(total)
    return f"What is {' + '.join(map(str, nums))}?", total, partial[1:-1]


def _word(rng: random.Random, steps: int) -> tuple[str, int, list[int]]:
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    total = rng.randint(2, 9)
    text = [f"{name} has {total} {item}."]
    inter = []
    for s in range(steps):
        if s % 2 == 0 or total < 3:
            k = rng.randint(1, 9)
            text.append(f"{name} gets {k} more {item}.")
            total += k
        else:
            k = rng.randint(1, total - 1)
            text.append(f"{name} gives away {k} {item}.")
            total -= k
        inter.append(total)
    text.append(f"How many {item} does {name} have now?")
    return " ".join(text), total, inter[:-1]


# Level 1 is one sum of two digits (81 of them), asked in several wordings so that the level fills every seed slot
# (sveb.data_builders.seeds); the other levels have room enough in their numbers.
SUM2 = ("What is {a} + {b}?", "What is {a} plus {b}?", "What is the sum of {a} and {b}?", "Add {a} and {b}.",
        "Calculate {a} + {b}.", "Compute {a} + {b}.", "Find {a} + {b}.", "What do you get when you add {a} and {b}?",
        "What number is {a} + {b}?", "Work out {a} + {b}.", "What is {a} added to {b}?")


def generate(level: int, rng: random.Random) -> tuple[str, int, list[int]]:
    """(question, answer, intermediate values of a worked solution) for one level."""
    if level == 1:
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return rng.choice(SUM2).format(a=a, b=b), a + b, []
    if level == 2:
        return _chain(rng, 3)
    if level == 3:
        return _word(rng, 1)
    if level == 4:
        return _word(rng, 2)
    if level == 5:
        return _chain(rng, 5)
    raise ValueError(f"unknown number level {level}")


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: ask, exclude (sample_builtin)
    def make(level: int, rng: random.Random) -> dict:
        q, a, inter = generate(level, rng)
        return make_problem("number", "builtin", q, str(a), "math", meta={"level": level, "intermediate": inter})
    return sample_builtin("number", n, seed, split, LEVELS, make, **kw)


def from_record(rec: dict) -> dict:
    q, a = rec.get("prompt"), rec.get("solution")
    if not isinstance(q, str) or not q.strip():
        raise SkipRow("missing prompt")
    if a is None or not str(a).strip():
        raise SkipRow("missing solution")
    return make_problem("number", HUB_ID, q.strip(), str(a).strip(), "math")


NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def _numbers(text: str) -> set[str]:
    out = set()
    for m in NUMBER.findall(text):
        x = m.replace(",", "")
        if "." in x:
            x = x.rstrip("0").rstrip(".")
        out.add(x)
    return out


def novel_numbers(response: str, question: str, answer: str) -> set[str]:
    """Distinct numbers of a response found neither in the question nor in the answer."""
    return _numbers(response) - _numbers(question) - _numbers(answer)


def passes_milestone_filter(problem: dict, texts: list[str], rewards: list[float], min_novel: int) -> bool:
    """The paper's number-subset filter: some correct response holds >= min_novel novel numbers."""
    return any(r > 0 and len(novel_numbers(t, problem["question"], problem["answer"])) >= min_novel
               for t, r in zip(texts, rewards))


def prompt(problem: dict) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": problem["question"]}]
