"""`grpo-fast health` / ``grpo_fast.health``: the recorded runs beside this file replayed by the current rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import grpo_fast
from grpo_fast import cli
from grpo_fast.errors import UserError

CORPUS = Path(__file__).resolve().parent / "health_corpus"
LABELS = json.loads((CORPUS / "labels.json").read_text())
RECORDED = {p.parent.name for p in CORPUS.glob("*/metrics.jsonl")}


@pytest.mark.parametrize("name", sorted(set(LABELS["healthy"]) & RECORDED))
def test_healthy_recorded_runs_raise_no_warning_and_are_never_stopped(name):
    assert grpo_fast.health(CORPUS / name).warnings == []
    assert grpo_fast.health(CORPUS / name, on_alarm="stop").stopped_by is None


@pytest.mark.parametrize("name", sorted(set(LABELS["broken"]) & RECORDED))
def test_broken_recorded_runs_raise_their_labelled_alarm_in_time(name):
    label = LABELS["broken"][name]
    replay = grpo_fast.health(CORPUS / name)
    first = replay.first_step(label["kinds"])
    assert first is not None and first <= label["by_step"], replay.text()
    event = next(e for e in replay.events if e.kind in label["kinds"])
    assert event.value is not None and event.remedy  # it names what it saw and what to do
    stopped = grpo_fast.health(CORPUS / name, on_alarm="stop").stopped_by
    assert stopped is not None and stopped.step <= label["by_step"]


def test_the_corpus_knows_the_reward_range_from_its_config():
    replay = grpo_fast.health(CORPUS / "clipped")
    assert (replay.scale.low, replay.scale.high) == (0.0, 3.0)
    assert (replay.scale.format_reward, replay.scale.correctness_reward) == ("just_the_number", "sum_correct")


def test_a_trl_trainer_state_replays_like_the_kit_log(tmp_path):
    """Another TRL run: the same logged steps in ``trainer_state.json``'s log_history (plus TRL's final summary
    entry, which has no reward) give the same events, found from the output folder's newest checkpoint."""
    rows = [json.loads(line) for line in (CORPUS / "clipped" / "metrics.jsonl").read_text().splitlines()]
    for checkpoint, upto in (("checkpoint-10", 10), ("checkpoint-20", 20)):
        folder = tmp_path / "outputs" / checkpoint
        folder.mkdir(parents=True)
        history = [*rows[:upto], {"train_runtime": 12.5, "step": upto}]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": upto, "log_history": history}))
    kit = grpo_fast.health(CORPUS / "clipped", settings={})
    trl = grpo_fast.health(tmp_path / "outputs")
    assert trl.source.parent.name == "checkpoint-20" and trl.steps == 20 and trl.scale.high is None
    assert [(e.kind, e.step) for e in trl.events] == [(e.kind, e.step) for e in kit.events]


@pytest.mark.parametrize("config, said", [
    (None, "reward range unknown (no config.yaml or run.yaml beside the metrics)"),
    ("recipe: demo\nrewards: [{name: 'gone.py:score'}]\n", "reward range unknown (the run's rewards cannot be built "
                                                           "here: "),
    ("recipe: [demo\n", "reward range unknown ("),
])
def test_a_range_the_replay_cannot_rebuild_is_said_with_its_reason(tmp_path, config, said):
    """A replay whose rewards cannot be rebuilt here weighs the rewards against the learnt span, and says why."""
    (tmp_path / "metrics.jsonl").write_text((CORPUS / "clipped" / "metrics.jsonl").read_text())
    if config is not None:
        (tmp_path / "config.yaml").write_text(config)
    replay = grpo_fast.health(tmp_path)
    assert replay.scale.high is None and said in replay.text().splitlines()[-1], replay.text()
    assert replay.scale.unknown


def test_cli_prints_the_events_and_exits_1_on_a_warning(capsys):
    assert cli.main(["health", str(CORPUS / "clipped"), "--on-alarm", "stop"]) == 1
    out = capsys.readouterr().out
    assert "HEALTH [clipped] step 5" in out and "on_alarm: stop would stop it at step 5" in out
    assert cli.main(["health", str(CORPUS / "clipped"), "max_clipped_ratio=1.0"]) == 0
    assert "no warning" in capsys.readouterr().out


@pytest.mark.parametrize("make, words", [
    (lambda tmp: tmp / "missing", "does not exist"),
    (lambda tmp: tmp, "holds no logged metrics"),
    (lambda tmp: _write(tmp / "metrics.jsonl", "not json\n"), "is not a metrics log"),
    (lambda tmp: _write(tmp / "trainer_state.json", json.dumps({"log_history": [{"loss": 1.0, "step": 1}]})),
     "has no logged GRPO step"),
])
def test_bad_input_is_one_message_and_exit_2(tmp_path, capsys, make, words):
    target = make(tmp_path)
    with pytest.raises(UserError, match=words):
        grpo_fast.health(target)
    assert cli.main(["health", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in err and "fix: " in err and "Traceback" not in err


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_every_run_says_when_it_its_label_and_its_rules_were_written_and_broken_runs_their_outcome():
    """Issue 52: a broken run's label stands on its recorded outcome (held-out line, judge means), and a run counts
    as independent only when every rule judging it predates it and its label was not written after it."""
    provenance = LABELS["provenance"]
    assert set(provenance) == set(LABELS["healthy"]) | set(LABELS["broken"])
    for name, spec in LABELS["broken"].items():
        assert spec["outcome"]["judge_means"] or spec["outcome"].get("clipped_ratio_mean") is not None, name
    for name, given in provenance.items():
        recorded = given["run_recorded"].split()[1]
        if given["independent"]:
            assert all(rule.split()[1] < recorded for rule in given["rules"].values()), name
            assert given["label_written"].split()[1] <= recorded, name
        else:
            assert given["why"], name
