"""Unit tests for every reward in the registry: both completion formats, None columns, empty, unicode."""

from __future__ import annotations

import json

import pytest

import grpo_fast.rewards as R
from grpo_fast.errors import UserError


@pytest.fixture(params=["plain", "chat"])
def wrap(request):
    """Turn a list of strings into completions of the parametrised format."""
    if request.param == "plain":
        return lambda texts: list(texts)
    return lambda texts: [[{"role": "assistant", "content": t}] for t in texts]


def call(fn, texts, wrap, prompts=None, **cols):
    prompts = prompts if prompts is not None else ["q"] * len(texts)
    out = fn(
        prompts=prompts, completions=wrap(texts), completion_ids=[[1] * len(t.split()) for t in texts], **cols
    )
    assert len(out) == len(texts)
    assert all(s is None or isinstance(s, float) for s in out)
    return out


GOOD = (
    "<reasoning>\nStep 1: First, add six and six.\nStep 2: Then check it.\n</reasoning>\n"
    "<answer>\n12\n</answer>"
)


# ------------------------------------------------------------------------------------------------ registry


def test_registry_has_all_kinds_and_names():
    assert len(R.REWARDS) >= 24
    kinds = {
        getattr(R.get_reward(n), "reward_kind", None) for n in R.REWARDS if n not in ("json_field_match", "llm_judge")
    }
    assert {"correctness", "format", "length", "style"} <= kinds


# llm_judge needs a rubric and a judge to call: tests/rewards/test_judged_rewards.py
@pytest.mark.parametrize("name", sorted(set(R.REWARDS) - {"json_field_match", "code_execution", "llm_judge"}))
def test_every_registry_reward_handles_edge_cases(name, wrap):
    fn = R.get_reward(name)
    assert fn.__name__ and fn.__name__ != "reward"
    texts = ["", "   ", "héllo wörld ✓ 你好", GOOD, "x" * 5000]
    cols = dict(
        answer=[None, "", "12", "12", "12"],
        summary=[None] * 5,
        document=[None, "d", "doc " * 50, "", None],
        context=[None] * 5,
        source=[None] * 5,
        schema=[None] * 5,
    )
    call(fn, texts, wrap, prompts=["", "q", "你好", "q", "q"], **cols)


def test_get_reward_factory_params_and_errors():
    fn = R.get_reward("numeric_match", rel_tol=1e-2)
    assert fn(None, ["<answer>100.5</answer>"], answer=["100"]) == [1.0]
    assert R.get_reward("math_accuracy_reward") is R.math_accuracy_reward
    with pytest.raises(UserError):
        R.get_reward("nope_reward")
    with pytest.raises(UserError):
        R.get_reward("math_accuracy", rel_tol=1)
    with pytest.raises(UserError):
        R.get_reward("numeric_match", bogus=1)


# ------------------------------------------------------------------------------------------------ correctness


def test_exact_match(wrap):
    fn = R.exact_match_reward
    out = call(
        fn,
        ["<answer>$1,234</answer>", "  The  Paris. ", "no", "x"],
        wrap,
        answer=["1234", "the paris", "yes", None],
    )
    assert out == [1.0, 1.0, 0.0, None]


def test_fuzzy_match(wrap):
    out = call(
        R.fuzzy_match_reward,
        ["<answer>Paris</answer>", "Pariss", "London", "<answer>a</answer><answer>Paris</answer>"],
        wrap,
        answer=["Paris", "Paris", "Paris", "Paris"],
    )
    assert out[0] == 1.0 and 0.8 < out[1] < 1.0 and out[2] < 0.5 and out[3] == 0.0
    assert call(R.fuzzy_match_reward, ["paris"], wrap, answer=[["Lyon", "Paris"]]) == [1.0]


