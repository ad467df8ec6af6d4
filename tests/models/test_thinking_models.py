"""Thinking models: the template's mode found by rendering, one mode for training, evaluation and chat, rewards that
judge the answer after the thinking, format rewards that accept a template opening the tag, and the alarm."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from thinking_template import THINKING_TEMPLATE, thinking_model_dir

import grpo_fast
import grpo_fast.rewards as R
from grpo_fast import data, models
from grpo_fast.errors import UserError
from grpo_fast.models.thinking import THINKING_ROOM, for_run, thinking_mode
from grpo_fast.rewards.base import score_rows
from grpo_fast.rewards.presets import RewardSet
from grpo_fast.rewards.thinking import ThinkingView, split_thinking, thinking_view
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config

CORPUS = Path(__file__).resolve().parents[1] / "watch" / "health_corpus"


@pytest.fixture(scope="module")
def thinking_dir(tmp_path_factory):
    return thinking_model_dir(tmp_path_factory.mktemp("thinking-model"))


@pytest.fixture
def tokenizer(thinking_dir):
    return models.load_tokenizer(str(thinking_dir))


def test_the_mode_is_found_by_rendering_the_template(tokenizer):
    auto = thinking_mode("auto", tokenizer)
    assert auto.active and auto.opened and auto.kwargs == {"enable_thinking": True}
    off = thinking_mode("off", tokenizer)
    assert not off.active and off.kwargs == {"enable_thinking": False}
    rows = [{"prompt": [{"role": "user", "content": "What is 2 + 2?"}]}]  # prompt lengths count the mode's tags
    lengths = [data.prompt_lengths(rows, tokenizer, None, mode.kwargs)[0] for mode in (off, auto)]
    assert lengths[0] > lengths[1]
    plain = models.load_tokenizer("embedded")  # SmolLM2's own template: no thinking mode
    assert not thinking_mode("auto", plain).active and thinking_mode("off", plain).kwargs == {}
    with pytest.raises(UserError, match="has no thinking mode"):
        thinking_mode("on", plain)
    plain.chat_template = THINKING_TEMPLATE.replace("enable_thinking is defined and not enable_thinking", "false")
    always = thinking_mode("auto", plain)  # opens <think> in every prompt, takes no enable_thinking
    assert always.active and always.opened and always.kwargs == {}
    with pytest.raises(UserError, match="opens <think> in every prompt"):
        thinking_mode("off", plain)


BROKEN = "{{ raise_exception('this template needs a system message') }}"


def test_a_template_that_fails_to_render_is_named_with_its_error(thinking_dir, caplog):
    tokenizer = models.load_tokenizer(str(thinking_dir))
    tokenizer.chat_template = BROKEN
    auto = thinking_mode("auto", tokenizer, model="tiny")
    assert not auto.active and auto.kwargs == {}
    told = auto.describe()
    assert "the chat template of tiny fails to render" in told and "this template needs a system message" in told
    assert "no thinking mode" not in told
    assert "this template needs a system message" in caplog.text
    with pytest.raises(UserError, match="thinking: on, but the chat template of tiny fails to render.*system message"):
        thinking_mode("on", tokenizer, model="tiny")
    # only the thinking switch breaks: said so, with the flag that broke it
    tokenizer.chat_template = THINKING_TEMPLATE.replace(
        "{% if enable_thinking is defined and not enable_thinking %}",
        "{% if enable_thinking is defined and enable_thinking %}{{ raise_exception('no thinking here') }}{% endif %}"
        "{% if enable_thinking is defined and not enable_thinking %}")
    assert tokenizer.chat_template != THINKING_TEMPLATE
    switch = thinking_mode("auto", tokenizer, model="tiny")  # it still opens <think> itself: on, without the flag
    assert switch.active and switch.kwargs == {}
    assert "fails to render with enable_thinking=True (TemplateError: no thinking here)" in switch.describe()
    # the run's report carries it
    cfg = resolve_config("demo", [f"model={thinking_dir}"])
    tokenizer.chat_template = BROKEN
    assert "this template needs a system message" in for_run(cfg, tokenizer).describe()


def test_the_run_gets_the_mode_room_to_think_and_judged_gold(thinking_dir, in_tmp):
    prep = prepare(resolve_config("demo", [f"model={thinking_dir}"]))
    assert prep.thinking.active and prep.thinking.opened
    assert prep.cfg.args.chat_template_kwargs == {"enable_thinking": True}
    assert prep.cfg.args.max_completion_length == THINKING_ROOM  # the recipe's 16 leaves no room to think
    assert any("thinking" in line and "enable_thinking" in line for line in prep.report)
    assert any("room" in line for line in prep.report)
    assert "gold self-test" in "\n".join(prep.report) and prep.gold and not prep.gold.failures
    row = prep.train_rows[0]
    judge = prep.rewards.judge
    answer = row["answer"]
    assert score_rows(judge, [row], [f"Adding them.\n</think>\n\n{answer}"]) == [1.0]
    assert score_rows(judge, [row], [f"It is {answer}, I think"]) == [0.0]  # never closed: not an answer yet
    assert score_rows(judge, [row], [f"maybe {answer}</think>\n\n{int(answer) + 1}"]) == [0.0]
    chosen = prepare(resolve_config("demo", [f"model={thinking_dir}", "max_completion_length=64"]))
    assert chosen.cfg.args.max_completion_length == 64  # the user's choice stays
    off = prepare(resolve_config("demo", [f"model={thinking_dir}", "thinking=off"]))
    assert not off.thinking.active and off.cfg.args.chat_template_kwargs == {"enable_thinking": False}
    assert off.cfg.args.max_completion_length == 16


def test_reasoning_accuracy_needs_a_run_that_thinks(thinking_dir, in_tmp):
    """Gated on </think>, it gives every answer of a model that does not think 0: said before any weights load;
    with the model thinking it trains, and delimiters of another format (</reasoning>) are the user's own."""
    rewards = "rewards=[reasoning_accuracy, sum_correct]"
    with pytest.raises(UserError, match="scores 0 unless the completion closes its thinking") as err:
        prepare(resolve_config("demo", [rewards]))
    assert "rewards" in err.value.where and "math_accuracy" in err.value.fix
    assert prepare(resolve_config("demo", [f"model={thinking_dir}", rewards])).thinking.active
    own = "rewards=[{name: reasoning_accuracy, reasoning_delimiters: ['</reasoning>']}, sum_correct]"
    assert not prepare(resolve_config("demo", [own])).thinking.active


