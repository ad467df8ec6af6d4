"""math_accuracy_reward: equivalence, extraction, threads/async, bounded time on pathological input."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest

from grpo_fast.recipes.math import SYSTEM_PROMPT
from grpo_fast.rewards import math_accuracy_reward, math_equal
from grpo_fast.rewards.mathverify import MathVerifyPool, verify_answers
from grpo_fast.rewards.restatement import restates_question


def score(completions, answers):
    return math_accuracy_reward(prompts=None, completions=completions, answer=answers)


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("<answer>72</answer>", "72"),
        ("Natalia sold 48 + 24 = 72 clips, so $72", "72"),
        ("<answer>$1,234</answer>", "1,234"),
        ("so \\boxed{\\frac{1}{2}}", "0.5"),
        ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\sqrt{2}/2"),
        ("<answer>(1, 2)</answer>", "(1,2)"),
        ("<answer>[0, 1)</answer>", "[0,1)"),
        ("<answer>\\{2, 1\\}</answer>", "\\{1,2\\}"),
        ("<answer>(x+1)^2</answer>", "x^2+2x+1"),
        ("\\boxed{\\boxed{5}} then more", "5"),
        ([{"role": "assistant", "content": "<answer>\\dfrac{3}{4}</answer>"}], "\\frac34"),
    ],
)
def test_equivalent(completion, gold):
    assert score([completion], [gold]) == [1.0]


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("<answer>73</answer>", "72"),
        ("<answer>71, 72, 73</answer>", "72"),
        ("<answer>1</answer><answer>72</answer>", "72"),
        ("", "72"),
        ("no number at all", "x^2"),
        ("<answer>(x+1)^3</answer>", "x^2+2x+1"),
    ],
)
def test_not_equivalent(completion, gold):
    assert score([completion], [gold]) == [0.0]


def test_unparseable_gold_is_none():
    assert score(["<answer>1</answer>", "1"], [None, ""]) == [None, None]
    assert math_equal("72", "72") == 1.0


def test_from_thread_and_asyncio():
    comps = ["<answer>\\frac{2}{4}</answer>", "<answer>(x+1)^2</answer>", "<answer>3</answer>"]
    golds = ["\\frac12", "x^2+2x+1", "4"]
    want = [1.0, 1.0, 0.0]
    out = []
    t = threading.Thread(target=lambda: out.append(score(comps, golds)))
    t.start()
    t.join(60)
    assert out == [want]
    assert asyncio.run(asyncio.to_thread(score, comps, golds)) == want

    async def many():
        return await asyncio.gather(*(asyncio.to_thread(score, comps, golds) for _ in range(3)))

    assert asyncio.run(many()) == [want] * 3


def test_pathological_inputs_are_time_bounded():
    pool = MathVerifyPool(workers=1, timeout=2.0)
    try:
        pool.verify_many([("1", "1")])  # start the worker outside the timed region
        preds = ["9^{9^{9^{9}}}", "\\frac{" * 20_000, "\\boxed{" + "\\frac{" * 100_000 + "}"]
        start = time.monotonic()
        out = verify_answers(["5", "\\frac{1}{2}", "x"], preds, pool=pool)
        elapsed = time.monotonic() - start
        assert out == [0.0, 0.0, 0.0]
        assert elapsed < 2.0 * 3 + 6.0  # at most one deadline per item plus worker restarts
        # still healthy afterwards
        assert verify_answers(["\\frac12"], ["0.5"], pool=pool) == [1.0]
    finally:
        pool.close()


def test_huge_completion_extraction_is_fast():
    start = time.monotonic()
    out = score(["\\frac{" * 100_000 + " <answer>" * 10_000, "1" * 100_000], ["2", "3"])
    assert out == [0.0, 0.0]
    assert time.monotonic() - start < 10.0


@pytest.mark.parametrize(("text", "score"), [
    # cut mid-list (the math recipe's CPU run, step 7): its last number is the fourth step's, not an answer
    ("Steps I followed:\n\n1. [ Step 1: First, I assigned kn = 4n + 1 and ultm = 3m + 1.\n\n"
     "4. [ Step 4: Fourth, I verified that rounding the result", 0.0),
    ("Step 1: square -1.\nStep 2: multiply by 3 and add 1.\nStep 4: check", 0.0),
    # tag soup (the math run of seed 1, gcd(74, 32) = 2): a number in a tag's name is no answer either
    ("<reasoning>\n<step1>gcd</step1>\n</step2>\n</step2>\n</step4>", 0.0),
    ("<reasoning>\n<step1>\n</step4>\n</step2>\n</step2", 0.0),  # cut inside its last tag
    ("<reasoning>\n<step1>so f(-1) = 4</step1>\n</reasoning>", 1.0),
    # honest answers without tags, written the ways models write them, still count
    ("1. First, (-1)^2 = 1.\n2. Then 3 * 1 + 1 = 4.", 1.0),
    ("Step 1: f(-1) = 3 + 1\nStep 2: = 4", 1.0),
    ("The answer is 4.", 1.0),
    ("Answer:\n4.", 1.0),
])
def test_list_and_step_numbers_are_not_final_answers(text, score):
    assert math_accuracy_reward(None, [text], answer=["4"]) == [score]


def ask(question: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def written(answer: str) -> list[str]:
    """A final answer the ways models write it: the math recipe's tags, a box, a sentence (LaTeX in ``$``)."""
    ways = [f"<reasoning>\nI worked it out.\n</reasoning>\n<answer>\n{answer}\n</answer>",
            f"<answer>{answer}</answer>", f"So the answer is $\\boxed{{{answer}}}$.", f"The answer is ${answer}$."]
    return ways + ([f"The answer is {answer}."] if re.fullmatch(r"[\d.,]+(/\d+)?", answer) else [])


