import pytest

from sveb.rewards import reward
from sveb.rewards.text import is_numeric, matches, normalize, string_reward


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
    # The gold as a whole word/phrase of the final answer sentence (issue 9). "Paris, France" was graded
    # 0 before; it names the right city, like "Paris, a city in Europe".
    ("The capital of France is Paris, a city in Europe.", "Paris"),
    ("Paris, France", "Paris"),
    ("Paris is the capital of France.", "Paris"),
    ("The capital of France is not Lyon; it is Paris.", "Paris"),
    ("Not Paris but Lyon", "Lyon"),
    ("The capital of France is Paris. I hope this helps!", "Paris"),
    ("The day after Monday is Tuesday.", "Tuesday"),
    ("The plural of \"mouse\" is \"mice\".", "mice"),
    ("The opposite of hot is cold, as in ice.", "cold"),
    ("The largest city in the US is New York City, on the east coast.", "New York City"),
    ("The capital of the United States is Washington, D.C.", "Washington, D.C."),
    ("Yes, 15 is an odd number.", "yes"),
    ("15 is odd, so the answer is yes.", "yes"),
    ("14 is even. It is not odd, so no.", "no"),
    ("No, there is no even prime other than 2.", "no"),
    ("\\boxed{Paris} is the capital. Wait, let me check again: the answer is Paris.", "Paris"),
])
def test_right(response, gold):
    assert string_reward(response, gold) == 1.0


@pytest.mark.parametrize("response,gold", [
    ("The capital is not Paris.", "Paris"),
    ("The answer is London, not Paris.", "Paris"),
    ("Paris is nice, but the answer is London.", "Paris"),
    ("The answer is no.", "Yes"),
    ("So she has 12 apples, then eats 4 and has 8.", "12"),
    ("", "Paris"),
    ("Not Paris but Lyon", "Paris"),
    ("Parisian cuisine is famous, and the capital is Lyon.", "Paris"),
    ("Parisian", "Paris"),
    ("It is Lyon, not Paris.", "Paris"),
    ("Paris is not the capital of France.", "Paris"),
    ("Paris isn't the capital; Lyon is.", "Paris"),
    ("I am not sure, maybe Paris or Lyon.", "Paris"),
    ("The capital of France is Paris. The capital of Germany is Berlin.", "Paris"),  # last sentence decides
    ("The capital is Lyon, not Paris. I hope this helps!", "Paris"),
    ("\\boxed{Paris}\n\nWait, that is the capital, but the largest city is asked: the answer is Lyon.", "Paris"),
    ("The day after Monday is Wednesday.", "Tuesday"),
    ("The plural of mouse is mouses.", "mice"),
    # yes/no: only the first or last word counts ("no" is common in prose)
    ("There is no doubt that 15 is odd.", "no"),
    ("No, 15 is odd, yes.", "no"),
    ("No. 15 is not an even number.", "yes"),
    ("Answer: yes or no", "yes"),
    # a list of candidates is a hedge
    ("Monday, Tuesday, Wednesday", "Tuesday"),
    ("It could be Monday, Tuesday or Wednesday.", "Tuesday"),
])
def test_wrong(response, gold):
    assert string_reward(response, gold) == 0.0


def test_matches_whole_phrase_only():
    assert matches("in Paris", "Paris")
    assert not matches("in Parisian shops", "Paris")
    assert not matches("New York", "New York City")
    assert matches("it is New York City", "new york city")
    assert not matches("never in Paris", "Paris")


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