def test_thinking_and_chat_template_kwargs_must_agree(thinking_dir, in_tmp):
    cfg = resolve_config("demo", [f"model={thinking_dir}", "thinking=on",
                                  "chat_template_kwargs={enable_thinking: false}"])
    with pytest.raises(UserError, match="enable_thinking") as err:
        for_run(cfg, models.load_tokenizer(str(thinking_dir)))
    assert "thinking" in err.value.where


def test_format_rewards_accept_a_template_that_opens_the_tag():
    cap = R.get_reward("max_length_penalty", max_length=3)
    rewards = RewardSet("r1", ((R.math_accuracy_reward, 2.0), (R.think_answer_format_reward, 0.5),
                               (R.soft_xml_format_reward, 0.5), (cap, 1.0)),
                        "math_accuracy_reward", "think_answer_format_reward")
    opened = thinking_view(rewards, opened=True)
    rows = [{"prompt": [{"role": "user", "content": "6*7?"}], "answer": "42"}]
    text = "Six sevens.\n</think>\n<answer>\n42\n</answer>"
    raw = [score_rows(f, rows, [text])[0] for f in rewards.funcs]
    seen = [score_rows(f, rows, [text])[0] for f in opened.funcs]
    assert raw[1] == 0.0 and seen[1] == 1.0  # the template wrote <think>: the format holds
    assert seen[0] == 1.0 and opened.names == rewards.names and opened.weights == rewards.weights
    assert seen[3] == raw[3]  # length rewards count the whole completion either way
    xml = "Let me see.\n</think>\n<reasoning>\n6*7\n</reasoning>\n<answer>\n42\n</answer>"
    assert score_rows(opened.get("soft_xml_format_reward"), rows, [xml]) == [1.0]  # the answer part's format
    assert score_rows(opened.get("soft_xml_format_reward"), rows, ["<reasoning>a</reasoning><answer>42"]) == [0.0]


def test_tags_are_configurable_and_views_pickle():
    rewards = RewardSet("r", ((R.math_accuracy_reward, 1.0), (R.get_reward("reasoning_accuracy"), 1.0)),
                        "math_accuracy_reward")
    view = thinking_view(rewards, tags=("<|begin_of_thought|>", "<|end_of_thought|>"))
    rows = [{"prompt": "q", "answer": "42"}] * 3
    texts = ["<|begin_of_thought|>41?<|end_of_thought|> \\boxed{42}", "<|begin_of_thought|>\\boxed{42}",
             "<|begin_of_thought|>42<|end_of_thought|>\\boxed{41}"]
    for fn in view.funcs:
        assert score_rows(fn, rows, texts) == [1.0, 0.0, 0.0], fn.__name__
        back = pickle.loads(pickle.dumps(fn))
        assert isinstance(back, ThinkingView) and back.__name__ == fn.__name__
        assert score_rows(back, rows, texts) == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        thinking_view(rewards, tags=("<t>",))


