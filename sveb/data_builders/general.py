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

# word -> its opposite, listed both ways where both are words a small model knows
_PAIRS = ("hot cold, up down, day night, wet dry, happy sad, black white, fast slow, tall short, empty full, boy girl, "
          "north south, east west, first last, top bottom, push pull, true false, inside outside, early late, "
          "always never, big small, open closed, light dark, old young, rich poor, hard soft, loud quiet, "
          "strong weak, thick thin, left right, in out, on off, yes no, win lose, buy sell, "
          "give take, come go, start finish, begin end, laugh cry, love hate, friend enemy, question answer, "
          "sweet sour, clean dirty, wide narrow, deep shallow, near far, high low, above below, before after, "
          "front back, enter exit, add subtract, arrive leave, awake asleep, brave afraid, cheap expensive, "
          "safe dangerous, easy difficult, remember forget, sunrise sunset, summer winter, king queen, "
          "husband wife, uncle aunt, son daughter, brother sister, alive dead, asleep awake, accept refuse, "
          "include exclude, increase decrease, maximum minimum, inhale exhale, import export, ancient modern, "
          "polite rude, noisy silent, smooth rough, sharp blunt, tight loose, wild tame, sick healthy, "
          "float sink, pass fail, lend borrow, catch throw, whisper shout, crooked straight, found lost")
OPPOSITES: dict[str, str] = {}
for _pair in _PAIRS.split(", "):
    _a, _b = _pair.split()
    OPPOSITES.setdefault(_a, _b)
    OPPOSITES.setdefault(_b, _a)
OPPOSITE = ('What is the opposite of "{w}"? Answer with one word.', 'Give the opposite of the word "{w}" in one word.',
            'Which word means the opposite of "{w}"? Answer with one word.',
            'Name the antonym of "{w}". Answer with one word.')
PLURALS = {"mouse": "mice", "child": "children", "foot": "feet", "tooth": "teeth", "man": "men",
           "woman": "women", "goose": "geese", "cat": "cats", "box": "boxes", "dog": "dogs",
           "bus": "buses", "baby": "babies", "leaf": "leaves", "knife": "knives", "person": "people",
           "ox": "oxen", "wolf": "wolves", "wife": "wives", "life": "lives", "half": "halves", "city": "cities",
           "party": "parties", "story": "stories", "lady": "ladies", "fox": "foxes", "glass": "glasses",
           "dish": "dishes", "church": "churches", "watch": "watches", "potato": "potatoes", "tomato": "tomatoes",
           "hero": "heroes", "book": "books", "car": "cars", "tree": "trees", "house": "houses", "bird": "birds",
           "apple": "apples", "chair": "chairs", "cup": "cups", "sheep": "sheep", "fish": "fish", "deer": "deer",
           "toy": "toys", "day": "days", "key": "keys", "boy": "boys", "horse": "horses", "class": "classes",
           "brush": "brushes", "bench": "benches", "loaf": "loaves", "shelf": "shelves", "thief": "thieves",
           "cherry": "cherries", "puppy": "puppies", "family": "families", "louse": "lice", "cactus": "cacti"}
PAST = {"go": "went", "see": "saw", "eat": "ate", "run": "ran", "swim": "swam", "sing": "sang", "drink": "drank",
        "write": "wrote", "take": "took", "give": "gave", "come": "came", "make": "made", "find": "found",
        "think": "thought", "buy": "bought", "bring": "brought", "catch": "caught", "teach": "taught",
        "sleep": "slept", "keep": "kept", "feel": "felt", "leave": "left", "meet": "met", "sit": "sat",
        "stand": "stood", "speak": "spoke", "break": "broke", "choose": "chose", "drive": "drove", "ride": "rode",
        "fly": "flew", "draw": "drew", "grow": "grew", "know": "knew", "throw": "threw", "blow": "blew",
        "fall": "fell", "hold": "held", "tell": "told", "sell": "sold", "win": "won", "begin": "began",
        "forget": "forgot", "get": "got", "hide": "hid", "bite": "bit", "wake": "woke", "wear": "wore",
        "tear": "tore", "steal": "stole", "freeze": "froze", "dig": "dug", "hang": "hung", "lend": "lent",
        "send": "sent", "spend": "spent", "build": "built", "lose": "lost", "pay": "paid", "say": "said",
        "walk": "walked", "jump": "jumped", "play": "played", "cook": "cooked", "paint": "painted",
        "open": "opened", "climb": "climbed", "laugh": "laughed", "dance": "danced", "clean": "cleaned"}
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
# (big unit, small unit, small units per big unit)
CONVERSIONS = [("meters", "centimeters", 100), ("hours", "minutes", 60), ("weeks", "days", 7),
               ("kilograms", "grams", 1000), ("years", "months", 12), ("minutes", "seconds", 60),
               ("days", "hours", 24), ("kilometers", "meters", 1000), ("liters", "milliliters", 1000),
               ("centuries", "years", 100), ("decades", "years", 10), ("dozens", "eggs", 12),
               ("feet", "inches", 12), ("yards", "feet", 3), ("pounds", "ounces", 16), ("gallons", "quarts", 4),
               ("dollars", "cents", 100), ("meters", "millimeters", 1000), ("fortnights", "days", 14),
               ("millennia", "years", 1000)]
