"""Health monitor: every alarm from synthetic TRL logs, dedupe, stop with checkpoint in a real GRPO run."""

from __future__ import annotations

import json

import pytest
from transformers import TrainerControl, TrainerState, TrainingArguments

from grpo_fast.errors import UserError
from grpo_fast.watch.health import HEALTH_FILE, HealthMonitor, read_events
from grpo_fast.watch.remedies import NOTES, REMEDIES
from grpo_fast.watch.signals import RewardScale

HEALTHY = {"reward": 1.0, "reward_std": 0.5, "frac_reward_zero_std": 0.1, "loss": 0.01, "grad_norm": 0.3,
           "entropy": 1.5, "completions/clipped_ratio": 0.0, "completions/mean_length": 40.0}


def feed(monitor: HealthMonitor, logs: list[dict]) -> TrainerControl:
    """Drive ``on_log`` as the Trainer does: one call per logged step, the same control object throughout."""
    args = TrainingArguments(output_dir="unused", report_to="none")
    state, control = TrainerState(), TrainerControl()
    for step, entry in enumerate(logs, start=1):
        state.global_step = step
        control = monitor.on_log(args, state, control, logs=entry) or control
    return control


def rising(n: int, start: float = 0.0, step: float = 0.1, **extra) -> list[dict]:
    """Healthy logs whose reward keeps improving (so no plateau)."""
    return [{**HEALTHY, "reward": start + step * i, **extra} for i in range(n)]


def kinds(monitor: HealthMonitor) -> list[str]:
    return [e.kind for e in monitor.events]


FMT_OK = RewardScale(format_reward="fmt", correctness_reward="ok")
UNIT = RewardScale(0.0, 1.0, "fmt", "ok", (("fmt", 0.0, 1.0), ("ok", 0.0, 1.0)))


def flat(n: int, reward: float = 0.5, **extra) -> list[dict]:
    """Healthy-looking logs whose reward does not move."""
    return [{**HEALTHY, "reward": reward, **extra} for _ in range(n)]


def test_healthy_run_raises_nothing(tmp_path):
    monitor = HealthMonitor(tmp_path, scale=FMT_OK, echo=False)
    control = feed(monitor, rising(30, **{"rewards/fmt/mean": 0.5, "rewards/ok/mean": 0.5, "kl": 0.05}))
    assert monitor.events == [] and not control.should_training_stop
    assert not (tmp_path / HEALTH_FILE).exists()


@pytest.mark.parametrize("kind, logs", [
    ("low_reward_std", flat(5, reward_std=0.5) + flat(10, reward_std=0.01)),  # the spread shrank, reward flat
    ("zero_std_groups", flat(10, reward=0.0, reward_std=0.0, frac_reward_zero_std=1.0)),
    ("kl_high", rising(3) + [{**HEALTHY, "reward": 1.0, "kl": 0.8}]),
    ("plateau", [{**HEALTHY, "reward": 0.40 + 0.001 * (i % 3)} for i in range(20)]),
    ("nonfinite", rising(2) + [{**HEALTHY, "loss": float("nan")}]),
    ("nonfinite", rising(2) + [{**HEALTHY, "grad_norm": float("inf")}]),
    # the judge near its floor, not at it (at it from the start is no_correct's case, below)
    ("reward_hacking", [{**HEALTHY, "reward": 0.02 * i, "rewards/fmt/mean": 0.05 * i, "rewards/ok/mean": 0.01}
                        for i in range(20)]),
    ("no_correct", rising(5, **{"rewards/fmt/mean": 0.5, "rewards/ok/mean": 0.0})),
    ("no_signal", flat(10, reward=1.0, reward_std=0.0, frac_reward_zero_std=1.0)),
    ("clipped", rising(5, **{"completions/clipped_ratio": 0.9})),
    ("entropy_collapse", flat(10, entropy=0.01)),
    ("entropy_collapse", flat(10, entropy=2.0) + flat(3, entropy=0.15)),  # median fell to < 10% of the start's
    ("reward_errors", rising(3, **{"rewards/ok/failure_rate": 0.0}) + rising(1, **{"rewards/ok/failure_rate": 0.2})),
])
def test_each_alarm_fires_with_its_remedy(kind, logs, tmp_path, capsys):
    monitor = HealthMonitor(tmp_path, scale=UNIT)
    control = feed(monitor, logs)
    assert kinds(monitor) == [kind]
    event = monitor.events[0]
    assert event.step == len(logs) and event.remedy == REMEDIES[kind] and event.action == "warn"
    assert event.value is not None or kind == "nonfinite"
    assert not control.should_training_stop  # on_alarm=warn only warns
    err = capsys.readouterr().err
    assert f"HEALTH [{kind}] step {len(logs)}" in err and "remedy:" in err
    (record,) = read_events(tmp_path)
    assert record["kind"] == kind and record["step"] == len(logs) and record["remedy"] == REMEDIES[kind]


