import pytest

from sveb.data_builders import SkipRow
from sveb.data_builders.boxed import choice_letter, last_boxed, option_letters, require_text


@pytest.mark.parametrize("text, want", [
    (r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"\boxed{1} first, then \boxed{2}.", "2"),
    (r"\boxed{\sqrt{\frac{a^{2}}{b}}} done", r"\sqrt{\frac{a^{2}}{b}}"),
    (r"$\boxed 5$", "5"),
    (r"answer: \boxed 42 apples", "42"),
    (r"\boxed{ 7 }", "7"),
    (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),  # escaped braces do not close the group
    (r"\boxed{\text{B}}", r"\text{B}"),
    (r"\boxed{}", ""),
    (r"no box here", None),
    (r"\boxed{1", None),
    (r"\boxed{1} and a truncated \boxed{2", None),  # never fall back to an earlier box
    (r"\boxedfoo{3}", None),
    (r"\boxed", None),
    ("", None),
    (None, None),
])
def test_last_boxed(text, want):
    assert last_boxed(text) == want


@pytest.mark.parametrize("ans, want", [
    ("B", "B"), ("(C)", "C"), ("D.", "D"), (r"\text{A}", "A"), (r"\textbf{(J)}", "J"), (" E ", "E"),
    ("AB", None), ("K", None), ("b", None), ("B) mitochondria", None), ("42", None), ("", None),
])
def test_choice_letter(ans, want):
    assert choice_letter(ans) == want


def test_option_letters():
    assert option_letters("Pick one:\n(A) red\n(B) blue\n(C) green") == {"A", "B", "C"}
    assert option_letters("Q?\nA: water\nB: ice\nC. steam\nD) fog") == {"A", "B", "C", "D"}
    assert option_letters("Which? (A) 1 (B) 2") == {"A", "B"}
    assert option_letters("A ball is thrown. Find its speed.") == set()
    assert option_letters("A\nB") == set()  # bare letters are not options


def test_require_text():
    assert require_text({"q": "  hi \n"}, "q") == "hi"
    for rec, reason in [({}, "missing q"), ({"q": None}, "missing q"), ({"q": 3}, "q is not a string"),
                        ({"q": " \n"}, "empty q"), ({"q": "a\udc80b"}, "q is not valid UTF-8")]:
        with pytest.raises(SkipRow, match=f"^{reason}$"):
            require_text(rec, "q")
    with pytest.raises(SkipRow, match="^missing the question$"):
        require_text({}, "q", "the question")