def judged(question: str, completion: str, gold: str) -> tuple[float | None, float | None]:
    """(with the question passed, without it)."""
    return (math_accuracy_reward(prompts=[ask(question)], completions=[completion], answer=[gold])[0],
            math_accuracy_reward(prompts=None, completions=[completion], answer=[gold])[0])


def cases(table):
    return [(q, gold, answer) for q, golds, answers in table for gold in golds for answer in answers]


ECHOES = [  # the expression the question asks to evaluate, handed back whole and unevaluated
    ("Compute 2^10", ["1024", "1024.0", "1{,}024"], ["2^{10}", "2^10"]),
    ("Compute $2^{10}$.", ["1024", "1024.0"], ["2^{10}", "2^10"]),
    ("What is the value of $2^{10}$?", ["1024"], ["2^{ 10 }", "2 ^ 10"]),
    ("Simplify $\\frac{54}{36}$ to lowest terms.", ["\\frac{3}{2}", "\\dfrac32", "3/2", "1.5"],
     ["\\frac{54}{36}", "\\dfrac{54}{36}", "54/36", "\\frac{54} {36}"]),
    ("Simplify 54/36.", ["\\frac{3}{2}", "1.5"], ["\\frac{54}{36}", "54/36"]),
    ("Simplify $\\sqrt{45}$.", ["3\\sqrt{5}", "3\\sqrt5", "3*sqrt(5)"], ["\\sqrt{45}", "sqrt(45)"]),
    ("What is 17 * 23?", ["391", "391.0"], ["17 * 23", "17 \\times 23", "17\\cdot 23", "17*23"]),
    ("What's 17 \\times 23?", ["391"], ["17*23", "17 \\cdot 23"]),
    ("17 * 23 = ?", ["391"], ["17 \\times 23"]),
    ("Express 3/4 as a decimal.", ["0.75"], ["3/4", "\\frac{3}{4}"]),  # lowest terms, but a decimal was asked
    ("Compute 5!", ["120"], ["5!"]),
    ("Compute $\\dbinom{8}{4}$.", ["70"], ["\\dbinom{8}{4}", "\\binom{8}{4}"]),
    ("Question: Compute 2^10\nAnswer:", ["1024"], ["2^{10}"]),
    ("What is 17 * 23 equal to?", ["391"], ["17 \\cdot 23"]),
    ("Find $\\frac{6}{8}$ in simplest form.", ["\\frac34", "0.75"], ["\\frac{6}{8}", "6/8"]),
    ("Rationalize the denominator of $\\frac{1}{\\sqrt{2}}$.", ["\\frac{\\sqrt{2}}{2}"], ["\\frac{1}{\\sqrt2}"]),
    ("Evaluate $\\frac{1}{2} + \\frac{1}{3}$.", ["\\frac{5}{6}", "5/6"], ["\\frac{1}{2}+\\frac{1}{3}", "1/2 + 1/3",
                                                                           "\\dfrac12+\\dfrac13"]),
]


@pytest.mark.parametrize(("question", "gold", "answer"), cases(ECHOES))
def test_the_question_copied_unevaluated_scores_zero(question, gold, answer):
    """math-verify calls "√45" equal to 3√5: without the question an echo of "Simplify √45" is paid full; beside
    it, nothing was solved."""
    for completion in written(answer):
        assert judged(question, completion, gold) == (0.0, 1.0), completion


