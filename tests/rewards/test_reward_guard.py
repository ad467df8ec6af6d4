"""The reward guard: a failing sample scores None and is counted; a mostly failing reward stops the run."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from grpo_fast.errors import UserError
from grpo_fast.rewards.guard import FAILURES_FILE, GuardedReward, RewardFailure, guard_rewards, guard_stats


def parse_int(completions, answer, **kwargs):
    """Raises on a completion that is not an integer, as a careless reward does."""
    return [1.0 if int(c) == int(a) else 0.0 for c, a in zip(completions, answer)]


def nan_on_empty(completions, **kwargs):
    return [float("nan") if not c else 1.0 for c in completions]


def not_applicable(completions, **kwargs):
    return [None for _ in completions]


def test_name_and_metadata_are_kept():
    parse_int.reward_range = (0.0, 1.0)
    (guarded,) = guard_rewards([parse_int])
    assert isinstance(guarded, GuardedReward)
    assert guarded.__name__ == "parse_int" and guarded.reward_range == (0.0, 1.0)
    from trl.trainer.utils import get_callable_name, is_async_callable

    assert get_callable_name(guarded) == "parse_int" and not is_async_callable(guarded)


def test_whole_call_failure_is_isolated_per_sample(capsys, tmp_path):
    (guarded,) = guard_rewards([parse_int], log_dir=tmp_path, min_samples=100)
    metrics = {}
    scores = guarded(prompts=["p1", "p2", "p3"], completions=["4", "four\nlines", "5"], answer=["4", "4", "4"],
                     log_metric=lambda name, value: metrics.__setitem__(name, value))
    assert scores == [1.0, None, 0.0]
    assert guarded.stats() == {"calls": 1, "samples": 3, "failures": 1, "rate": 0.3333}
    assert metrics == {"rewards/parse_int/failure_rate": pytest.approx(1 / 3),
                       "rewards/parse_int/not_applicable": 0.0}  # a failure is not a None on purpose
    err = capsys.readouterr().err
    assert "reward 'parse_int' failed" in err and "ValueError" in err and "four\\nlines" in err
    record = json.loads((tmp_path / FAILURES_FILE).read_text().splitlines()[0])
    assert record["reward"] == "parse_int" and record["prompt"] == "p2" and record["columns"] == {"answer": "4"}


def test_nan_scores_none_and_deliberate_none_is_not_a_failure():
    nan_guard, none_guard = guard_rewards([nan_on_empty, not_applicable], min_samples=100)
    assert nan_guard(prompts=["a", "b"], completions=["", "x"]) == [None, 1.0]
    assert nan_guard.failures == 1 and "nan" in nan_guard.last_error
    assert none_guard(prompts=["a"], completions=["x"]) == [None] and none_guard.failures == 0


def test_rate_above_limit_raises_naming_reward_and_sample():
    (guarded,) = guard_rewards([parse_int], max_failure_rate=0.1, min_samples=8, max_warnings=0)
    guarded(prompts=["p"] * 4, completions=["1", "2", "3", "x"], answer=["1"] * 4)  # 1 of 4, under min_samples
    with pytest.raises(RewardFailure) as info:
        guarded(prompts=["p"] * 4, completions=["1", "2", "oops", "4"], answer=["1"] * 4)
    err = info.value
    assert isinstance(err, UserError) and err.name == "parse_int" and err.failures == 2 and err.samples == 8
    assert "reward 'parse_int' failed on 2 of 8" in str(err) and "oops" in str(err)


def test_wrong_length_is_retried_per_sample():
    calls = []

    def drops_last(completions, **kw):
        calls.append(len(completions))
        return [1.0] * max(1, len(completions) - 1)

    (guarded,) = guard_rewards([drops_last], min_samples=100)
    assert guarded(prompts=["a", "b", "c"], completions=["a", "b", "c"]) == [1.0, 1.0, 1.0]
    assert calls == [3, 1, 1, 1] and guarded.failures == 0


def test_async_reward_is_guarded_and_stays_async():
    async def judge(completions, **kw):
        if any(c == "bad" for c in completions):
            raise RuntimeError("judge timeout")
        return [0.5 for _ in completions]

    (guarded,) = guard_rewards([judge], min_samples=100, max_warnings=0)
    from trl.trainer.utils import is_async_callable

    assert is_async_callable(guarded) and guarded.__name__ == "judge"
    assert asyncio.run(guarded(prompts=["p", "p"], completions=["ok", "bad"])) == [0.5, None]
    assert guard_stats([guarded])["judge"]["failures"] == 1


def test_reward_models_and_guarded_pass_through():
    import torch

    module = torch.nn.Linear(1, 1)
    (guarded,) = guard_rewards([parse_int])
    assert guard_rewards([module, guarded]) == [module, guarded]


def test_guarded_reward_in_a_grpo_step(tmp_path):
    """TRL logs guarded rewards under their own names and trains through a failing sample."""
    from datasets import Dataset
    from tiny import tiny_model, tiny_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    seen = [0]

    def flaky(completions, **kw):  # every second sample scored raises
        scores = []
        for _ in completions:
            seen[0] += 1
            scores.append(1.0 / (seen[0] % 2))
        return scores

    tok = tiny_tokenizer()
    funcs = guard_rewards([flaky], max_failure_rate=0.6, log_dir=tmp_path)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=4, use_cpu=True, bf16=False, report_to="none",
                      save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=tiny_model(tok), processing_class=tok, reward_funcs=funcs, args=args,
                          train_dataset=Dataset.from_list([{"prompt": "What is 2 + 2?"}] * 4))
    trainer.train()
    logs = trainer.state.log_history[0]
    assert logs["rewards/flaky/mean"] == 1.0 and math.isfinite(logs["loss"])
    assert logs["rewards/flaky/failure_rate"] == 0.5
    assert funcs[0].failures == 2 and (tmp_path / FAILURES_FILE).exists()