CONVERT = ("How many {small} are in {k} {big}?", "{k} {big} is how many {small}?",
           "Convert {k} {big} to {small}. Answer with a number.")
WORDS = sorted(set("cat sun tree house apple river garden planet orange banana school window pencil yellow dog bird "
                   "cloud water friend rabbit table chair bottle flower mountain forest ocean island bridge castle "
                   "dragon rocket candle basket button carpet cookie dinner doctor engine farmer finger guitar "
                   "hammer jacket kitten ladder lemon letter magnet market monkey needle number pepper pillow "
                   "pocket puzzle rainbow ribbon shadow silver spider spoon stone summer sunset teacher ticket tiger "
                   "tomato turtle violin wallet winter wizard zebra anchor bakery balloon bicycle blanket cabbage "
                   "camera cherry circle coffee dolphin eagle elbow feather garlic giraffe helmet insect jungle "
                   "kettle lizard meadow muffin napkin noodle octopus parrot peanut penguin picnic pirate potato "
                   "pumpkin quiet radio robot saddle sandal season singer sister soccer squirrel statue sugar "
                   "thunder toast tunnel umbrella valley vinegar walnut whale yogurt zipper bread grape horse "
                   "music paper smile storm truck apron arrow attic badge bamboo banner barrel beach beaver "
                   "berry blossom bonnet branch breeze bucket buffalo bullet butter cactus canal canoe canyon carrot "
                   "cattle cellar cement cereal chalk cheese chimney cinema clover cobweb collar comet copper cotton "
                   "cousin coyote crayon cricket crystal cushion daisy desert dinosaur donkey dragonfly drawer "
                   "eleven falcon fence ferry fiddle flannel forest fossil fountain frog galaxy gallon glacier goose "
                   "gravel hammock harbor harvest hazel hedgehog honey hornet iceberg igloo jelly journey kayak "
                   "kennel kitchen koala lantern lettuce library lobster locket mammoth mango marble mirror mitten "
                   "moose mosquito mustard nickel nugget oasis orchard otter paddle panther pebble pelican pickle "
                   "pigeon pillar planet poppy possum puddle quilt raccoon raisin rattle reptile rhythm saddle "
                   "salmon sapphire scarf sheriff shovel sleeve slipper spinach sponge sprout stable stallion "
                   "sunflower swallow tadpole teapot thimble thistle tractor trumpet tulip tundra turnip tweezers "
                   "vacuum velvet village volcano waffle walrus weasel wheel whistle willow wombat yacht".split()))
VOWELS = "aeiou"


def _level2(rng: random.Random) -> tuple[str, str, str]:
    """A yes/no question about numbers: (question, yes|no, template)."""
    r = rng.random()
    if r < 0.25:
        x, kind = rng.randint(1, 100), rng.choice(["odd", "even"])
        yes = (x % 2 == 1) == (kind == "odd")
        return f"Is {x} an {kind} number? Answer yes or no.", "yes" if yes else "no", "parity"
    if r < 0.5:
        a, b = rng.sample(range(1, 21), 2)
        rel = rng.choice(["greater", "less"])
        yes = a > b if rel == "greater" else a < b
        return f"Is {a} {rel} than {b}? Answer yes or no.", "yes" if yes else "no", "compare"
    if r < 0.75:
        x, k = rng.randint(10, 60), rng.randint(2, 9)
        return f"Is {x} divisible by {k}? Answer yes or no.", "yes" if x % k == 0 else "no", "divisible"
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    c = a + b + rng.choice([-1, 0, 0, 1])
    return f"Is {a} + {b} equal to {c}? Answer yes or no.", "yes" if a + b == c else "no", "sum_check"


