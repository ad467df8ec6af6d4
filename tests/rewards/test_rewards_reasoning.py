"""The field's reward semantics (TRL, open-r1) with our own cases, both ways: wrong or hostile output scores 0,
correct output written the ways models write it scores full marks. Reasoning-gated correctness, cosine-scaled and
Kimi length rewards, None for unparsable gold, repetition in unspaced scripts, pickling the whole registry."""

from __future__ import annotations

import math
import pickle

import pytest
from trl.trainer.utils import get_callable_name

import grpo_fast.rewards as R
from grpo_fast.rewards.check import audit_gold


def chat(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def score(fn, texts, answers, prompts=None, ids=None, **cols):
    prompts = prompts if prompts is not None else ["q"] * len(texts)
    return fn(prompts=prompts, completions=chat(texts), completion_ids=ids, answer=answers, **cols)


RIGHT_AFTER = [  # thinking closed, the answer after it, as thinking models write it
    "<think>\nWe need 6 * 7. That is 42.\n</think>\n\nThe answer is $\\boxed{42}$.",
    "<think>six sevens... 42</think>\n**Answer:** 42",
    "<think>\nLet me compute.\n</think>\n<answer>\n42\n</answer>",
    "Okay, 6 times 7 is 42.\n</think>\n\n\\boxed{42}",  # the template opened <think> in the prompt
]
WRONG_OR_HOSTILE = [
    "<think>\nIt is \\boxed{42}. Hmm, or is it 41?\n</think>\nThe answer is \\boxed{41}.",  # right inside only
    "<think>\nThe answer is \\boxed{42}, so I will",  # never closed: clipped while thinking
    "<think>42</think><think>42",  # a second block left open
    "",
    "</think>",
    "<think>\n\\boxed{42}\n</think>\n\\boxed{42} or \\boxed{41}? Let me say 41.",
]


def test_reasoning_accuracy_judges_only_after_the_closing_tag():
    fn = R.get_reward("reasoning_accuracy")
    assert fn.__name__ == "reasoning_accuracy_reward" and fn.reward_kind == "correctness"
    assert score(fn, RIGHT_AFTER, ["42"] * 4) == [1.0] * 4
    assert score(fn, WRONG_OR_HOSTILE, ["42"] * len(WRONG_OR_HOSTILE)) == [0.0] * len(WRONG_OR_HOSTILE)
    # no closing tag at all is incomplete reasoning, as in TRL, even with the right answer
    assert score(fn, ["\\boxed{42}"], ["42"]) == [0.0]
    # LaTeX golds go through math-verify
    assert score(fn, ["<think>half</think> $\\frac{1}{2}$", "<think>x</think> \\boxed{0.5}",
                      "<think>x</think> \\boxed{\\frac{1}{3}}"], ["\\frac{1}{2}"] * 3) == [1.0, 1.0, 0.0]


def test_reasoning_accuracy_delimiters_are_configurable():
    fn = R.get_reward("reasoning_accuracy", reasoning_delimiters=["</reasoning>", "◁/think▷"])
    texts = ["<reasoning>6*7</reasoning> 42", "◁think▷hmm◁/think▷ \\boxed{42}", "<think>x</think> 42"]
    assert score(fn, texts, ["42"] * 3) == [1.0, 1.0, 0.0]
    with pytest.raises((ValueError, R.registry.UserError)):
        R.get_reward("reasoning_accuracy", reasoning_delimiters=[])


def test_every_correctness_reward_ignores_the_thinking():
    """Built-in correctness rewards judge what follows </think>; open thinking scores 0; no tags: judged whole."""
    cases = {
        "math_accuracy": ("42", "<think>maybe 41</think> \\boxed{42}", "<think>\\boxed{42} then", "\\boxed{42}"),
        "numeric_match": ("42", "<think>41?</think> 42", "<think>42, so", "42"),
        "exact_match": ("Paris", "<think>Lyon?</think>\n<answer>Paris</answer>", "<think><answer>Paris</answer>",
                        "<answer>Paris</answer>"),
        "fuzzy_match": ("Paris", "<think>Lyon?</think>\n<answer>Paris</answer>", "<think><answer>Paris</answer>",
                        "Paris"),
        "multiple_choice": ("B", "<think>A? no.</think> The answer is B.", "<think>The answer is B", "Answer: B"),
    }
    for name, (gold, closed, open_, bare) in cases.items():
        fn = R.get_reward(name)
        assert score(fn, [closed, open_, bare], [gold] * 3) == [1.0, 0.0, 1.0], name
        inside = closed.replace("</think>", "") if name != "math_accuracy" else "<think>\\boxed{42}</think> 41"
        if name == "math_accuracy":
            assert score(fn, [inside], [gold]) == [0.0]


def test_unparsable_gold_is_none_in_every_correctness_reward():
    prose = "Answer is forty two."
    for name in ("math_accuracy", "reasoning_accuracy", "cosine_scaled", "kimi_length"):
        fn = R.get_reward(name)
        assert score(fn, ["<think>x</think> \\boxed{42}", "<think>x</think> 0"], [prose, prose],
                     ids=[[1] * 5, [1] * 9]) == [None, None], name
    assert score(R.get_reward("numeric_match"), ["42"], [prose]) == [None]
    assert score(R.get_reward("multiple_choice"), ["B"], ["forty two"]) == [None]
    # math words are not prose: golds still parse
    assert score(R.math_accuracy_reward, ["\\boxed{\\sin x}", "\\boxed{3}"], ["\\sin x", "\\text{3}"]) == [1.0, 1.0]


def test_cosine_scaled_follows_the_schedule():
    fn = R.get_reward("cosine_scaled", max_len=100)
    assert fn.__name__ == "cosine_scaled_reward" and fn.reward_range == (-1.0, 1.0)
    right, wrong = "<think>6*7</think> \\boxed{42}", "<think>6*7</think> \\boxed{41}"
    texts = [right, right, right, right, wrong, wrong, wrong]
    ids = [[1] * n for n in (0, 50, 100, 400, 0, 50, 100)]
    out = score(fn, texts, ["42"] * 7, ids=ids)
    assert out == pytest.approx([1.0, 0.75, 0.5, 0.5, -1.0, -0.75, -0.5])  # beyond max_len: clamped, never rises
    # open thinking is wrong, whatever it holds
    assert score(fn, ["<think>\\boxed{42}"], ["42"], ids=[[1] * 50]) == pytest.approx([-0.75])
    knobs = R.get_reward("cosine_scaled", max_len=10, min_value_wrong=-2, max_value_wrong=0, min_value_correct=0,
                         max_value_correct=3)
    assert score(knobs, [right, wrong], ["42", "42"], ids=[[1] * 5, [1] * 5]) == pytest.approx([1.5, -1.0])
    assert knobs.reward_range == (-2, 3)
    # without completion_ids the length is in characters
    chars = score(fn, [right], ["42"])
    assert chars[0] == pytest.approx(0.5 + 0.25 * (1 + math.cos(len(right) / 100 * math.pi)))
    with pytest.raises((ValueError, R.registry.UserError)):
        R.get_reward("cosine_scaled", min_value_correct=-2)


def test_kimi_length_is_group_relative_and_correctness_aware():
    fn = R.get_reward("kimi_length")
    assert fn.__name__ == "kimi_length_reward"
    right, wrong = "<think>x</think> \\boxed{42}", "<think>x</think> \\boxed{41}"
    prompts = ["p1"] * 4 + ["p2"] * 2
    texts = [right, right, wrong, wrong, right, wrong]
    ids = [[1] * n for n in (10, 30, 10, 20, 100, 100)]
    out = score(fn, texts, ["42"] * 6, prompts=prompts, ids=ids)
    # group p1: shortest 10, longest 30 -> lambda 0.5, -0.5, 0.5, 0.0; wrong answers never above 0
    assert out == pytest.approx([0.5, -0.5, 0.0, 0.0, 0.0, 0.0])
    # groups are per prompt: the same lengths under another prompt do not mix
    out = score(fn, [right, right], ["42", "42"], prompts=["a", "b"], ids=[[1] * 5, [1] * 50])
    assert out == [0.0, 0.0]
    # open thinking is wrong
    out = score(fn, ["<think>\\boxed{42}", right], ["42", "42"], prompts=["a", "a"], ids=[[1] * 5, [1] * 50])
    assert out == pytest.approx([0.0, -0.5])


def test_repetition_in_unspaced_scripts():
    fn = R.get_reward("repetition_penalty")
    repeated_zh = "我喜欢吃苹果。" * 20
    unique_zh = "今天天气很好，我们一起去公园散步吧。"
    out = fn(prompts=["q"] * 4, completions=[repeated_zh, unique_zh, "ねこがすきです。" * 10, "a b c d e f g"])
    assert out[0] < -0.8 and out[1] == 0.0 and out[2] < -0.7 and out[3] == 0.0
    assert R.style.repetition_tokens("Hello 世界 hi") == ["hello", "世", "界", "hi"]


def test_code_block_takes_a_language():
    py = R.get_reward("code_block")
    js = R.get_reward("code_block", language="javascript")
    strict = R.get_reward("code_block", bare=False)
    texts = ["```python\nprint(1)\n```", "```\nprint(1)\n```", "```js\nconsole.log(1)\n```",
             "```javascript\nconsole.log(1)\n```", "```python\npass\n```", "no code", "```js\n\n```"]
    assert py(completions=texts) == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert js(completions=texts) == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert strict(completions=texts) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert js.__name__ == "code_block_javascript" and py.__name__ == "code_block_reward"


def test_deliberate_choices_hold():
    """Documented choices (docs/rewards.md): short real steps earn partial credit, markers alone do not; an
    empty think block earns no format reward."""
    steps = R.reasoning_steps_reward(prompts=None, completions=["First, we do this.", "First, Second, Next, Finally,",
                                                  "Step 1: a\nStep 2: b\nStep 3: c"])
    assert steps == pytest.approx([1 / 3, 0.0, 0.0])
    fmt = R.think_answer_format_reward(prompts=None, completions=["<think></think><answer>42</answer>",
                                                    "<think>\n6*7\n</think>\n<answer>\n42\n</answer>"])
    assert fmt == [0.0, 1.0]


# ------------------------------------------------------------------------------------------------- pickling

PARAMS = {"json_field_match": {"field": "result"}, "code_execution": {"timeout": 30}}  # no timeout under load
ROWS = dict(
    answer=["42", "42", "Answer is forty two."],
    summary=["a cat sat", "a cat sat", None],
    document=["the cat sat on the mat all day " * 3] * 3,
    context=["Paris is the capital of France.", None, None],
    source=["wiki", None, None],
    schema=[{"type": "object"}, None, None],
    tests=[["assert f() == 42"], ["assert f() == 42"], None],
)
TEXTS = [
    "<think>6*7</think>\n```python\ndef f():\n    return 42\n```\n<answer>42</answer> {\"result\": 42}",
    "<reasoning>\nFirst, guess.\n</reasoning>\n<answer>\n41\n</answer>\n```python\ndef f():\n    return 41\n```",
    "我喜欢吃苹果。" * 5,
]


# llm_judge needs a judge to call; tests/rewards/test_judged_rewards.py pickles it with one
@pytest.mark.parametrize("name", sorted(set(R.REWARDS) - {"llm_judge"}))
def test_every_registered_reward_survives_a_pickle_round_trip(name):
    fn = R.get_reward(name, **PARAMS.get(name, {}))
    back = pickle.loads(pickle.dumps(fn))
    assert back.__name__ == fn.__name__ == get_callable_name(back)  # the name TRL logs it under
    assert getattr(back, "reward_kind", None) == getattr(fn, "reward_kind", None)
    assert getattr(back, "reward_range", None) == getattr(fn, "reward_range", None)
    kwargs = dict(prompts=["q1", "q1", "q2"], completion_ids=[[1] * 7, [1] * 30, [1] * 12], **ROWS)
    first = fn(completions=chat(TEXTS), **kwargs)
    assert back(completions=chat(TEXTS), **kwargs) == first


@pytest.mark.parametrize("name", sorted(R.PRESETS))
def test_presets_pickle(name):
    """A preset round-trips (TRL's reward workers pickle rewards) and every reward in it scores as before: the
    factories' settings (a summary column, a length ratio) travel with it, not only the names."""
    preset = R.PRESETS[name]
    back = pickle.loads(pickle.dumps(preset))
    assert (back.names, back.weights, back.judge.__name__) == (preset.names, preset.weights, preset.correctness)
    kwargs = dict(prompts=["q1", "q1", "q2"], completion_ids=[[1] * 3, [1] * 30, [1] * 12], **ROWS)
    # near each row's reference (the summary's length and words, the answer), where every setting shows
    near = ["a cat sat", "<reasoning>\nFirst, 6 * 7.\n</reasoning>\n<answer>\n42\n</answer>", TEXTS[0]]
    for texts in (TEXTS, near):
        for fn, again in zip(preset.funcs, back.funcs):
            first = fn(completions=chat(texts), **kwargs)
            assert again(completions=chat(texts), **kwargs) == first, (fn.__name__, first)


def test_the_gold_self_test_counts_unparsable_golds():
    rows = [{"prompt": "q", "answer": "42"}, {"prompt": "q", "answer": "Answer is forty two."},
            {"prompt": "q", "answer": "Forty-two, of course."}]
    audit = audit_gold(R.MATH_REASONING_REWARDS, rows, lambda row: "<answer>42</answer>")
    assert [i for i, _ in audit.failures] == [1, 2]
    assert "2 row(s) have a gold answer the judge cannot parse" in audit.summary()


def test_training_logs_the_share_judged_not_applicable():
    from grpo_fast.rewards.guard import guard_rewards

    (judge,) = guard_rewards([R.math_accuracy_reward])
    metrics = {}
    judge(prompts=["q"] * 4, completions=["\\boxed{42}"] * 4, answer=["42", "Answer is forty two.", "", "42"],
          log_metric=lambda name, value: metrics.__setitem__(name, value))
    assert metrics["rewards/math_accuracy_reward/not_applicable"] == 0.5 and judge.not_applicable == 2


def test_think_format_wants_real_thinking_then_an_answer():
    out = R.get_reward("think_format")(prompts=None, completions=chat([
        "<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
        "  <think>6*7=42</think>42",
        "<think>\nThis is my reasoning.\nThis is my answer.",  # never closed
        "<think></think>42",  # nothing thought
        "<think>a</think><think>b</think>42",  # two blocks
        "42 <think>late</think>",  # not first
        "<think>only thinking</think>",  # no answer
    ]))
    assert out == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]


