"""Tool use: the tool_math recipe's rewards both ways, the tool-aware template, the tool loop outside training
(real tokenizer, real sandboxed tool), config errors, and a real training run with TRL's tool loop."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import background
import pytest

from grpo_fast.errors import UserError
from grpo_fast.recipes import get_recipe
from grpo_fast.recipes.tool_math import demonstration, final_answer_correct, make_rows, python_ran
from grpo_fast.rewards.base import transcript
from grpo_fast.run.resolve import resolve_config
from grpo_fast.tools import PythonSession, environment_class
from grpo_fast.tools.loop import converse, parse_reply

GOLD = "14090181"


def called(answer: str, output: str = "14090181\n") -> list[dict]:
    call = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(4837 * 2913)"}}}
    return [{"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "python", "content": output},
            {"role": "assistant", "content": answer}]


@pytest.mark.parametrize("answer", ["14090181", "14,090,181", "The answer is 14090181.", "\\boxed{14090181}",
                                    "14090181.0", "<answer>14090181</answer>", " 14090181\n"])
def test_right_answers_written_the_ways_models_write_them_score_full(answer: str) -> None:
    assert final_answer_correct([called(answer)], [GOLD]) == [1.0]
    assert final_answer_correct([answer], [GOLD]) == [1.0]  # without the tool: still right (it just rarely is)


@pytest.mark.parametrize("answer", ["14090180", "14090182", "14090181 or 14090182", "", "I used the tool.",
                                    "<answer>14090181</answer><answer>14090180</answer>"])
def test_wrong_or_hedged_answers_score_zero(answer: str) -> None:
    assert final_answer_correct([called(answer)], [GOLD]) == [0.0]


@pytest.mark.parametrize(("answer", "score"), [("4837 * 2913", 0.0), ("<answer>4837*2913</answer>", 0.0),
                                               ("$4837 \\times 2913$", 0.0), ("\\boxed{4837 \\cdot 2913}", 0.0),
                                               ("4837 * 2913 = 14090181", 1.0), ("14090181", 1.0)])
def test_the_question_copied_back_is_no_answer(answer: str, score: float) -> None:
    # math-verify evaluates "4837 * 2913" to the gold; beside its question it is an echo, not a result
    question = [{"role": "user", "content": "What is 4837 * 2913?"}]
    assert final_answer_correct([called(answer)], [GOLD], prompts=[question]) == [score]


def test_the_tool_output_is_not_the_answer() -> None:
    # the number only in the tool's reply (or in the message that made the call) earns nothing
    msgs = called("")
    msgs[0]["content"] = "14090181"
    assert final_answer_correct([msgs[:2]], [GOLD]) == [0.0]
    assert final_answer_correct([called("")], [GOLD]) == [0.0]


def test_python_ran_rewards_a_clean_call_only() -> None:
    assert python_ran([called(GOLD)]) == [1.0]
    assert python_ran([called(GOLD, "Traceback (most recent call last):\nNameError")]) == [0.0]
    assert python_ran([called(GOLD, "error: timed out after 5 s")]) == [0.0]
    assert python_ran([[{"role": "assistant", "content": GOLD}], GOLD]) == [0.0, 0.0]


def test_demonstrations_earn_full_marks_from_the_recipe_rewards() -> None:
    rows = make_rows(6)
    demos = [demonstration(r) for r in rows]
    assert final_answer_correct(demos, [r["answer"] for r in rows]) == [1.0] * 6
    assert python_ran(demos) == [1.0] * 6
    # and the demonstrated code really computes the answer in the sandbox
    code = demos[0][0]["tool_calls"][0]["function"]["arguments"]["code"]
    assert PythonSession().python(code) == demos[0][1]["content"]


def test_heldout_questions_are_not_training_questions() -> None:
    cfg = resolve_config("tool_math", ["eval_rows=100"])
    recipe = get_recipe("tool_math")
    train_rows = recipe.rows(cfg)
    held = recipe.holdout(cfg, train_rows)
    assert len(held) == 100 and not {r["prompt"][-1]["content"] for r in held} & {
        r["prompt"][-1]["content"] for r in train_rows}


# --------------------------------------------------------------------------- template and loop


@pytest.fixture(scope="module")
def tool_tokenizer():
    from grpo_fast.models import load_tokenizer
    from grpo_fast.tools.chat import use_tool_template

    tok = load_tokenizer(None)  # the embedded SmolLM2: its own template drops tool calls
    what = use_tool_template(tok)
    assert "ChatML" in what
    return tok


def test_the_embedded_model_gets_a_tool_template_that_round_trips(tool_tokenizer) -> None:
    from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

    assert supports_tool_calling(tool_tokenizer) and is_chat_template_prefix_preserving(tool_tokenizer)
    assert tool_tokenizer.eos_token == "<|im_end|>"  # TRL's tool loop cuts tool replies at EOS
    text = tool_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tools=[PythonSession().python], tokenize=False,
        add_generation_prompt=True)
    assert "- python(code): Run Python code" in text and "<tool_call>" in text
    reply = parse_reply(tool_tokenizer, '<tool_call>\n{"name": "python", "arguments": {"code": "1+1"}}\n</tool_call>')
    assert reply["tool_calls"][0]["function"] == {"name": "python", "arguments": {"code": "1+1"}}
    broken = parse_reply(tool_tokenizer, '<tool_call>\n{"name": "python", "arguments": {"code": "1+1"}\n</tool_call>')
    assert "tool_calls" not in broken  # malformed JSON: plain text, no call


def test_a_model_without_a_tool_template_is_refused_clearly(tiny_model_dir) -> None:
    from transformers import AutoTokenizer

    from grpo_fast.tools.chat import use_tool_template

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with pytest.raises(UserError) as err:
        use_tool_template(tok, "tiny")
    assert "cannot do tool calls" in err.value.what and "config key 'model'" in err.value.where


def test_prepare_counts_the_tool_list_in_prompt_tokens_and_refuses_early(tiny_model_dir) -> None:
    """The tools' schemas are part of every prompt: the lengths (and the drop limit) must count them; a model
    whose template cannot do tool calls is refused before any weights load (``--dry-run`` says it too)."""
    from grpo_fast import data
    from grpo_fast.models import load_tokenizer
    from grpo_fast.run.prepare import prepare

    prep = prepare(resolve_config("tool_math", {"eval_rows": 8}))
    assert prep.tools and prep.tools[0]["function"]["name"] == "python"
    assert any(line.startswith("tools: python from grpo_fast.tools.python:PythonSession") for line in prep.report)
    bare = data.prompt_lengths(prep.train_rows[:4], load_tokenizer(None))
    seen = data.prompt_lengths(prep.train_rows[:4], prep.tokenizer, prep.tools)
    assert all(s > b + 40 for s, b in zip(seen, bare)), (bare, seen)
    line = next(x for x in prep.report if x.startswith("prompt tokens"))
    assert f"max {max(seen)}" in line
    with pytest.raises(UserError) as err:
        prepare(resolve_config("tool_math", {"eval_rows": 8, "model": str(tiny_model_dir)}))
    assert "cannot do tool calls" in err.value.what


def scripted(replies: dict[str, list[str]]):
    """A stand-in for the model: the next scripted reply for each conversation, found by its question."""
    def generate(texts: list[str], budget: int) -> list[tuple[str, int]]:
        out = []
        for text in texts:
            question = next(q for q in replies if q in text)
            reply = replies[question].pop(0)
            out.append((reply, min(budget, len(reply.split()) + 1)))
        return out
    return generate


def call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def test_the_loop_runs_real_sandboxed_calls_with_state_per_conversation(tool_tokenizer) -> None:
    rows = [{"prompt": [{"role": "user", "content": f"Q{i}?"}], "answer": "0"} for i in range(3)]
    replies = {
        "Q0?": [call("x = 4837 * 2913"), call("print(x)"), "14090181"],   # state persists between calls
        "Q1?": [call("print(x)"), "no idea"],                              # ...but not into another episode
        "Q2?": [call("import os; os.kill(1, 9)"), call("print(2 + 2)"), "4"],  # a hostile call, then goes on
    }
    episodes = converse(scripted(replies), tool_tokenizer, rows, PythonSession, max_new_tokens=200, max_iterations=4)
    first, second, third = episodes
    assert first.tool_calls == 2 and first.messages[3]["content"] == "14090181\n"
    assert first.messages[-1] == {"role": "assistant", "content": "14090181"}
    assert "NameError" in second.messages[1]["content"] and second.messages[-1]["content"] == "no idea"
    assert third.messages[3]["content"] == "4\n" and third.tool_calls == 2
    assert "[call python(code='print(x)')]" in transcript(first.messages)


def test_the_loop_stops_at_its_iteration_limit_and_token_budget(tool_tokenizer) -> None:
    rows = [{"prompt": [{"role": "user", "content": "Q?"}]}]
    episodes = converse(scripted({"Q?": [call("1")] * 10}), tool_tokenizer, rows, PythonSession,
                        max_new_tokens=1000, max_iterations=2)
    assert episodes[0].tool_calls == 2  # two rounds of calls, then a last reply (a call left unrun)
    episodes = converse(scripted({"Q?": [call("1")] * 10}), tool_tokenizer, rows, PythonSession,
                        max_new_tokens=3, max_iterations=5)
    assert episodes[0].tool_calls == 0 and episodes[0].tokens >= 3


def test_the_loop_counts_tool_replies_in_the_budget_as_trl_does(tool_tokenizer) -> None:
    """TRL's rule: every token after the prompt counts, the tool's reply included; a reply that does not fit is
    dropped and the conversation ends on its call (the model never sees it), so evaluation cannot show a model
    tool output that training would have withheld."""
    rows = [{"prompt": [{"role": "user", "content": "Q?"}]}]
    budgets: list[int] = []
    script = scripted({"Q?": [call("print(7 * 6)"), "42"]})

    def generate(texts: list[str], budget: int) -> list[tuple[str, int]]:
        budgets.append(budget)
        return script(texts, budget)

    episode = converse(generate, tool_tokenizer, rows, PythonSession, max_new_tokens=200, max_iterations=2)[0]
    assert [m["role"] for m in episode.messages] == ["assistant", "tool", "assistant"]
    first_reply = len(call("print(7 * 6)").split()) + 1  # what the scripted model says it generated
    assert len(budgets) == 2 and budgets[0] == 200 and 1 <= budgets[1] < 200 - first_reply - 3  # reply counted
    long = converse(scripted({"Q?": [call("print('x' * 400)"), "done"]}), tool_tokenizer, rows, PythonSession,
                    max_new_tokens=60, max_iterations=2)[0]
    assert long.tool_calls == 1 and [m["role"] for m in long.messages] == ["assistant"]  # ran, reply dropped


# --------------------------------------------------------------------------- config


def test_environment_by_reference_and_errors(tmp_path: Path) -> None:
    recipe = get_recipe("tool_math")
    assert environment_class(resolve_config("tool_math", []), recipe) is PythonSession
    assert environment_class(resolve_config("tool_math", ["environment=none"]), recipe) is None
    assert environment_class(resolve_config("demo", []), get_recipe("demo")) is None
    env = tmp_path / "my_env.py"
    env.write_text("class Calc:\n    def reset(self, **row):\n        pass\n"
                   "    def add(self, a: int, b: int) -> int:\n        '''Add.\n\n        Args:\n"
                   "            a: first\n            b: second\n        '''\n        return a + b\n"
                   "class NoTools:\n    def reset(self, **row):\n        pass\n")
    cfg = resolve_config("demo", [f"environment={env}:Calc"])
    assert environment_class(cfg, get_recipe("demo")).__name__ == "Calc"
    with pytest.raises(UserError) as err:
        environment_class(resolve_config("demo", [f"environment={env}:NoTools"]), get_recipe("demo"))
    assert "reset(**row)" in err.value.what and "environment" in err.value.where
    with pytest.raises(UserError) as err:
        environment_class(resolve_config("demo", [f"environment={env}:Calk"]), get_recipe("demo"))
    assert "Calc" in err.value.fix


# --------------------------------------------------------------------------- a real run


def tool_math_run() -> subprocess.CompletedProcess:
    workdir = tempfile.mkdtemp(prefix="tool-math-")
    return subprocess.run([sys.executable, str(Path(__file__).with_name("tool_math_run.py")), workdir],
                          capture_output=True, text=True, timeout=1800, cwd=workdir)


# started when the suite is collected (tests/helpers/background.py): one fresh interpreter, a minute or two
BACKGROUND = {"test_tool_math_trains_with_trl_tool_loop_and_evaluates_with_tools": tool_math_run}


@pytest.mark.slow
def test_tool_math_trains_with_trl_tool_loop_and_evaluates_with_tools() -> None:
    """SFT warm-up on demonstrations, GRPO steps through TRL's environment_factory loop (HF generation, the real
    sandbox), then the held-out evaluation runs the same loop; chat and generate run it with the trained adapter
    (tests/tools/tool_math_run.py)."""
    proc = background.result("test_tool_math_trains_with_trl_tool_loop_and_evaluates_with_tools")
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    grpo = [m for m in run["metrics"] if m.get("stage") == "grpo"]
    assert len(grpo) == 2 and all("tools/call_frequency" in m for m in grpo), sorted(grpo[0])
    assert sum(m["tools/call_frequency"] for m in grpo) > 0  # the warmed-up model calls the tool in training
    ev = run["evaluation"]
    assert ev["settings"]["environment"] == "grpo_fast.tools.python:PythonSession"
    assert ev["trained"]["tool_use"] > 0 and "[call python(" in ev["trained"]["examples"][0]["completion"]
    assert any("[call python(" in s["completion"] and "[python -> " in s["completion"] for s in run["samples"])

    # chat and generate run the same loop with the trained adapter: calls in the sandbox, outputs shown
    records = run["records"]
    assert run["written"] == records
    assert all(r["tool_calls"] >= 1 and r["messages"][0].get("tool_calls") for r in records), records
    assert all(re.search(r"\[python -> \d+\]", r["completion"]) for r in records), records  # ran, printed a number
    assert run["chat_rc"] == 1
    assert "tools from PythonSession" in run["chat"] and re.search(r"\[python -> \d+\]", run["chat"])
