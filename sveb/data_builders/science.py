"""The science domain: multiple-choice (and some free-answer) science questions.

builtin: seeded multiple-choice questions from a small fact table (states of matter, animal classes,
units, planets, everyday physics and biology), with 2, 3 or 4 options; the gold letter is shuffled.
hub: Mixture-of-Thoughts (`science`): the question is the user turn, the gold answer the last
\\boxed{} of the assistant turn; a single letter whose option the question lists is a choice answer.
"""

from __future__ import annotations

import json
import random

from sveb.data_builders import Domain, SkipRow, make_problem, sample_builtin
from sveb.data_builders.boxed import LETTERS, choice_letter, last_boxed, option_letters, require_text

DOMAIN = Domain("science", frozenset({"choice", "math"}), assumed_tokens=(250, 500), verifier="general", order=2)
HUB_ID, HUB_CONFIG, HUB_SPLIT = "open-r1/Mixture-of-Thoughts", "science", "train"

# level -> weight; the level is the number of options minus one (chance 1/2, 1/3, 1/4)
LEVELS = {1: 1.0, 2: 1.0, 3: 2.0}

SYSTEMS = {
    "choice": ("Answer the multiple-choice question. Think briefly, then end with "
               "\"The answer is (X)\", where X is the letter of the correct option."),
    "math": ("Solve the problem step by step. "
             "End with the final answer in the form \\boxed{answer}."),
}

# stem -> class -> members; members of different classes of one stem never overlap (tested)
CLASSES = {
    "Which of these is {} at room temperature?": {
        "a gas": ["oxygen", "nitrogen", "helium", "hydrogen", "carbon dioxide", "neon"],
        "a liquid": ["water", "milk", "olive oil", "vinegar", "orange juice", "gasoline"],
        "a solid": ["iron", "copper", "gold", "salt", "sand", "wood", "diamond"],
    },
    "Which of these animals is {}?": {
        "a mammal": ["dog", "whale", "dolphin", "bat", "horse", "elephant", "lion", "mouse"],
        "a bird": ["eagle", "penguin", "owl", "sparrow", "duck", "parrot", "ostrich"],
        "a fish": ["shark", "salmon", "tuna", "trout", "goldfish", "cod"],
        "a reptile": ["snake", "lizard", "crocodile", "turtle", "iguana"],
        "an amphibian": ["frog", "toad", "salamander", "newt"],
        "an insect": ["ant", "bee", "butterfly", "beetle", "mosquito", "grasshopper"],
    },
    "Which unit is used to measure {}?": {
        "length": ["meter", "kilometer", "centimeter", "inch", "mile"],
        "mass": ["kilogram", "gram", "tonne"],
        "time": ["second", "minute", "hour"],
        "temperature": ["kelvin", "degree Celsius"],
        "electric current": ["ampere"],
        "force": ["newton"],
        "energy": ["joule", "calorie"],
        "power": ["watt"],
        "volume": ["liter", "milliliter"],
        "frequency": ["hertz"],
    },
}

PLANETS = ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune"]
GASES = ["oxygen", "nitrogen", "helium", "carbon dioxide", "hydrogen"]
TEMPS = ["0 °C", "37 °C", "50 °C", "100 °C", "200 °C"]
LEGS = ["two", "four", "six", "eight", "ten"]
ORGANS = ["the heart", "the lungs", "the stomach", "the brain", "the liver"]
# (question, correct option, option pool); the pool holds no other correct option
FACTS = [
    ("Which planet is closest to the Sun?", "Mercury", PLANETS),
    ("Which planet is the largest in our solar system?", "Jupiter", PLANETS),
    ("Which planet is known as the Red Planet?", "Mars", PLANETS),
    ("Which planet is farthest from the Sun?", "Neptune", PLANETS),
    ("Which planet do humans live on?", "Earth", PLANETS),
    ("Which planet has the hottest surface in our solar system?", "Venus", PLANETS),
    ("What force pulls objects toward the ground?", "gravity",
     ["gravity", "magnetism", "friction", "air resistance", "static electricity"]),
    ("Which gas do plants take in from the air to make food?", "carbon dioxide", GASES),
    ("Which gas do humans need to breathe in to stay alive?", "oxygen", GASES),
    ("At what temperature does pure water boil at sea level?", "100 °C", TEMPS),
    ("At what temperature does pure water freeze at sea level?", "0 °C", TEMPS),
    ("How many legs does an insect have?", "six", LEGS),
    ("How many legs does a spider have?", "eight", LEGS),
    ("Which organ pumps blood around the body?", "the heart", ORGANS),
    ("Which organ do humans use to breathe?", "the lungs", ORGANS),
    ("What is H2O more commonly called?", "water", ["water", "salt", "sugar", "air", "oil"]),
    ("What is the closest star to the Earth?", "the Sun", ["the Sun", "Sirius", "Polaris", "Vega", "Betelgeuse"]),
    ("What does a thermometer measure?", "temperature", ["temperature", "weight", "length", "time", "speed"]),
    ("Which part of a plant takes in water from the soil?", "the roots",
     ["the roots", "the leaves", "the flowers", "the seeds", "the petals"]),
]