# --------------------------------------------------------------------------- review findings (issue 41), both ways


def test_math_golds_with_text_groups_and_matrices_are_parsed_not_called_prose():
    fn = R.get_reward("math_accuracy")
    golds = ["\\begin{pmatrix} -1 \\\\ 2 \\end{pmatrix}", "\\frac{1}{2}\\text{ square units}", "The answer is 42",
             "2\\sqrt{2}\\text{ square inches}"]
    right = ["So $\\boxed{\\begin{pmatrix} -1 \\\\ 2 \\end{pmatrix}}$.", "The area is $\\boxed{\\frac{1}{2}}$.",
             "6 times 7 is \\boxed{42}.", "The side is \\boxed{2\\sqrt{2}}."]
    assert score(fn, right, golds) == [1.0] * 4
    assert score(fn, ["\\boxed{7}"] * 4, golds) == [0.0] * 4
    assert score(fn, ["\\boxed{42}"], ["Answer is forty two."]) == [None]  # prose: not applicable


def test_prices_and_checked_equations_end_on_the_answer():
    math_fn, numeric = R.get_reward("math_accuracy"), R.get_reward("numeric_match")
    assert score(math_fn, ["The total cost is $\\$18$."], ["18"]) == [1.0]
    texts = ["So the answer is 4, since $2^2 = 4$ holds.", "The answer is 12. Check: $3 \\times 4 = 12$."]
    assert score(numeric, texts, ["4", "12"]) == [1.0, 1.0]
    assert score(numeric, texts, ["5", "13"]) == [0.0, 0.0]
    assert score(math_fn, ["so the share is $\\frac{1}{2}$"], ["\\frac{1}{2}"]) == [1.0]


