"""The general domain: short-answer questions of mixed answer types (number, yes/no, word, letter).

builtin: seeded questions from templates (opposites, yes/no about numbers, unit conversions,
what comes next in a week or year, plurals, letter counts); answer_type per row.
hub: WebInstruct-verified: `question`, `answer`, `answer_type` mapped to math | choice | string
(graded by rules, not by the LLM judge the paper's code used); `category`, `difficulty` into meta.
"""

from __future__ import annotations

import random
import re

from sveb.data_builders import Domain, SkipRow, make_problem, sample_builtin
from sveb.data_builders.boxed import choice_letter, option_letters, require_text

DOMAIN = Domain("general", frozenset({"math", "choice", "string"}), assumed_tokens=(180, 400), verifier="general",
                order=3)
HUB_ID, HUB_CONFIG, HUB_SPLIT = "TIGER-Lab/WebInstruct-verified", None, "train"  # single default config

LEVELS = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}

SYSTEMS = {
    "math": "Solve the problem step by step. End with the final answer in the form \\boxed{answer}.",
    "string": "Answer the question. Think briefly, then give a short final answer in the form \\boxed{answer}.",
    "choice": ("Answer the multiple-choice question. Think briefly, then end with "
               "\"The answer is (X)\", where X is the letter of the correct option."),
}

# WebInstruct-verified answer_type (lower-cased) -> ours; "multiple choice" is decided per row
TYPE_MAP = {t: "math" for t in ("integer", "float", "expression", "fraction", "percentage", "list", "matrix")}
TYPE_MAP.update({"boolean": "string", "string": "string", "multiple choice": "choice"})
_LEADING_LETTER = re.compile(r"^\(?([A-J])[).:]\s+\S")  # "B. 23%", "(B) 23%"

OPPOSITES = {
    "hot": "cold", "cold": "hot", "up": "down", "down": "up", "day": "night", "night": "day",
    "wet": "dry", "dry": "wet", "happy": "sad", "sad": "happy", "black": "white", "white": "black",
    "fast": "slow", "slow": "fast", "tall": "short", "empty": "full", "full": "empty",
    "boy": "girl", "girl": "boy", "north": "south", "south": "north", "east": "west", "west": "east",
    "first": "last", "top": "bottom", "bottom": "top", "push": "pull", "pull": "push",
    "true": "false", "false": "true", "inside": "outside", "outside": "inside",
    "early": "late", "late": "early", "always": "never", "never": "always",
}
PLURALS = {"mouse": "mice", "child": "children", "foot": "feet", "tooth": "teeth", "man": "men",
           "woman": "women", "goose": "geese", "cat": "cats", "box": "boxes", "dog": "dogs",
           "bus": "buses", "baby": "babies", "leaf": "leaves", "knife": "knives"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
# (big unit, small unit, small units per big unit)
CONVERSIONS = [("meters", "centimeters", 100), ("hours", "minutes", 60), ("weeks", "days", 7),
               ("kilograms", "grams", 1000), ("years", "months", 12), ("minutes", "seconds", 60)]
WORDS = ["cat", "sun", "tree", "house", "apple", "river", "garden", "planet", "orange", "banana",
         "school", "window", "pencil", "yellow", "dog", "bird", "cloud", "water", "friend", "rabbit"]


def generate(level: int, rng: random.Random) -> tuple[str, str, str, str]:
    """(question, answer, answer_type, template name) for one level."""
    if level == 1:
        w = rng.choice(sorted(OPPOSITES))
        return f"What is the opposite of \"{w}\"? Answer with one word.", OPPOSITES[w], "string", "opposite"
    if level == 2:
        if rng.random() < 0.5:
            x, kind = rng.randint(1, 50), rng.choice(["odd", "even"])
            yes = (x % 2 == 1) == (kind == "odd")
            return f"Is {x} an {kind} number? Answer yes or no.", "yes" if yes else "no", "string", "parity"
        a, b = rng.sample(range(1, 21), 2)
        rel = rng.choice(["greater", "less"])
        yes = a > b if rel == "greater" else a < b
        return f"Is {a} {rel} than {b}? Answer yes or no.", "yes" if yes else "no", "string", "compare"
    if level == 3:
        big, small, factor = rng.choice(CONVERSIONS)
        k = rng.randint(2, 9)
        return f"How many {small} are in {k} {big}?", str(k * factor), "math", "convert"
    if level == 4:
        r = rng.random()
        if r < 0.4:
            i = rng.randrange(7)
            return f"What day of the week comes after {DAYS[i]}?", DAYS[(i + 1) % 7], "string", "next_day"
        if r < 0.7:
            i = rng.randrange(12)
            return f"What month comes after {MONTHS[i]}?", MONTHS[(i + 1) % 12], "string", "next_month"
        w = rng.choice(sorted(PLURALS))
        return f"What is the plural of the word \"{w}\"?", PLURALS[w], "string", "plural"
    if level == 5:
        w = rng.choice(WORDS)
        return f"How many letters are in the word \"{w}\"?", str(len(w)), "math", "letters"
    raise ValueError(f"unknown general level {level}")


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: warn, ask (sample_builtin)
    def make(level: int, rng: random.Random) -> dict:
        q, a, kind, template = generate(level, rng)
        return make_problem("general", "builtin", q, a, kind, meta={"level": level, "template": template})
    return sample_builtin("general", n, seed, split, LEVELS, make, **kw)


def from_record(rec: dict) -> dict:
    q = require_text(rec, "question")
    a = require_text(rec, "answer")
    src_type = require_text(rec, "answer_type")
    kind = TYPE_MAP.get(src_type.lower())
    if kind is None:
        raise SkipRow(f"unsupported answer_type {src_type}")
    meta = {k: rec[k] for k in ("id", "category", "difficulty") if isinstance(rec.get(k), (str, int, float))}
    meta["source_answer_type"] = src_type
    if kind == "choice":
        m = _LEADING_LETTER.match(a)
        letter = choice_letter(a) or (m.group(1) if m else None)
        options = option_letters(q)
        if letter and letter in options:
            a = letter
        elif letter:  # a letter whose option the question does not list cannot be graded
            raise SkipRow("multiple-choice gold letter not among the question's options")
        else:  # the gold is the option's text: grade it as a short string
            kind = "string"
    return make_problem("general", HUB_ID, q, a, kind, meta=meta)


def prompt(problem: dict) -> list[dict]:
    system = SYSTEMS.get(problem["answer_type"], SYSTEMS["string"])
    return [{"role": "system", "content": system}, {"role": "user", "content": problem["question"]}]