def test_the_judge_logs_how_much_thinking_never_closed():
    rewards = RewardSet("r", ((R.math_accuracy_reward, 1.0),), "math_accuracy_reward")
    judge = thinking_view(rewards, opened=True, max_length=4).judge
    logged = {}
    judge(prompts=["q"] * 4, completions=["a b </think> 4", "a b c d", "still thinking", "x </think> 4"],
          completion_ids=[[1] * 4, [1] * 4, [1] * 2, [1] * 2], answer=["4"] * 4,
          log_metric=lambda name, value: logged.__setitem__(name, value))
    assert logged == {"thinking/open": 0.5, "thinking/open_clipped": 0.5}


def test_split_thinking_for_showing_it_folded():
    assert split_thinking("<think>a</think> 42") == ("a", "42")
    assert split_thinking("a </think> 42", opened=True) == ("a", "42")
    assert split_thinking("a b c", opened=True) == ("a b c", "")
    assert split_thinking("<think> a b") == ("a b", "")
    assert split_thinking("42") == (None, "42")


def test_the_alarm_fires_on_a_run_whose_thinking_never_closes_and_nowhere_else():
    labels = json.loads((CORPUS / "labels.json").read_text())
    assert labels["broken"]["thinking-open"]["kinds"] == ["thinking_open"]
    replay = grpo_fast.health(CORPUS / "thinking-open")
    event = next(e for e in replay.events if e.kind == "thinking_open")
    assert event.step <= labels["broken"]["thinking-open"]["by_step"] and "max_completion_length" in event.remedy
    for name in labels["healthy"]:
        assert all(e.kind != "thinking_open" for e in grpo_fast.health(CORPUS / name).events), name


def test_chat_and_generate_render_the_run_s_mode(tokenizer):
    from grpo_fast.infer import Generator

    gen = Generator.__new__(Generator)  # only its rendering: no weights
    gen.tokenizer = tokenizer
    chat = [{"role": "user", "content": "What is 2 + 3?"}]
    for kwargs, tail in (({"enable_thinking": True}, "<think>\n"), ({"enable_thinking": False}, "</think>\n\n"),
                         (None, "<think>\n")):
        gen.info = type("Info", (), {"config": {"chat_template_kwargs": kwargs}})()
        assert gen.render(chat).endswith("<|im_start|>assistant\n" + ("<think>\n\n" if tail.startswith("</") else "")
                                         + tail)


@pytest.mark.slow
def test_a_cpu_run_thinks_then_answers_and_is_evaluated_in_the_same_mode(thinking_dir, in_tmp):
    """The real trainer and the embedded model under the thinking template: an SFT warm-up on gold completions
    that think and then answer, one GRPO step, the held-out evaluation. Samples are judged on what follows the
    thinking; evaluation renders the prompts as training did."""
    import yaml

    from grpo_fast.recipes.demo import sum_correct
    from grpo_fast.train import train

    cfg = resolve_config("demo", [f"model={thinking_dir}", "max_completion_length=24", "eval_rows=2", "eval_k=1",
                                  "per_device_train_batch_size=4", "num_generations=4", "sample_every=1",
                                  "stages=[{name: warmup, sft: true, max_steps: 6, learning_rate: 0.003}, "
                                  "{name: grpo, max_steps: 1}]"])
    run = train(cfg)
    config = yaml.safe_load((run.path / "config.yaml").read_text())
    assert config["chat_template_kwargs"] == {"enable_thinking": True} and config["thinking"] == "auto"
    samples = [json.loads(line) for line in (run.path / "samples.jsonl").read_text().splitlines()]
    assert samples and all("thinking" in s and "answer" in s for s in samples)
    for s in samples:  # the judge read only what follows the thinking (open thinking: nothing, 0)
        answer = s["answer"] if s["thinking_closed"] else ""
        expected = sum_correct(completions=[answer], answer=[_sum(s["prompt"])])[0]
        assert s["rewards"]["sum_correct"] == expected, s
    evaluation = json.loads((run.path / "eval.json").read_text())
    assert evaluation["thinking"].startswith("thinking: on") and "opens <think> in the prompt" in evaluation["thinking"]
    assert evaluation["settings"]["chat_template_kwargs"] == {"enable_thinking": True}
    examples = evaluation["trained"]["examples"] + evaluation["base"]["examples"]
    assert examples and all("thinking" in e for e in examples)
    closed = [x for x in samples + examples if x["thinking_closed"] and x["answer"].strip()]
    assert closed, "after the warm-up, answers appear after the thinking"
    html = (run.path / "report.html").read_text()
    assert "<summary>thinking (" in html


def _sum(question: str) -> str:
    import re

    a, b = re.findall(r"\d+", question)[-2:]
    return str(int(a) + int(b))
