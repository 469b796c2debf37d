import json

import pytest

from sveb.rewards import choice_options, reward
from sveb.rewards.choice import choice_reward, extract_choice, parse_options


@pytest.mark.parametrize("response,letter", [
    ("(B)", "B"),
    ("B.", "B"),
    ("B)", "B"),
    ("b", "B"),
    ("\\boxed{B}", "B"),
    ("\\boxed{\\text{E}}", "E"),
    ("The final answer is $\\boxed{C}$", "C"),
    ("The answer is B", "B"),
    ("Answer: B", "B"),
    ("**Answer:** D", "D"),
    ("The answer is (A).", "A"),
    ("The answer is: (J)", "J"),
    ("C) Blue Whale", "C"),
    ("Answer: C) Blue Whale", "C"),
    ("The correct option is D.", "D"),
    ("Option B is correct.", "B"),
    # the final answer, not the first letter mentioned
    ("A is wrong because it is small, so the answer is C.", "C"),
    ("The answer is C, since option D is too large.", "C"),
    ("Let's see. A) 3 B) 4 C) 5. 2+2=4 so B) 4", "B"),
    ("I think the answer is B because I know", "B"),  # the pronoun "I" is not option I
])
def test_extract_choice(response, letter):
    assert extract_choice(response) == letter


@pytest.mark.parametrize("response", ["", "I don't know", "The answer is Blue whale", "It is I."])
def test_no_letter(response):
    assert extract_choice(response) is None


def test_choice_reward():
    assert choice_reward("A is tempting, but the answer is C.", "C") == 1.0
    assert choice_reward("A is tempting, but the answer is C.", "A") == 0.0
    assert choice_reward("The answer is (b)", "B") == 1.0
    assert choice_reward("The answer is b", "B") == 0.0  # bare lower case after an anchor is prose
    assert choice_reward("\\boxed{B}", "(B)") == 1.0
    assert choice_reward("", "B") == 0.0


def test_bad_gold_raises():
    with pytest.raises(ValueError):
        choice_reward("B", "blue whale")


def test_dispatch():
    assert reward("Answer: B", {"answer_type": "choice", "answer": "B"}) == 1.0


# Real response shapes (issue 9). The grader knows the options, from meta or from the question text.
STATES = {"A": "Solid", "B": "Liquid", "C": "Gas"}
ANIMALS = {"A": "eagle", "B": "shark", "C": "whale", "D": "frog"}


@pytest.mark.parametrize("response,options,letter", [
    ("After checking each option, the correct one is D", None, "D"),
    ("Solid and gas do not flow like water does, so the answer is Liquid.", STATES, "B"),
    ("Water at room temperature flows. The answer is liquid", STATES, "B"),
    ("The answer is a liquid, because it takes the shape of its container.", STATES, "B"),
    ("Answer: A mammal feeds its young with milk. Eagles are birds, sharks are fish. So (C)", ANIMALS, "C"),
    ("Answer: A mammal feeds its young with milk. So (C)", None, "C"),
    ("The answer is (B).\n\n(A) Solid is wrong because water flows.\n(C) Gas is wrong too.", STATES, "B"),
    ("The answer is not A. It is B.", STATES, "B"),
    ("A whale breathes air and feeds milk to its calves.\nThe correct answer is: **C. whale**", ANIMALS, "C"),
    ("Answer: whale (C)", ANIMALS, "C"),
    ("Liquid", STATES, "B"),
    ("I would choose B because water flows.", STATES, "B"),
    ("The answer is A because ice is solid.", STATES, "A"),
    ("\\boxed{Liquid}", STATES, "B"),
    ("The answer is (A). Wait, ice is solid but water is not. The correct answer is (B).", STATES, "B"),
])
def test_extract_choice_real_shapes(response, options, letter):
    assert extract_choice(response, options) == letter


@pytest.mark.parametrize("response,options", [
    ("The answer is Liquid", None),                    # content without the options: nothing to map to
    ("The answer is Plasma.", STATES),                 # not one of the options
    ("Answer: A mammal, of course.", ANIMALS),         # an article, and no option follows
    ("The answer is not B.", STATES),
    ("Option A is not correct.", STATES),
])
def test_no_choice_in_real_shapes(response, options):
    assert extract_choice(response, options) is None


def test_option_content_picks_the_longest_matching_option():
    options = {"A": "water", "B": "salt water", "C": "oil"}
    assert extract_choice("The answer is salt water.", options) == "B"
    assert extract_choice("The answer is water.", options) == "A"


def test_choice_reward_with_options():
    assert choice_reward("so the answer is Liquid.", "B", STATES) == 1.0
    assert choice_reward("so the answer is Liquid.", "A", STATES) == 0.0
    assert choice_reward("so the answer is Liquid.", "B") == 0.0


@pytest.mark.parametrize("question,options", [
    ("Which is a liquid?\n(A) iron\n(B) water\n(C) oxygen", {"A": "iron", "B": "water", "C": "oxygen"}),
    ("Which is a liquid?\nA. iron\nB. water\nC. oxygen", {"A": "iron", "B": "water", "C": "oxygen"}),
    ("Which is a liquid?\nA) iron\nB) water", {"A": "iron", "B": "water"}),
    ("Which is a liquid? (A) iron (B) water (C) carbon dioxide", {"A": "iron", "B": "water", "C": "carbon dioxide"}),
    ("What is 2 + 2? Give a number.", {}),
])
def test_parse_options(question, options):
    assert parse_options(question) == options