@pytest.mark.parametrize(
    ("text", "gold", "want"),
    [
        ("so 1,234 apples", "1234", 1.0),
        ("\\boxed{3/4}", "0.75", 1.0),
        ("<answer>45%</answer>", "45", 1.0),
        ("<answer>12 cm</answer>", "12", 1.0),
        ("it is $18.", "#### 18", 1.0),
        ("7", "8", 0.0),
        ("none", "8", 0.0),
        ("5", "abc", None),
    ],
)
def test_numeric_match(text, gold, want, wrap):
    assert call(R.numeric_match_reward, [text], wrap, answer=[gold]) == [want]


def test_numeric_tolerance():
    fn = R.make_numeric_match_reward(rel_tol=0.0, abs_tol=0.5)
    assert fn(None, ["10.4", "10.6"], answer=["10", "10"]) == [1.0, 0.0]


@pytest.mark.parametrize(
    ("text", "gold", "want"),
    [
        ("The answer is B.", "B", 1.0),
        ("<answer>(c)</answer>", "C", 1.0),
        ("\\boxed{D}", 3, 1.0),
        ("The answer is A or B", "A", 0.0),
        ("I pick A", "B", 0.0),
        ("B", None, None),
    ],
)
def test_multiple_choice(text, gold, want, wrap):
    assert call(R.multiple_choice_reward, [text], wrap, answer=[gold]) == [want]


def test_json_field_match(wrap):
    fn = R.get_reward("json_field_match", field="result.value")
    texts = [
        '{"result": {"value": 5}}',
        '```json\n{"result": {"value": "x"}}\n```',
        "not json",
        '{"result": {}}',
    ]
    assert call(fn, texts, wrap, answer=["5", "X", "5", "5"]) == [1.0, 1.0, 0.0, 0.0]
    assert fn.__name__ == "json_field_match_result.value"


def test_rouge(wrap):
    fn = R.make_rouge_reward()
    out = call(
        fn, ["the cat sat on the mat", "dogs run", ""], wrap, summary=["the cat sat on the mat"] * 2 + ["x"]
    )
    assert out[0] == pytest.approx(1.0) and out[1] == 0.0 and out[2] == 0.0
    assert call(fn, ["a"], wrap, summary=[None]) == [None]


def test_code_execution_registered():
    fn = R.get_reward("code_execution")
    assert fn.__name__.startswith("code_execution_reward")
    assert fn(None, ["```python\ndef f():\n    return 1\n```"], tests=[["assert f() == 1"]]) == [1.0]


# ------------------------------------------------------------------------------------------------ format


def test_xml_formats(wrap):
    texts = [
        GOOD,
        "<reasoning>r</reasoning> <answer>a</answer>",
        "<answer>a</answer>",
        "<reasoning>...</reasoning><answer>...</answer>",
        GOOD + GOOD,
    ]
    assert call(R.strict_xml_format_reward, texts, wrap) == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert call(R.soft_xml_format_reward, texts, wrap) == [1.0, 1.0, 0.0, 0.0, 0.0]


def test_xml_count_incremental(wrap):
    out = call(R.xml_count_reward, [GOOD, GOOD + "\n" + "z" * 100, "<reasoning>\nhi", ""], wrap)
    assert out[0] == pytest.approx(1.0)
    assert out[1] == pytest.approx(0.9)
    assert out[2] == pytest.approx(0.25) and out[3] == 0.0


def test_think_answer(wrap):
    out = call(
        R.think_answer_format_reward,
        [
            "<think>hmm</think>\n<answer>4</answer>",
            "<think></think><answer>4</answer>",
            "pre <think>a</think><answer>4</answer>",
        ],
        wrap,
    )
    assert out == [1.0, 0.0, 0.0]


def test_json_valid_and_schema(wrap):
    assert call(R.json_valid_reward, ['{"a": 1}', "```json\n[1, 2]\n```", "{a:1}", "3"], wrap) == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    fixed = R.make_json_schema_reward(schema=schema)
    assert call(fixed, ['{"a": 1}', '{"a": "x"}', "nope"], wrap) == [1.0, 0.0, 0.0]
    per_row = R.make_json_schema_reward()
    assert call(per_row, ['{"a": 1}', '{"a": 1}'], wrap, schema=[json.dumps(schema), None]) == [1.0, None]


