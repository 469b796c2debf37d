import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sveb.rewards import reward
from sveb.rewards.final import last_boxed
from sveb.rewards.math import math_reward, too_big

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

# Real response shapes the first graders got wrong (issue 9): the LAST committed answer wins, and
# "answer" used as a verb is not a commitment.
LAST_COMMITTED = [
    ("To answer this, the total is 3 + 4 ... final result is 12.", "12"),
    ("To answer this, the total is 3 + 4 = 7, and we need twice that plus 5 minus 7... "
     "The final result is 12.", "12"),
    ("To answer this question we note the total is 3 + 4 = 7. Then 7 + 5 = 12.", "12"),
    ("The answer is 4. Wait, I forgot the last one. So it is 5.", "5"),
    ("The answer is 4. Wait, ... So it is 5.", "5"),
    ("\\boxed{4}\n\nWait, that is wrong: 2 + 3 = 5. The answer is 5.", "5"),
    ("The answer is 16. Hmm, she eats 3 and bakes 4, so 9 eggs remain and 9 * 2 = 18. "
     "Therefore, it is $18$.", "18"),
    ("Janet has 16 eggs and uses 7, so 9 are left; 9 * 2 = 18.\n#### 18", "18"),
    ("First, 9 * 2 = 18.\n\n**Answer:** 18\n\nI hope this helps!", "18"),
    ("The answer, therefore, is 42.", "42"),
]
# More shapes small models write (and GSM8K/MATH reference solutions use).
MORE_SHAPES = [
    ("Step 1: 3 * 4 = 12.\nStep 2: 12 + 6 = 18.\nSo, Janet makes $18 every day.", "18", 1.0),
    ("Final Answer: The final answer is $4$. I hope it is correct.", "4", 1.0),
    ("The answer is approximately 3.14.", "3.14", 1.0),
    ("The total number of apples is 25. The answer is twenty-five.", "25", 1.0),  # no value: falls back
    ("We may check our answer: 3 * 4 = 12, so our answer is correct. \\boxed{12}", "12", 1.0),
    ("The soup costs 4 + 1 = $<<4+1=5>>5. The cake is half of 4, so it is 4 * 0.5 = $<<4*0.5=2>>2.\n"
     "She pays 4 + 5 + 2 = $<<4+5+2=11>>11.", "11", 1.0),  # "so it is" before any answer is a step
    ("The final result is 12 + 3 = 15.", "15", 1.0),
    ("The answer is 5 m/s.", "5", 1.0),
    ("The answer is 4. Hmm, 2 + 3 = 5.", "4", 1.0),  # no later commitment: the answer stays 4
    ("The answer is 18.\n\nQuestion: Tom has 3 cars. How many wheels? Answer: 12", "18", 0.0),
    ("Express the answer as a percentage: 90 / 450 * 100% = 20%", "20", 1.0),
    ("The answer is 3 1/2.", "3.5", 0.0),
    ("She earns 12000! Wow.", "12000", 1.0),  # "!" after a number in prose is not a refused factorial
    ("## Step 1: Add\n3 + 4 = 7\n## Step 2: Double it\n7 * 2 = 14", "14", 1.0),  # headings are not "####"
]
# Units and thousands separators around a plain gold.
UNITS = [
    ("The answer is $5.4 \\text{ cents}$.", "5.4"),
    ("\\boxed{5.4 \\text{ cents}}", "5.4"),
    ("So each pencil costs 5.4 cents.", "5.4"),
    ("\\boxed{11,\\! 111}", "11111"),
    ("The answer is 11,\\! 111.", "11111"),
    ("The answer is $11\\,111$.", "11111"),
    ("\\boxed{1{,}000{,}000}", "1000000"),
    ("The answer is 11 111.", "11111"),
    ("\\boxed{\\text{12 apples}}", "12"),
    ("\\boxed{12\\,\\text{cm}^2}", "12"),
    ("The final answer is \\(90^\\circ\\).", "90"),
]
# The gold appears, but a different final answer is committed to last; or the final answer is wrong.
LAST_COMMITTED_WRONG = [
    ("The answer is 4. Wait, ... So it is 5.", "4"),
    ("The answer is 12. Wait, I misread: the answer is 15.", "12"),
    ("\\boxed{12}\n\nWait, 3 + 4 = 7, so the answer is 7.", "12"),
    ("The final result is 12. Hmm, no: so it is 14.", "12"),
    ("To answer this, the total is 3 + 4 ... final result is 12.", "7"),
    ("The answer is 11,\\! 112.", "11111"),
    ("\\boxed{5.5 \\text{ cents}}", "5.4"),
    ("The answer is 1 234.", "235"),  # a thousands group, not 1 + 234
]
# Numbers too large for sympy are refused before it tries (grade 0, fast) rather than timing out.
HUGE = [r"\boxed{9^{9^{9}}}", r"\boxed{10^{10^{10}}}", r"\boxed{(10^{6})!}", "The answer is 9^9^9^9",
        r"\boxed{10^{-10^{10}}}", r"\boxed{100000!}"]

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