HONEST = [  # right answers beside their question: full marks with the question passed and without it
    ("Compute 2^10", ["1024", "1024.0"], ["1024", "1,024"]),
    ("Which is larger, 3/4 or 2/3?", ["0.75", "3/4", "\\frac{3}{4}", "\\frac34"],
     ["3/4", "\\frac{3}{4}", "\\dfrac34", "0.75", "\\frac{6}{8}"]),
    ("Which is larger, $\\frac{3}{4}$ or $\\frac{2}{3}$?", ["0.75", "\\frac34"], ["3/4", "\\frac{3}{4}", "0.75"]),
    ("Which is larger, 6/8 or 2/3?", ["0.75", "3/4"], ["6/8", "\\frac{6}{8}"]),  # not in lowest terms: offered
    ("Which of 1/2, 2/3 and 3/4 is the largest?", ["0.75", "\\frac{3}{4}"], ["3/4", "\\frac{3}{4}"]),
    ("Compute 3/4 or 2/3, whichever is larger.", ["0.75"], ["3/4"]),
    ("Which is larger, $\\sqrt{2}$ or $\\frac{4}{3}$?", ["\\sqrt2", "\\sqrt{2}", "sqrt(2)"],
     ["\\sqrt{2}", "\\sqrt2", "sqrt(2)"]),
    ("Is $\\sqrt{8}$ or $2\\sqrt{3}$ smaller?", ["2\\sqrt{2}", "2\\sqrt2"], ["\\sqrt{8}", "\\sqrt8"]),
    ("Simplify $\\frac{\\sqrt{8}}{2}$.", ["\\sqrt2", "\\sqrt{2}"], ["\\sqrt{2}", "\\sqrt2"]),
    ("What is $\\frac{3}{4} \\cdot 1$?", ["0.75", "3/4", "\\frac34"], ["3/4", "\\frac{3}{4}"]),  # a part of it
    ("What is $\\sqrt{2} \\times \\sqrt{1}$?", ["\\sqrt2"], ["\\sqrt{2}"]),
    ("Evaluate $2^{10} \\cdot 2^0$.", ["1024"], ["2^{10}"]),
    ("What is 3/4 of 12?", ["9"], ["9", "27/3"]),
    ("Simplify $\\frac{3}{4}$.", ["0.75", "3/4"], ["3/4", "\\frac{3}{4}"]),  # already in lowest terms
    ("Compute $-\\frac{3}{4}$.", ["-0.75"], ["-3/4", "-\\frac{3}{4}", "\\frac{-3}{4}"]),
    ("Which is larger, 3/4 or 0.7? Give your answer as a decimal.", ["0.75"], ["3/4"]),  # offered: kept
    ("Which is bigger: $2^{10}$ or $10^3$?", ["1024"], ["2^{10}"]),
    ("What is the larger of $2^{10}$ and $10^3$?", ["1024", "2^{10}"], ["2^{10}", "2^10"]),
    ("Find $x$ if $2x = \\frac{3}{2} \\cdot 2$.", ["1.5", "\\frac{3}{2}"], ["\\frac32", "3/2"]),
    ("Simplify $\\sqrt{2}$.", ["\\sqrt{2}", "1.4142135623730951"], ["\\sqrt2"]),
    ("Simplify $\\frac{54}{36}$ to lowest terms.", ["\\frac{3}{2}", "\\dfrac32", "3/2", "1.5"],
     ["\\frac{3}{2}", "\\dfrac{3}{2}", "3/2", "1.5"]),
    ("Simplify $\\sqrt{45}$.", ["3\\sqrt{5}", "3\\sqrt5"], ["3\\sqrt{5}", "3 \\sqrt5", "3\\cdot\\sqrt{5}"]),
    ("Write 1024 as a power of 2.", ["2^{10}", "2^10"], ["2^{10}", "2^10"]),
    ("Write $2^{10}$ as a power of 4.", ["4^5"], ["4^{5}"]),
    ("What is 17 * 23?", ["391"], ["391", "17 * 23 = 391"]),
]


@pytest.mark.parametrize(("question", "gold", "answer"), cases(HONEST))
def test_right_answers_keep_full_marks_beside_their_question(question, gold, answer):
    for completion in written(answer):
        assert judged(question, completion, gold) == (1.0, 1.0), completion


@pytest.mark.parametrize(
    ("question", "completion", "gold"),
    [
        ("Simplify $\\sqrt{45}$.", "<reasoning>45 = 9 * 5</reasoning>\n<answer>3\\sqrt{5}</answer>", "3\\sqrt{5}"),
        ("Simplify $\\sqrt{45}$.", "so $\\sqrt{45} = \\boxed{3\\sqrt{5}}$", "3\\sqrt{5}"),
        ("What is 17 * 23?", "17 * 23 = 391, so the answer is 391", "391"),
        ("Solve $x + 3 = 0$.", "<answer>-3</answer>", "-3"),
        ("A farm has 3 fields of 4 cows. How many cows?", "3 * 4 = 12 cows. <answer>12</answer>", "12"),
        ("Compute 2^10", "2^10 = 1024", "1024"),
    ],
)
def test_solved_answers_keep_full_marks_beside_their_question(question, completion, gold):
    assert judged(question, completion, gold) == (1.0, 1.0)


def test_a_hostile_question_is_judged_in_bounded_time():
    start = time.monotonic()
    deep = "Simplify $" + "\\frac{" * 5_000 + "1" + "}{2}" * 5_000 + "$."
    assert not restates_question("\\frac{1}{2}", deep, "0.5")
    assert not restates_question("2^{10}", "Compute 2^10 " + "$x$ or " * 20_000, "1024")
    assert time.monotonic() - start < 10.0