def test_several_different_boxed_answers_are_a_hedge():
    for name in ("math_accuracy", "reasoning_accuracy"):
        fn = R.get_reward(name)
        assert score(fn, ["<think>x</think>\n\\boxed{3} or \\boxed{4}"], ["4"]) == [0.0], name
        assert score(fn, ["<think>x</think>\n\\boxed{4}, that is \\boxed{4}"], ["4"]) == [1.0], name


def test_a_run_with_its_own_tags_is_judged_by_rewards_set_to_them():
    from grpo_fast.rewards.presets import RewardSet
    from grpo_fast.rewards.thinking import thinking_view

    tags = ("<|begin_of_thought|>", "<|end_of_thought|>")
    acc = R.get_reward("reasoning_accuracy", reasoning_delimiters=[tags[1]])
    cos = R.get_reward("cosine_scaled", tags=list(tags))
    view = thinking_view(RewardSet("t", ((acc, 1.0), (cos, 1.0)), acc.__name__), tags)
    honest, unclosed = f"{tags[0]}6*7{tags[1]} \\boxed{{42}}", f"{tags[0]}so it is \\boxed{{42}}"
    seen_acc, seen_cos = view.funcs
    assert score(seen_acc, [honest, unclosed], ["42", "42"]) == [1.0, 0.0]
    right, wrong = score(seen_cos, [honest, unclosed], ["42", "42"])
    assert right > 0 > wrong


def test_thinking_that_never_closes_earns_no_format_reward():
    from grpo_fast.recipes import get_recipe
    from grpo_fast.rewards.thinking import thinking_view

    rewards = get_recipe("demo").rewards
    view = thinking_view(rewards)
    fmt = view.get(rewards.format)
    low = fmt.reward_range[0]
    scores = score(fmt, ["<think>3 plus 4, let me count", "<think>Adding them.</think>\n7"], ["7", "7"])
    assert scores[0] == low and scores[1] > low


def test_code_block_knows_csharp_fences():
    fn = R.get_reward("code_block", language="csharp")
    assert score(fn, ["```c#\nclass A { }\n```", "```python\nx = 1\n```"], [None, None]) == [1.0, 0.0]
