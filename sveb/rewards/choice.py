"""Multiple-choice answers: find the response's final option and compare it with the gold letter.

The grader knows the options (letter -> text, from the problem's meta or parsed from the question),
so an answer given by content ("... the answer is Liquid", B = Liquid) counts as that option.
Every place the response names an option is a hit, with a strength:
  strong: \\boxed{B}; "the answer is (B)" / "Answer: B" / "the correct one is D" followed by a
          letter or an option's text; "option B is correct";
  weak:   a formatted letter mentioned anywhere ("(C)", "C)", a line starting "C."), "it is B",
          a last sentence that is exactly an option's text.
"A"/"I" followed by a plain word is an article/pronoun, not a letter ("Answer: A mammal ...").
The LAST strong hit wins; without one, the last weak hit ("Answer: A mammal ... So (C)" -> C).
Settling after dismissals is strong too: "I'll go with C", "I'm going with B", "settle on D", "it must
be D", "Must be C.", "C it is", and a retraction's replacement ("The answer is A... no wait, B",
"Answer: A, no, B"); "So D." at a sentence end is weak. An anchor that is negated ("the answer can't
be A") or whose letter starts a clause about it ("I'd say A is wrong", "No, (A) is wrong") names no choice.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sveb.rewards.final import braced

LETTERS = "ABCDEFGHIJ"  # up to 10 options (MMLU-Pro style)

# Options listed in a question: "(A) text", "A) text", "A. text", "A: text" at a line start, or "(A) text" inline.
_OPTION_LINE = re.compile(r"^[ \t]*\**[ \t]*\(?([A-J])(?:\)|\.|:)\**[ \t]+(\S[^\n]*?)[ \t]*$", re.MULTILINE)
_OPTION_INLINE = re.compile(r"\(([A-J])\)[ \t]*([^()\n]+?)(?=[ \t]*\([A-J]\)|[ \t]*$)", re.MULTILINE)

_ANCHOR = re.compile(
    r"\banswers?\b(?:[^\n.]{0,30}?\b(?:is|be|was)\b)?\s*\**\s*(?:[:=]|-(?=\s))?"
    r"|\b(?:correct|right|best|final)\s+(?:option|choice|one|answer|letter|pick)\b(?:[^\n.]{0,20}?\b(?:is|be|was)\b)?"
    r"\s*[:=]?"
    r"|\bI\s+(?:would\s+|will\s+)?(?:choose|pick|select|go\s+with)\b"
    # announcing the option it settles on: "I'll go with C", "I'm going with B", "settle on D", "must be D"
    r"|\bI(?:['\u2019]ll|['\u2019]d|\s+will|\s+would|['\u2019]m\s+going\s+to|\s+am\s+going\s+to)\s+"
    r"(?:choose|pick|select|go\s+with|settle\s+on|stick\s+with|say)\b"
    r"|\b(?:I['\u2019]m|I\s+am)\s+(?:going|sticking)\s+with\b|\bsettl(?:e|ing)\s+on\b"
    r"|\bmy\s+(?:final\s+)?(?:choice|pick|answer)\b(?:\s+(?:is|would\s+be|will\s+be))?\s*:?"
    r"|\b(?:it|this|that|so|then)\s+(?:must|has\s+to|should)\s+be\b"
    r"|(?:^|(?<=[.!?]\s))(?:must|has\s+to)\s+be\b|\bfinal\s*:",
    re.IGNORECASE | re.MULTILINE)
_NEGATED = re.compile(r"\b(?:not|never|cannot|no)\b|n['\u2019]t\b", re.IGNORECASE)  # "the answer can't be A"
# A retraction, then the replacement option: "A, no, B", "(A)... no wait, it's B", "No wait, it's B."
_RETRACTION = re.compile(
    r"(?:^|[,;:.!?\u2013\u2014\u2026]\s*|\s+-+\s*|\s+(?=(?:no\s*,?\s*wait|wait\s*,?\s*no|or\s+rather|i\s+mean)\b))"
    r"(?:no\s*,?\s*wait|wait\s*,?\s*no|wait|no|nope|sorry|oops|actually|i\s+mean|i\s+meant|or\s+rather"
    r"|correction|scratch\s+that|make\s+(?:that|it))\b[\s,.:!\u2013\u2014-]*"
    r"(?:i\s+meant?\b[\s,]*)?"
    r"(?:(?:so\s+)?(?:it['\u2019]s|it\s+is|it\s+must\s+be|the\s+answer\s+is|make\s+(?:that|it))\b[\s:]*)?",
    re.IGNORECASE | re.MULTILINE)
_LETTER_IT_IS = re.compile(r"(?<![A-Za-z])\(?([A-J])\)?\s+it\s+is\b(?=\s*(?:[.!,;]|then\b|$))",
                           re.MULTILINE)  # "C it is."
_SO_LETTER = re.compile(r"\b(?:so|thus|therefore|hence)\b,?\s+(?=\(?[A-J]\)?\s*(?:[.!]|$))",
                        re.IGNORECASE | re.MULTILINE)
# A letter that starts a clause about itself ("A is wrong", "(B) seems off") is named, not chosen.
_SUBJECT = re.compile(r"\s*\)?\s*(?:is|was|are|seems?|looks?|isn['\u2019]t|can|could|would|might|may|does"
                      r"|doesn['\u2019]t"
                      r"|has|also|too)\b", re.IGNORECASE)
_IT_IS = re.compile(r"\b(?:it|this)(?:\s+(?:is|must\s+be|would\s+be|should\s+be)\b|['\u2019]s\b)", re.IGNORECASE)
_LETTER_FIRST = re.compile(  # "option B is correct", "(B) is the right answer"
    r"(?:\b(?i:option|choice)\s+)?[(\[]?\b([A-J])\b[)\]]?\s+(?i:is\s+(?:the\s+)?(?:correct|right|best)\b)")
_FORMATTED = re.compile(r"\(([A-J])\)|(?<![A-Za-z0-9])([A-J])\)|^[ \t]*\**([A-J])(?:[.:]|\*\*|[ \t]*$)", re.MULTILINE)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# After an answer phrase: an explicit letter "(b)", "[B]", "B.", "B)", "B", "option B", "**B**".
_EXPLICIT = re.compile(
    r"\s*\**\s*(?:(?i:option|choice|letter)\s+)?(?:\(\s*([A-Ja-j])\s*\)|\[\s*([A-J])\s*\]"
    r"|([A-J])(?=\s*(?:[).:\],;!?]|\*\*|$)))")
_BARE = re.compile(r"\s*\**\s*(?:(?i:option|choice|letter)\s+)?([A-J])(?![A-Za-z0-9'])\s+([A-Za-z']+)")
# Words that follow a letter answer in prose ("the answer is A because ..."), unlike a noun after an article.
_CONNECTIVES = {"because", "since", "as", "is", "was", "which", "that", "and", "but", "so", "for", "with",
                "here", "this", "it", "in", "on", "from", "according", "given", "due"}
_TEXT_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")


@lru_cache(maxsize=4096)
def _norm(text: str, fold: bool = True) -> str:
    text = _TEXT_WRAP.sub(r"\1", text).replace("\u2212", "-")
    # Punctuation goes; symbols stay ("2π" is not "2 + π", "ΔH < 0" is not "ΔH > 0", "+1" is not "-1").
    text = re.sub(r"[\s.,;:!?'\"\u201c\u201d\u2018\u2019()\[\]{}*_]+|(?<=[^\W\d_])-(?=[^\W\d_])", " ",
                  text.lower() if fold else text)  # "carbon-dioxide" = "carbon dioxide"; "-i" is not "i"
    return " ".join(w for w in text.split() if w.lower() not in ("a", "an", "the"))


def _last_run(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The last run of options lettered A, B, C, ... in order (roman-numeral statements "I. ..." or
    "II. ..." earlier in a question are not options)."""
    best: dict[str, str] = {}
    run: dict[str, str] = {}
    for letter, text in pairs:
        if letter == "A":
            run = {"A": text.strip()}
        elif run and LETTERS.index(letter) == len(run):
            run[letter] = text.strip()
        else:
            run = {}
        if len(run) >= 2:
            best = dict(run)
    return best