def _cyclic(rng: random.Random, names: list[str], what: str, unit: str) -> tuple[str, str, str]:
    """A week's day or a year's month k steps after or before another: (question, answer, template)."""
    n = len(names)
    i, k, after = rng.randrange(n), rng.randint(1, n - 1), rng.random() < 0.5
    j, rel = (i + k, "after") if after else (i - k, "before")
    if k == 1:
        return f"What {what} comes {rel} {names[i]}?", names[j % n], f"{'next' if after else 'previous'}_{unit}"
    return f"What {what} is {k} {unit}s {rel} {names[i]}?", names[j % n], f"{unit}s_{rel}"


def _level4(rng: random.Random) -> tuple[str, str, str]:
    """What comes next (or before) in a week, a year or the alphabet, and word forms: (question, answer, template)."""
    r = rng.random()
    if r < 0.25:
        return _cyclic(rng, DAYS, "day of the week", "day")
    if r < 0.5:
        return _cyclic(rng, MONTHS, "month", "month")
    if r < 0.6:
        i = rng.randrange(25)
        if rng.random() < 0.5:
            return (f"What letter comes after {chr(65 + i)} in the alphabet?", chr(66 + i), "next_letter")
        return f"What letter comes before {chr(66 + i)} in the alphabet?", chr(65 + i), "previous_letter"
    if r < 0.8:
        w = rng.choice(sorted(PLURALS))
        form = rng.choice(['What is the plural of the word "{w}"?', 'Write the plural form of "{w}".'])
        return form.format(w=w), PLURALS[w], "plural"
    w = rng.choice(sorted(PAST))
    form = rng.choice(['What is the past tense of the verb "{w}"?', 'Write the past tense of "{w}".'])
    return form.format(w=w), PAST[w], "past_tense"


def _level5(rng: random.Random) -> tuple[str, str, str]:
    """Counting letters of a word: (question, count, template)."""
    w, r = rng.choice(WORDS), rng.random()
    if r < 0.35:
        return f"How many letters are in the word \"{w}\"?", str(len(w)), "letters"
    if r < 0.6:
        n = sum(ch in VOWELS for ch in w)
        return f"How many vowels (a, e, i, o, u) are in the word \"{w}\"?", str(n), "vowels"
    twice = sorted({ch for ch in w if w.count(ch) > 1})
    if not twice:  # a letter that appears once would make the answer 1 every time
        return f"How many letters are in the word \"{w}\"?", str(len(w)), "letters"
    ch = rng.choice(twice)
    return f"How many times does the letter \"{ch}\" appear in the word \"{w}\"?", str(w.count(ch)), "letter_count"


def generate(level: int, rng: random.Random) -> tuple[str, str, str, str]:
    """(question, answer, answer_type, template name) for one level."""
    if level == 1:
        w = rng.choice(sorted(OPPOSITES))
        return rng.choice(OPPOSITE).format(w=w), OPPOSITES[w], "string", "opposite"
    if level == 2:
        return _typed(_level2(rng), "string")
    if level == 3:
        big, small, factor = rng.choice(CONVERSIONS)
        k = rng.randint(2, 12)
        return rng.choice(CONVERT).format(k=k, big=big, small=small), str(k * factor), "math", "convert"
    if level == 4:
        return _typed(_level4(rng), "string")
    if level == 5:
        return _typed(_level5(rng), "math")
    raise ValueError(f"unknown general level {level}")


def _typed(qat: tuple[str, str, str], kind: str) -> tuple[str, str, str, str]:
    q, a, template = qat
    return q, a, kind, template


def builtin(n: int, seed: int, split: str, **kw) -> list[dict]:  # kw: ask, exclude (sample_builtin)
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