@pytest.mark.parametrize("response,gold", LAST_COMMITTED + UNITS)
def test_last_committed_answer_and_units_score_one(response, gold):
    assert math_reward(response, gold) == 1.0


@pytest.mark.parametrize("response,gold,want", MORE_SHAPES)
def test_more_real_shapes(response, gold, want):
    assert math_reward(response, gold) == want


@pytest.mark.parametrize("response,gold", LAST_COMMITTED_WRONG)
def test_superseded_or_wrong_final_answer_scores_zero(response, gold):
    assert math_reward(response, gold) == 0.0


@pytest.mark.parametrize("response", HUGE)
def test_huge_numbers_are_refused_quickly(response):
    start = time.process_time()
    assert too_big(response)
    assert math_reward(response, "7") == 0.0
    assert time.process_time() - start < 2.0


def test_too_big_lets_ordinary_powers_through():
    assert not any(too_big(e) for e in ["2^{10}", "10^{10^{2}}", "2^{100000}", "e^{x^2}", "20!", "(2^{3})!",
                                        "3^{2} + 4^{5}", "x^{2^{n}}"])


def test_last_boxed_balances_braces():
    assert last_boxed("x \\boxed{1} y \\boxed{\\frac{a}{b}} z") == "\\frac{a}{b}"
    assert last_boxed("no box") is None


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


# A value retracted and replaced in the answer's own sentence (issue 17): the replacement is the answer.
RETRACTED = [
    ("the answer is 12, no wait, 14", "14"),
    ("The answer is 12, no wait, 14.", "14"),
    ("So the answer is x = 5... actually x = 7.", "7"),
    ("The answer is x = 5... actually x = 7. Check: 7 * 2 = 14.", "7"),
    ("The answer is 12, sorry, 14.", "14"),
    ("The answer is 12 \u2014 no, 14.", "14"),
    ("The answer is 12, I mean 14.", "14"),
    ("The answer is 12, no, I mean 14.", "14"),
    ("The answer is 12, or rather 14.", "14"),
    ("The answer is 12, no wait, it's 14.", "14"),
    ("Answer: 12, no wait, 14", "14"),
    ("The answer is 12... actually 14.", "14"),
    ("The answer is 12. Actually, 14.", "14"),
    ("The answer is 12. Wait, no, it's 14.", "14"),
    ("The answer is 12, no, 14, sorry, 15.", "15"),
    ("The answer is $12$, no wait, $14$.", "14"),
    ("The answer is -3, no wait, 3.", "3"),
    ("The answer is \\frac{1}{2}, no wait, \\frac{1}{3}.", "1/3"),
    ("The answer is 12, no wait, 14 apples.", "14"),
    ("Thus the final result is 20, oops, 21.", "21"),
    ("#### 12, no wait, 14", "14"),
]
# Near misses: no retraction, or one whose "replacement" is not an answer, or a later box / Answer line.
KEPT = [
    ("The answer is 12, no doubt.", "12"),
    ("The answer is 12, sorry for the confusion.", "12"),
    ("The answer is 12 \u2014 no need to round.", "12"),
    ("The final answer is 12 (no rounding needed).", "12"),
    ("The answer is 12. Actually, let me verify: 3 * 4 = 12.", "12"),
    ("The answer is 12. Actually, 3 of the apples were eaten earlier.", "12"),
    ("The answer is 12; actually, 14 was my first guess.", "12"),
    ("The answer is 12. No, wait. Let me recount: there are 14.", "12"),
    ("The answer is 12.\nActually, 14.", "12"),  # another line: not the answer's sentence
    ("The answer is 12, no wait, 14.\n\\boxed{12}", "12"),
    ("The answer is 12, no wait, 14.\nAnswer: 12", "12"),
    ("\\boxed{12}", "12"),
    ("Answer: 12", "12"),
]


@pytest.mark.parametrize("response,gold", RETRACTED)
def test_retracted_value_is_replaced(response, gold):
    assert math_reward(response, gold) == 1.0
    first = re.search(r"-?\d+", response).group(0)  # the retracted value no longer scores
    assert math_reward(response, first) == 0.0


@pytest.mark.parametrize("response,gold", KEPT)
def test_near_misses_keep_their_answer(response, gold):
    assert math_reward(response, gold) == 1.0
    assert math_reward(response, "14") == 0.0


def test_settle_on_pieces():
    from sveb.rewards.final import answer_like, settle
    assert settle("12, no wait, 14") == "14"
    assert settle("12, no doubt") == "12, no doubt"
    assert answer_like("14 apples") and answer_like("x = 7") and answer_like("$\\frac{1}{3}$")
    assert not answer_like("3 of the apples were eaten") and not answer_like("let me check: 12")