@lru_cache(maxsize=1024)
def parse_options(question: str) -> dict[str, str]:
    """Options listed in a question text, letter -> text; {} if it lists fewer than two."""
    found = _last_run([m.groups() for m in _OPTION_LINE.finditer(question)])
    return found or _last_run([m.groups() for m in _OPTION_INLINE.finditer(question)])


def _by_content(rest: str, options: dict[str, str]) -> str | None:
    """The option whose text the answer starts with (whole words; the longest such text wins, and
    among equals the one with the same letter case: "Rr" vs "rr" vs "RR")."""
    def starts(said: str, want: str) -> bool:
        return bool(want) and (said == want or said.startswith(want + " "))

    rest = rest[:2 * max(len(t) for t in options.values()) + 20]  # enough to hold the longest option
    said, said_cased = _norm(rest), _norm(rest, fold=False)
    found = [(len(_norm(t)), starts(said_cased, _norm(t, fold=False)), k) for k, t in options.items()
             if starts(said, _norm(t))]
    return max(found)[2] if found else None


def _resolve(rest: str, options: dict[str, str]) -> str | None:
    """The option named right at the start of `rest` (the text after an answer phrase), else None."""
    by_text = _by_content(rest, options) if options else None
    if by_text and len(_norm(options[by_text])) > 2:  # "(A), (B) and (C)" is option D's text, not A
        return by_text
    m = _EXPLICIT.match(rest)
    if m and (not options or next(g for g in m.groups() if g).upper() in options):  # "I, II and III"
        return next(g for g in m.groups() if g).upper()
    if by_text:
        return by_text
    m = _BARE.match(rest)
    if m:  # "A mammal", "I think": an article or a pronoun, unless a connective follows ("A because")
        article = m.group(1) in "AI" and m.group(2)[0].islower() and m.group(2).lower() not in _CONNECTIVES
        return None if article else m.group(1)
    return None