def test_code_block_and_syntax(wrap):
    texts = [
        "```python\ndef f():\n    return 1\n```",
        "```python\ndef f(:\n```",
        "no code here at all",
        "```python\npass\n```",
        "```python\nx = 1\n```\n" * 5,
    ]
    assert call(R.code_block_reward, texts, wrap) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert call(R.python_syntax_reward, texts, wrap) == [1.0, 0.0, 0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------------ length


def test_ideal_length_words_and_tokenizer(wrap):
    fn = R.make_ideal_length_reward(target=4)
    assert call(fn, ["a b c d", "a b", "", "a " * 8], wrap) == [1.0, 0.5, 0.0, 0.0]

    class Tok:
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(text)}

    assert call(R.make_ideal_length_reward(target=4, tokenizer=Tok()), ["abcd"], wrap) == [1.0]


def test_relative_min_max_length(wrap):
    rel = R.make_relative_length_reward(ratio=0.5)
    assert call(rel, ["a b", "a b", "x"], wrap, document=["w w w w", "w w w w w w w w", None]) == [
        1.0,
        0.5,
        None,
    ]
    assert call(R.make_min_length_reward(min_length=4), ["a b", "a b c d e"], wrap) == [0.5, 1.0]
    assert call(R.make_max_length_penalty(max_length=2), ["a b", "a b c d", "a " * 10], wrap) == [
        0.0,
        -1.0,
        -1.0,
    ]


def test_soft_overlong_punishment(wrap):
    fn = R.make_soft_overlong_punishment(max_length=10, cache_length=4)
    out = fn(None, wrap(["x"] * 4), completion_ids=[[1] * 5, [1] * 6, [1] * 8, [1] * 12])
    assert out == [0.0, 0.0, -0.5, -1.0]
    with pytest.raises(ValueError):
        R.make_soft_overlong_punishment(max_length=4, cache_length=8)


# ------------------------------------------------------------------------------------------------ style


def test_reasoning_steps(wrap):
    two = "Step 1: add the two numbers together carefully.\nStep 2: check the sum against the question."
    out = call(
        R.reasoning_steps_reward,
        [
            two,
            "Step 1: a\nStep 2: b\nStep 3: c",
            "just the answer 12",
            "First, we add the two numbers carefully. Then, we double check the sum "
            "again. Finally, we write the answer down clearly.",
        ],
        wrap,
    )
    assert out[0] == pytest.approx(2 / 3) and out[1] == 0.0 and out[2] == 0.0 and out[3] == 1.0


def test_citation(wrap):
    ctx = "Paris is the capital of France. It has many museums."
    fn = R.make_citation_reward()
    texts = [
        'As stated, "Paris is the capital of France". <answer>Paris</answer>',
        '"Berlin is the capital city" Paris',
        "Paris [wiki]",
        "Paris",
        '"' + ctx + '"',
    ]
    out = call(fn, texts, wrap, context=[ctx] * 5, source=[None, None, "wiki", None, None])
    assert out == [1.0, 0.0, 1.0, 0.0, 1.0]  # the last quote is 10 words: still a citation
    long_ctx = " ".join(f"w{i}" for i in range(100))
    assert call(fn, ['"' + long_ctx + '"'], wrap, context=[long_ctx]) == [0.0]
    assert call(fn, ["x"], wrap) == [None]


def test_repetition_penalty(wrap):
    out = call(R.repetition_penalty_reward, ["a b c d e f", "a b c " * 20, "a b"], wrap)
    assert out[0] == 0.0 and out[1] < -0.9 and out[2] == 0.0