def test_converged_is_a_note_that_never_stops(tmp_path, capsys):
    """A reward that rose to the maximum and stays there without spread: the task is learned, not broken."""
    monitor = HealthMonitor(tmp_path, scale=UNIT, on_alarm="stop")
    control = feed(monitor, rising(10, start=0.1, step=0.08) +
                   flat(20, reward=0.99, reward_std=0.0, frac_reward_zero_std=1.0, entropy=0.01))
    assert kinds(monitor) == ["converged"] and monitor.events[0].action == "note" and monitor.warnings == []
    assert not control.should_training_stop and monitor.stopped_by is None
    assert "HEALTH note [converged] step 19" in capsys.readouterr().err


def test_learning_run_is_quiet_when_entropy_falls_and_groups_agree():
    """The demo's shape once it learns: entropy falls to ~0, most groups all right or all wrong, reward up."""
    monitor = HealthMonitor(scale=UNIT, echo=False)
    logs = [{**HEALTHY, "reward": 0.2 + 0.02 * i if i < 20 else (1.0 if i % 2 else 0.2),
             "reward_std": 0.3 if i < 20 else 0.0, "frac_reward_zero_std": 0.0 if i < 20 else 1.0,
             "entropy": max(0.01, 2.0 - 0.1 * i)} for i in range(60)]
    feed(monitor, logs)
    assert monitor.events == []


def test_no_spread_is_an_alarm_only_without_progress():
    """Groups without spread after the reward rose (some prompts always solved, others never) are a sure policy;
    the same without a rise, or with a reward that is the same everywhere, is a run without signal."""
    learned = rising(10, start=0.1, step=0.02) + [
        {**HEALTHY, "reward": 0.3 if i % 2 else 0.9, "reward_std": 0.0, "frac_reward_zero_std": 1.0}
        for i in range(12)]
    monitor = HealthMonitor(echo=False)
    feed(monitor, learned)
    assert monitor.events == []
    stuck = [{**HEALTHY, "reward": 0.3 if i % 2 else 0.9, "reward_std": 0.0, "frac_reward_zero_std": 1.0}
             for i in range(10)]
    monitor = HealthMonitor(echo=False)
    feed(monitor, stuck)
    assert kinds(monitor) == ["zero_std_groups"] and "since the first 5 steps" in monitor.events[0].message
    monitor = HealthMonitor(echo=False)
    feed(monitor, flat(10, reward=0.7, reward_std=0.0, frac_reward_zero_std=1.0))
    assert kinds(monitor) == ["zero_std_groups"] and "barely moves" in monitor.events[0].message


def test_hacking_needs_flat_correctness():
    monitor = HealthMonitor(scale=FMT_OK, echo=False)
    feed(monitor, [{**HEALTHY, "reward": 0.1 * i, "rewards/fmt/mean": 0.05 * i, "rewards/ok/mean": 0.05 * i}
                   for i in range(20)])
    assert "reward_hacking" not in kinds(monitor)


def test_one_warning_per_episode_of_trouble_with_its_count_and_last_step(tmp_path, capsys):
    monitor = HealthMonitor(tmp_path, window=5)
    healthy = rising(10, start=1.4)
    feed(monitor, rising(14, **{"completions/clipped_ratio": 0.9}) + healthy)  # holds from step 5 to 14
    assert [(e.step, e.count, e.last_step) for e in monitor.events] == [(5, 12, 16)]  # a 5-step mean
    assert len((tmp_path / HEALTH_FILE).read_text().splitlines()) == 1
    err = capsys.readouterr().err
    assert err.count("HEALTH [clipped] step 5:") == 1 and "from step 5 to 16: held at 12 logged steps" in err
    assert monitor.summary()["episodes"] == [{"kind": "clipped", "step": 5, "last_step": 16, "count": 12}]
    # trouble that comes back after a quiet spell longer than the window is a new episode, printed again
    feed(monitor, rising(14, **{"completions/clipped_ratio": 0.9}))
    assert [e.kind for e in monitor.events] == ["clipped"] * 2 and monitor.events[1].count >= 10
    assert len((tmp_path / HEALTH_FILE).read_text().splitlines()) == 2


