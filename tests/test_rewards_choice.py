import pytest

from sveb.rewards import reward
from sveb.rewards.choice import choice_reward, extract_choice


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