def format_question(stem: str, options: list[str]) -> str:
    return stem + "\n" + "\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(options))


def generate(level: int, rng: random.Random) -> tuple[str, str, str, str]:
    """(question, gold letter, correct option text, stem) with level + 1 options."""
    k = level + 1
    if rng.random() < 0.5:
        template = rng.choice(sorted(CLASSES))
        classes = CLASSES[template]
        cls = rng.choice(sorted(classes))
        correct = rng.choice(classes[cls])
        others = sorted(m for c, ms in classes.items() if c != cls for m in ms)
        stem = template.format(cls)
    else:
        stem, correct, pool = rng.choice(FACTS)
        others = [o for o in pool if o != correct]
    options = rng.sample(others, k - 1) + [correct]
    rng.shuffle(options)
    gold = LETTERS[options.index(correct)]
    return format_question(stem, options), gold, correct, stem


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: ask, exclude (sample_builtin)
    def make(level: int, rng: random.Random) -> dict:
        q, gold, correct, stem = generate(level, rng)
        options = {line[1]: line[4:] for line in q.splitlines()[1:]}  # "(A) text" lines, as named sources store them
        return make_problem("science", "builtin", q, gold, "choice",
                            meta={"level": level, "stem": stem, "correct": correct, "options": options})
    return sample_builtin("science", n, seed, split, LEVELS, make, **kw)


def _turn(messages: list, role: str, last: bool) -> dict:
    turns = [m for m in messages if isinstance(m, dict) and m.get("role") == role]
    if not turns:
        raise SkipRow(f"no {role} turn")
    return turns[-1] if last else turns[0]


def from_record(rec: dict) -> dict:
    messages = rec.get("messages")
    if isinstance(messages, str):  # some exports store the list as a JSON string
        try:
            messages = json.loads(messages)
        except json.JSONDecodeError:
            raise SkipRow("messages is not valid JSON") from None
    if not isinstance(messages, (list, tuple)):
        raise SkipRow("missing messages")
    question = require_text(_turn(messages, "user", last=False), "content", "user turn")
    reply = require_text(_turn(messages, "assistant", last=True), "content", "assistant turn")
    boxed = last_boxed(reply)
    if boxed is None:
        raise SkipRow("no \\boxed answer in the assistant turn")
    if not boxed:
        raise SkipRow("empty \\boxed answer")
    meta = {"source": rec["source"]} if isinstance(rec.get("source"), str) else {}
    letter, options = choice_letter(boxed), option_letters(question)
    if letter and letter in options:
        return make_problem("science", HUB_ID, question, letter, "choice", meta=meta)
    if letter and len(options) >= 2:  # a letter the options do not list: the row is inconsistent
        raise SkipRow("gold letter not among the options")
    return make_problem("science", HUB_ID, question, boxed, "math", meta=meta)


def prompt(problem: dict) -> list[dict]:
    system = SYSTEMS.get(problem["answer_type"], SYSTEMS["math"])
    return [{"role": "system", "content": system}, {"role": "user", "content": problem["question"]}]