def test_no_signal_when_the_reward_sits_at_its_maximum_without_spread_from_the_start(capsys):
    monitor = HealthMonitor(scale=UNIT)
    feed(monitor, flat(25, reward=1.0, reward_std=0.0, frac_reward_zero_std=1.0))
    assert kinds(monitor) == ["no_signal"]  # not the converged note: it never learned, it started there
    event = monitor.events[0]
    assert event.step == 10 and event.count == 16 and "harder task" in event.remedy
    assert "rewards check" in event.remedy


def test_a_run_that_learned_to_the_maximum_is_converged_not_no_signal():
    monitor = HealthMonitor(scale=UNIT, echo=False)
    feed(monitor, rising(10, start=0.1, step=0.08) + flat(15, reward=1.0, reward_std=0.0, frac_reward_zero_std=1.0))
    assert "no_signal" not in kinds(monitor) and "converged" in kinds(monitor)


def test_hacking_names_the_climbing_reward_and_the_judge_at_its_floor():
    scale = RewardScale(0.0, 3.0, "fmt", "ok", (("fmt", 0.0, 1.0), ("ok", 0.0, 1.0), ("wordy", 0.0, 1.0)))
    logs = [{**HEALTHY, "reward": 0.04 * i, "rewards/fmt/mean": 0.5, "rewards/wordy/mean": 0.04 * i,
             "rewards/ok/mean": 0.0} for i in range(20)]
    monitor = HealthMonitor(scale=scale, echo=False)
    feed(monitor, logs)
    assert kinds(monitor) == ["no_correct", "reward_hacking"]  # the judge scored nothing from the start, too
    assert "'wordy'" in monitor.events[1].message and "'ok'" in monitor.events[1].message
    # the same climb while the judge is flat but well above its floor: a model that already answers, not hacking
    above = HealthMonitor(scale=scale, echo=False)
    feed(above, [{**row, "rewards/ok/mean": 0.6} for row in logs])
    assert "reward_hacking" not in kinds(above)


def test_stop_sets_training_stop_and_save():
    monitor = HealthMonitor(on_alarm="stop", stop_on={"nonfinite"}, echo=False)
    control = feed(monitor, rising(5, **{"completions/clipped_ratio": 0.9}))  # not in stop_on: only warned
    assert kinds(monitor) == ["clipped"] and not control.should_training_stop
    control = feed(monitor, [{**HEALTHY, "loss": float("nan")}])
    assert control.should_training_stop and control.should_save
    assert monitor.stopped_by.kind == "nonfinite" and monitor.events[-1].action == "stop"
    assert monitor.summary()["events"] == {"clipped": 1, "nonfinite": 1}


def test_logs_without_reward_are_ignored_and_bad_options_refused():
    monitor = HealthMonitor(echo=False)
    feed(monitor, [{"train_runtime": 1.0, "train_loss": float("nan")}])
    assert monitor.rules.rows == [] and monitor.events == []
    with pytest.raises(UserError, match="on_alarm"):
        HealthMonitor(on_alarm="panic")
    with pytest.raises(UserError, match="'low_reward_std'"):  # the message lists the alarm kinds
        HealthMonitor(stop_on=["nan"])
    with pytest.raises(UserError, match="'reward_errors'"):
        HealthMonitor(stop_on=["converged"])  # a note is not an alarm: it cannot stop a run


def test_real_grpo_run_stops_early_with_a_checkpoint(tmp_path):
    """A constant reward gives zero std: the monitor stops TRL's trainer after ``spread_window`` steps, saving
    first."""
    from datasets import Dataset
    from tiny import tiny_model, tiny_tokenizer
    from trl import GRPOConfig, GRPOTrainer

    def constant(completions, **kwargs):
        return [1.0 for _ in completions]

    tok = tiny_tokenizer()
    monitor = HealthMonitor(tmp_path, on_alarm="stop", spread_window=2, max_clipped_ratio=1.0, echo=False)
    args = GRPOConfig(output_dir=str(tmp_path / "checkpoints"), max_steps=8, per_device_train_batch_size=4,
                      num_generations=4, max_completion_length=4, use_cpu=True, bf16=False, report_to="none",
                      save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=tiny_model(tok), processing_class=tok, reward_funcs=[constant], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "What is 2 + 2?"}] * 32),
                          callbacks=[monitor])
    trainer.train()
    assert trainer.state.global_step == 2
    assert (tmp_path / "checkpoints" / "checkpoint-2").is_dir()
    events = [json.loads(line) for line in (tmp_path / HEALTH_FILE).read_text().splitlines()]
    assert [(e["kind"], e["action"], e["step"]) for e in events] == [("zero_std_groups", "stop", 2)]
    assert monitor.stopped_by.kind == "zero_std_groups"