def test_dispatch_reads_options_from_meta_then_question():
    row = {"answer_type": "choice", "answer": "B", "question": "Which is a liquid?",
           "meta": json.dumps({"options": {"A": "iron", "B": "water"}})}
    assert reward("The answer is water.", row) == 1.0
    assert choice_options(row) == {"A": "iron", "B": "water"}
    from_question = {"answer_type": "choice", "answer": "B", "meta": json.dumps({"level": 1}),
                     "question": "Which is a liquid?\n(A) iron\n(B) water"}
    assert reward("I think it's water.", from_question) == 1.0
    assert reward("I think it's iron.", from_question) == 0.0
    listed = {"answer_type": "choice", "answer": "B", "question": "?", "meta": {"options": ["iron", "water"]}}
    assert choice_options(listed) == {"A": "iron", "B": "water"}


def test_dispatch_rejects_bad_meta():
    with pytest.raises(ValueError, match="p7: meta is not valid JSON"):
        choice_options({"problem_id": "p7", "meta": "{not json", "question": "?"})
    with pytest.raises(ValueError, match="p8: meta options must map letters to texts"):
        choice_options({"problem_id": "p8", "meta": json.dumps({"options": 3}), "question": "?"})


@pytest.mark.parametrize("options,said,letter", [
    # option sets of the shapes found in ARC-Challenge and MMLU-STEM
    ({"A": "-1", "B": "+1", "C": "-2", "D": "+2"}, "The answer is +1.", "B"),
    ({"A": "1", "B": "-1", "C": "i", "D": "-i"}, "The answer is -i.", "D"),
    ({"A": "\\pi/2", "B": "\\pi", "C": "2 + \\pi", "D": "2\\pi"}, "The answer is 2\\pi.", "D"),
    ({"A": "mass of +3.", "B": "mass of -3.", "C": "charge of +3.", "D": "charge of -3."},
     "The answer is charge of -3.", "D"),
    ({"A": "-1 m/s^2", "B": "-6 m/s^2", "C": "3 m/s^2", "D": "9 m/s^2"}, "The answer is -1 m/s^2.", "A"),
    ({"A": "L atm", "B": "J", "C": "volt coulomb", "D": "(A), (B), and (C)"}, "The answer is (A), (B), and (C).", "D"),
    ({"A": "I only", "B": "II only", "C": "III only", "D": "I, II, and III"}, "The answer is I, II, and III", "D"),
    ({"A": "R", "B": "rr", "C": "Rr", "D": "RR"}, "The answer is Rr.", "C"),
    ({"A": "water", "B": "carbon dioxide", "C": "oxygen"}, "So the answer is carbon-dioxide.", "B"),
])
def test_option_text_of_real_option_sets(options, said, letter):
    assert extract_choice(said, options) == letter


def test_parse_options_skips_roman_numeral_statements():
    question = ("Which statements are true?\nI. Energy is conserved.\nII. Mass is conserved.\n"
                "A. I only\nB. II only\nC. I and II\nD. neither")
    assert parse_options(question) == {"A": "I only", "B": "II only", "C": "I and II", "D": "neither"}


# The option a response settles on after naming and dismissing others, or after retracting one (issue 17).
@pytest.mark.parametrize("response,options,letter", [
    ("A looks right, but B is wrong and C... no, I'll go with C", None, "C"),
    ("A looks right, but B is wrong and D... no, I'll go with C", None, "C"),
    ("It is not A. Not B either. The answer must be D", None, "D"),
    ("It's not A. It's not B. Must be C.", None, "C"),
    ("It's not A. Not B either. It has to be D.", None, "D"),
    ("The answer can't be A, so it must be C.", None, "C"),
    ("The answer is A. No wait, it's B.", None, "B"),
    ("The answer is A... no wait, B", None, "B"),
    ("The answer is (A)... wait, no, (D).", None, "D"),
    ("Answer: A, no, B", None, "B"),
    ("Answer: A, no, I mean B", None, "B"),
    ("I'd say C... no, D.", None, "D"),
    ("A is wrong. B is wrong. C is wrong. So D.", None, "D"),
    ("A is out, B is out, so C.", None, "C"),
    ("A? No. B? No. C it is.", None, "C"),
    ("Hmm, A or B... B it is.", None, "B"),
    ("I'm going with B.", None, "B"),
    ("A seems plausible. B? Hmm. Actually, I'm going with (C).", None, "C"),
    ("Option A is not correct. Neither is B. I will settle on C.", None, "C"),
    ("My final choice is C", None, "C"),
    ("Final: B", None, "B"),
    ("Solid? No. Gas? No. I'll go with Liquid.", STATES, "B"),
])
def test_settled_choice_after_dismissals(response, options, letter):
    assert extract_choice(response, options) == letter


# Near misses: an option named as the subject of a clause, a negated anchor, a later box or Answer line.
@pytest.mark.parametrize("response,letter", [
    ("\\boxed{B}. No wait, let me double-check A... no, B is right.", "B"),
    ("The answer is B. No, A is wrong because it is too small.", "B"),
    ("I'll go with A.\nAnswer: C", "C"),
    ("I'll go with C. Final answer: \\boxed{B}", "B"),
    ("Actually, (A) is wrong. The answer is C.", "C"),
    ("I'd say A is wrong, so the answer is C.", "C"),
    ("The answer is B, no doubt.", "B"),
    ("\\boxed{B}\n\nA is wrong. So D.", "B"),
    ("Sorry, (B) is not right. The answer is A.", "A"),
    ("It must be noted that A is small. The answer is B.", "B"),
    ("The answer is C.\nWait, no doubt about it.", "C"),
    ("Answer: B. Wait, A is also... no.", "B"),
    ("I'll go with the first one.", None),
])
def test_settled_choice_near_misses(response, letter):
    assert extract_choice(response) == letter
