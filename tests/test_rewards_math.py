import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sveb.rewards import reward
from sveb.rewards.math import _last_boxed, math_reward

RIGHT = [
    # weak-model phrasings without \boxed
    ("3 + 5 = 8. The answer is 8.", "8"),
    ("She had 5 and bought 7, so she has 12 apples.", "12"),
    ("**Answer:** 42", "42"),
    ("The answer to the question is 17 dollars.", "17"),
    ("Thus x = 4.", "4"),
    ("#### 72", "72"),
    ("The answer is 8 apples.\n\nQuestion 2: How many pears? 5", "8"),
    # boxed, also with text (and other numbers) after it
    ("So \\boxed{5}. Check: 2 + 5 = 7, and 9 is wrong.", "5"),
    ("The final answer is $\\boxed{8}$. I hope it is correct.", "8"),
    ("\\boxed{\\frac{1}{2}} and then some text 7", "0.5"),
    ("\\boxed{\\frac{3}{2}}", "1.5"),
    ("\\boxed{12}", "\\boxed{12}"),
    # fractions, decimals, \frac, equal values written differently
    ("The answer is 3/4.", "0.75"),
    ("The answer is 0.5", "\\frac{1}{2}"),
    ("The answer is $\\dfrac{1}{2}$.", "\\frac12"),
    ("The answer is 2.5.", "5/2"),
    ("The answer is 12.0", "12"),
    # thousands separators, currency, negatives
    ("The total is 1,234,567 units.", "1,234,567"),
    ("The answer is 1,000.", "1000"),
    ("He has 1000 dollars.", "1,000"),
    ("It costs \\$1,000.", "1000"),
    ("The answer is $12.", "12"),
    ("The answer is -3.", "-3"),
    ("The answer is \u22123.", "-3"),  # unicode minus
    ("The answer is $-\\frac{1}{2}$.", "-0.5"),
    # symbolic answers without $...$
    ("answer: (3, 4)", "(3,4)"),
    ("The answer is 2\\sqrt{2}", "2\\sqrt{2}"),
    ("The answer is \\pi.", "\\pi"),
]

WRONG = [
    ("The answer is 3.", "-3"),
    ("The answer is 0.333", "\\frac{1}{3}"),
    # the gold number appears, but before a different final answer
    ("She had 12 apples, gave away 4, so she has 8 apples.", "12"),
    ("First 12 then 8.", "12"),
    ("I computed 12 first. The final answer is 15", "12"),
    ("\\boxed{12} is what I first thought, but it is wrong: \\boxed{13}", "12"),
    ("The answer is 12, not 8.", "8"),
    ("", "5"),
    ("   ", "5"),
    ("\\boxed{}", "5"),
    ("no numbers here", "5"),
]


@pytest.mark.parametrize("response,gold", RIGHT)
def test_right_answers_score_one(response, gold):
    assert math_reward(response, gold) == 1.0


@pytest.mark.parametrize("response,gold", WRONG)
def test_wrong_answers_score_zero(response, gold):
    assert math_reward(response, gold) == 0.0


def test_last_boxed_balances_braces():
    assert _last_boxed("x \\boxed{1} y \\boxed{\\frac{a}{b}} z") == "\\frac{a}{b}"
    assert _last_boxed("no box") is None


def test_bad_gold_raises():
    with pytest.raises(ValueError):
        math_reward("The answer is 3", "")


def test_non_string_response_scores_zero():
    assert math_reward(None, "3") == 0.0  # type: ignore[arg-type]


def test_dispatch_uses_math_reward():
    assert reward("The answer is 8.", {"answer_type": "math", "answer": "8"}) == 1.0
    assert reward("The answer is 9.", {"answer_type": "math", "answer": "8"}) == 0.0


def test_non_main_thread_gives_same_rewards():
    # math-verify's signal timeouts would raise off the main thread; results must not change.
    cases = RIGHT[:8] + WRONG[:5]
    expected = [math_reward(r, g) for r, g in cases]
    got: list[float] = []
    t = threading.Thread(target=lambda: got.extend(math_reward(r, g) for r, g in cases))
    t.start()
    t.join(60)
    assert got == expected
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda c: math_reward(*c), cases)) == expected