def test_for_run_takes_the_runs_rewards_and_the_config_thresholds(tiny_model_dir):
    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config

    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "health={window: 3, max_kl: 0.2}", "on_alarm=stop"])
    prep = prepare(cfg)
    monitor = HealthMonitor.for_run(None, cfg.health, prep.rewards, cfg.on_alarm)
    assert (monitor.scale.format_reward, monitor.scale.correctness_reward) == ("just_the_number", "sum_correct")
    assert (monitor.scale.low, monitor.scale.high) == (0.0, prep.rewards.max_total) == (0.0, 3.0)
    assert monitor.scale.span_of("sum_correct") == 1.0
    s = monitor.settings
    assert (s.window, s.max_kl, s.trend_window, monitor.on_alarm) == (3, 0.2, 20, "stop")


def test_every_alarm_kind_has_a_remedy():
    import typing

    from grpo_fast.config import AlarmKind

    assert set(typing.get_args(AlarmKind)) | NOTES == set(REMEDIES)


def test_a_reward_without_a_maximum_that_rose_and_settled_reads_as_converged():
    """Another TRL run's log (no reward metadata): risen, then the same reward everywhere is learned, not stuck."""
    monitor = HealthMonitor(on_alarm="stop", echo=False)
    control = feed(monitor, rising(10, start=0.1, step=0.05) + flat(10, reward=1.0, reward_std=0.0,
                                                                      frac_reward_zero_std=1.0))
    assert kinds(monitor) == ["converged"] and monitor.events[0].step == 20 and not control.should_training_stop


def test_no_correct_is_said_once_at_the_start_and_only_when_no_completion_scored():
    at_floor = {"rewards/fmt/mean": 0.5, "rewards/ok/mean": 0.0}
    monitor = HealthMonitor(scale=UNIT, echo=False)
    said = [monitor.observe(step, row) for step, row in enumerate(rising(15, **at_floor), start=1)]
    assert [len(events) for events in said[:4]] == [0, 0, 0, 0]  # not before the window's worth of steps
    assert [e.kind for e in said[4]] == ["no_correct"] and said[4][0].step == 5
    assert kinds(monitor).count("no_correct") == 1  # said once, not again at every later step
    scored_once = rising(2, **at_floor) + rising(1, **{**at_floor, "rewards/ok/mean": 0.125}) + rising(2, **at_floor)
    for scale, logs in ((UNIT, scored_once), (FMT_OK, rising(5, **at_floor))):  # FMT_OK: the judge's floor unknown
        monitor = HealthMonitor(scale=scale, echo=False)
        feed(monitor, logs)
        assert "no_correct" not in kinds(monitor)


@pytest.mark.slow
def test_a_real_run_whose_judge_never_scores_says_so_at_its_start(in_tmp, capsys):
    """The embedded model on math problems whose answers it cannot write in 16 tokens: the judge gives every
    completion 0, and the run says so after its first ``window`` steps, naming the warm-up fix."""
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import train

    rows = [{"question": f"What is {a} times {b}, divided by 7?", "answer": f"{a * b / 7:.4f}"}
            for a in (9871, 7723, 6151, 8837) for b in (6653, 8819)]
    (in_tmp / "hard.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = resolve_config("math", ["dataset=hard.jsonl", "eval_rows=1", "max_steps=2", "max_completion_length=16",
                                  "num_generations=2", "per_device_train_batch_size=2", "evaluate=false",
                                  "health={window: 2}"])
    result = train(cfg)
    events = read_events(result.path)
    assert [(e["kind"], e["step"]) for e in events if e["kind"] == "no_correct"] == [("no_correct", 2)]
    err = capsys.readouterr().err
    assert "HEALTH [no_correct] step 2" in err and "SFT warm-up" in err
