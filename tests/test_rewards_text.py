import pytest

from sveb.rewards import reward
from sveb.rewards.text import is_numeric, normalize, string_reward


@pytest.mark.parametrize("response,gold", [
    ("Paris", "paris"),
    ("The capital of France is Paris.", "Paris"),
    ("The answer is: The Mitochondria.", "mitochondria"),
    ("\\boxed{Paris}", "Paris"),
    ("I think it's London. The answer is Paris!", "Paris"),
    ("Answer: Yes", "yes"),
    ("Answer: New York City", "New York City"),
    ("photosynthesis", "Photosynthesis."),
    ("Answer: the U.S.A.", "USA"),
    ("The result is \\text{Paris}", "\\text{Paris}"),
    # numeric golds go through math_reward
    ("The answer is 42.", "42"),
    ("So she has 12 apples.", "12"),
    ("The answer is 1,000", "1000"),
    ("The answer is 0.5", "1/2"),
    # formula golds: string match fails, math-verify decides
    ("The answer is $x^2+1$", "x^2 + 1"),
])
def test_right(response, gold):
    assert string_reward(response, gold) == 1.0


@pytest.mark.parametrize("response,gold", [
    ("The capital is not Paris.", "Paris"),
    ("The answer is London, not Paris.", "Paris"),
    ("Paris is nice, but the answer is London.", "Paris"),
    ("The answer is no.", "Yes"),
    ("Paris, France", "Paris"),
    ("So she has 12 apples, then eats 4 and has 8.", "12"),
    ("", "Paris"),
])
def test_wrong(response, gold):
    assert string_reward(response, gold) == 0.0


def test_normalize():
    assert normalize("  The  Quick, brown FOX! ") == "quick brown fox"
    assert normalize("an apple") == "apple"
    assert normalize("U.S.A.") == "usa"


def test_is_numeric():
    assert all(is_numeric(g) for g in ["12", "1,000", "-3.5", "50%", "3/4", "\\frac{1}{2}", "1e5"])
    assert not any(is_numeric(g) for g in ["Paris", "x^2", "3 apples", ""])


def test_bad_gold_raises():
    with pytest.raises(ValueError):
        string_reward("Paris", "  ")


def test_dispatch():
    assert reward("The answer is Paris.", {"answer_type": "string", "answer": "Paris"}) == 1.0