def test_language_consistency(wrap):
    fn = R.language_consistency_reward
    out = call(
        fn,
        ["hello there", "你好世界", "hello 世界", "123", "x"],
        wrap,
        prompts=["Say hi", "Say hi", [{"role": "user", "content": "Say hi"}], "Say hi", "1234"],
    )
    assert out[0] == 1.0 and out[1] == 0.0 and 0 < out[2] < 1 and out[3] == 0.0 and out[4] is None


def test_faithfulness(wrap):
    doc = "the council met on monday to discuss the new park and the mayor promised funding next year " * 3
    fn = R.make_faithfulness_reward()
    out = call(
        fn,
        ["the council met on monday", "aliens landed in the park yesterday", doc, ""],
        wrap,
        document=[doc] * 4,
    )
    assert out[0] == 1.0 and out[1] < 0.3 and out[2] == 0.0 and out[3] == 0.0


# ------------------------------------------------------------------------------------------------ combinators


def test_weighted_sum_gate_clip_normalize(wrap):
    fmt, acc = R.soft_xml_format_reward, R.numeric_match_reward
    texts = [GOOD, "12", "<reasoning>r</reasoning><answer>3</answer>"]
    cols = dict(answer=["12", "12", "12"])
    total = R.weighted_sum([acc, fmt], [2.0, 0.5], name="total")
    assert call(total, texts, wrap, **cols) == [2.5, 2.0, 0.5] and total.__name__ == "total"
    gated = R.gate(fmt, acc)
    assert call(gated, texts, wrap, **cols) == [1.0, 0.0, 0.0]
    assert gated.__name__ == "numeric_match_if_soft_xml_format_reward"
    assert call(R.clip(R.xml_count_reward, 0.0, 0.5), [GOOD, ""], wrap) == [0.5, 0.0]
    assert call(R.normalize(R.repetition_penalty_reward, -1.0, 0.0), ["a b c d"], wrap) == [1.0]
    none_sum = R.weighted_sum([acc])
    assert call(none_sum, ["1"], wrap, answer=[None]) == [None]


def test_adaptive_scaler_moves_weights_within_bounds(wrap):
    logged = {}
    scaler = R.AdaptiveRewardScaler(
        [R.numeric_match_reward, R.soft_xml_format_reward],
        [1.0, 1.0],
        w_min=0.5,
        w_max=1.5,
        ema=0.5,
        gain=2.0,
    )
    assert scaler.__name__ == "adaptive_reward"
    for _ in range(6):  # format always succeeds, accuracy always fails
        out = call(
            scaler,
            ["<reasoning>r</reasoning><answer>3</answer>"] * 2,
            wrap,
            answer=["12", "12"],
            log_metric=lambda k, v: logged.__setitem__(k, v),
        )
    w = scaler.weights
    assert w["numeric_match"] == 1.5 and w["soft_xml_format_reward"] == 0.5
    assert logged["adaptive/numeric_match"] == 1.5
    assert out == [0.5, 0.5]


# ------------------------------------------------------------------------------------------------ presets


@pytest.mark.parametrize(
    "preset", [R.MATH_REASONING_REWARDS, R.CODE_GENERATION_REWARDS, R.SUMMARIZATION_REWARDS, R.QA_REWARDS]
)
def test_presets_shape(preset):
    assert 3 <= len(preset.funcs) <= 5 and len(preset.funcs) == len(preset.weights)
    assert isinstance(preset.funcs, list) and preset.funcs is not preset.funcs
    assert preset.correctness in preset.names and len(set(preset.names)) == len(preset.names)
    weights = dict(zip(preset.names, preset.weights))
    assert weights[preset.correctness] == 2.0
    assert R.get_preset(preset.name) is preset


def test_debug_reward(capsys):
    scores = R.debug_reward(R.math_accuracy_reward, [GOOD, "```python\nx=1\n```"], answer=["12", "12"])
    out = capsys.readouterr().out
    assert scores == [1.0, 0.0]
    assert "extracted='12'" in out and "code=" in out and "'answer': 1" in out
