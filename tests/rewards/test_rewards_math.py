"""math_accuracy_reward: equivalence, extraction, threads/async, bounded time on pathological input."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from grpo_fast.rewards import math_accuracy_reward, math_equal
from grpo_fast.rewards.mathverify import MathVerifyPool, verify_answers


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
    return [{"role": "system", "content": "Solve the problem. Answer in <answer> tags."},
            {"role": "user", "content": question}]


@pytest.mark.parametrize(
    ("question", "completion", "gold"),
    [
        ("Simplify $\\sqrt{45}$.", "<reasoning>45 = 9 * 5</reasoning>\n<answer>\\sqrt{45}</answer>", "3\\sqrt{5}"),
        ("Simplify $\\sqrt{45}$.", "So the answer is $\\sqrt{45}$", "3\\sqrt{5}"),
        ("Simplify $\\frac{54}{36}$ to lowest terms.", "<answer>\\frac{54}{36}</answer>", "\\frac{3}{2}"),
        ("Simplify $\\frac{54}{36}$ to lowest terms.", "\\boxed{54/36}", "\\frac{3}{2}"),
        ("What is 17 * 23?", "<answer>17 * 23</answer>", "391"),
    ],
)
def test_the_question_copied_unevaluated_scores_zero(question, completion, gold):
    """math-verify calls "√45" equal to 3√5: without the question, an echo of "Simplify √45" was paid full."""
    assert score([completion], [gold]) == [1.0]  # the equivalence holds...
    assert math_accuracy_reward(prompts=[ask(question)], completions=[completion], answer=[gold]) == [0.0]


@pytest.mark.parametrize(
    ("question", "completion", "gold"),
    [
        ("Simplify $\\sqrt{45}$.", "<reasoning>45 = 9 * 5</reasoning>\n<answer>3\\sqrt{5}</answer>", "3\\sqrt{5}"),
        ("Simplify $\\sqrt{45}$.", "so $\\sqrt{45} = \\boxed{3\\sqrt{5}}$", "3\\sqrt{5}"),
        ("Simplify $\\frac{54}{36}$ to lowest terms.", "<answer>\\dfrac{3}{2}</answer>", "\\frac{3}{2}"),
        ("Simplify $\\frac{54}{36}$ to lowest terms.", "<answer>3/2</answer>", "\\frac{3}{2}"),
        ("Simplify $\\frac{54}{36}$ to lowest terms.", "<answer>1.5</answer>", "\\frac{3}{2}"),
        ("What is 17 * 23?", "17 * 23 = 391, so the answer is 391", "391"),
        ("Which is larger, 2/3 or 3/5?", "<answer>2/3</answer>", "\\frac{2}{3}"),
        ("Solve $x + 3 = 0$.", "<answer>-3</answer>", "-3"),
        ("A farm has 3 fields of 4 cows. How many cows?", "3 * 4 = 12 cows. <answer>12</answer>", "12"),
    ],
)
def test_solved_answers_keep_full_marks_beside_their_question(question, completion, gold):
    assert math_accuracy_reward(prompts=[ask(question)], completions=[completion], answer=[gold]) == [1.0]