def _chosen(rest: str, options: dict[str, str]) -> str | None:
    """The option `rest` opens with, as a choice: an explicit letter not followed by a clause about it."""
    m = _EXPLICIT.match(rest)
    if not m or _SUBJECT.match(rest, m.end()):
        return None
    letter = next(g for g in m.groups() if g).upper()
    return letter if not options or letter in options else None


def _hits(text: str, options: dict[str, str]) -> list[tuple[int, str, bool]]:
    hits: list[tuple[int, str, bool]] = []
    for m in _BOX.finditer(text):
        got = _resolve(_TEXT_WRAP.sub(r"\1", braced(text, m.end() - 1)).strip("$ "), options)
        if got:
            hits.append((m.start(), got, True))
    for m in _ANCHOR.finditer(text):
        rest = text[m.end():m.end() + 1000].split("\n", 1)[0]
        letter = _EXPLICIT.match(rest)
        if _NEGATED.search(m.group(0)) or (letter and _SUBJECT.match(rest, letter.end())):
            continue  # "the answer can't be A"; "I'd say A is wrong"
        got = _resolve(rest, options)
        if got:
            hits.append((m.start(), got, True))
    for m in _RETRACTION.finditer(text):  # "The answer is A... no wait, B": the replacement is committed
        got = _chosen(text[m.end():m.end() + 200], options)
        if got:
            hits.append((m.start(), got, True))
    hits += [(m.start(), m.group(1), True) for m in _LETTER_IT_IS.finditer(text)
             if not options or m.group(1) in options]
    for m in _SO_LETTER.finditer(text):  # "A is wrong. B is wrong. So D."
        got = _chosen(text[m.end():m.end() + 10], options)
        if got:
            hits.append((m.start(), got, False))
    for m in _IT_IS.finditer(text):  # "The answer is not A. It is B."
        got = _resolve(text[m.end():m.end() + 1000].split("\n", 1)[0], options)
        if got and got != "I":  # "It is I." is the pronoun
            hits.append((m.start(), got, False))
    hits += [(m.start(), m.group(1).upper(), True) for m in _LETTER_FIRST.finditer(text)]
    hits += [(m.start(), next(g for g in m.groups() if g), False) for m in _FORMATTED.finditer(text)]
    if options:
        last = [s for s in re.split(r"(?<=[.!?])\s+|\n", text.strip()) if s.strip()]
        letter = _by_content(last[-1], options) if last else None
        if letter and _norm(last[-1]) == _norm(options[letter]):
            hits.append((len(text), letter, False))
    return hits


def extract_choice(response: str, options: dict[str, str] | None = None) -> str | None:
    """The final option letter of a response (upper case), or None if none is found."""
    if not isinstance(response, str):
        return None
    text = response.strip()
    if len(text) <= 4:  # "B", "(B)", "B.", "**B**"
        bare = re.fullmatch(r"[*(\[\s]*([A-Ja-j])[)\].:*\s]*", text)
        if bare:
            return bare.group(1).upper()
    hits = _hits(text, options or {})
    strong = [h for h in hits if h[2]]
    chosen = max(strong or hits, default=None, key=lambda h: h[0])
    return chosen[1] if chosen else None


def _gold_letter(gold: str) -> str:
    letter = extract_choice(gold) if isinstance(gold, str) else None
    if letter is None:
        raise ValueError(f"choice gold must be an option letter A-J, got {gold!r}")
    return letter


def choice_reward(response: str, gold: str, options: dict[str, str] | None = None) -> float:
    """1.0 if the response's final option (by letter, or by an option's text) is the gold letter, else 0.0."""
    gold_letter = _gold_letter(gold)
    return 1.0 if extract_choice(response, options) == gold_letter else 0.0
