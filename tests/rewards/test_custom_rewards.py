"""Custom rewards by reference, as TRL's CLI allows: `file.py:function` (relative to the config file), a dotted
import path, or a recipe's own reward by name; they go through the same self-test, probes, guard and training."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from grpo_fast.cli import main
from grpo_fast.run.prepare import prepare
from grpo_fast.run.resolve import resolve_config

BREVITY = textwrap.dedent('''
    from grpo_fast.rewards import completion_text


    def brevity(completions, **kwargs):
        """1.0 for a reply of at most 8 words, less as it grows."""
        return [min(1.0, 8 / max(1, len(completion_text(c).split()))) for c in completions]


    brevity.reward_range = (0.0, 1.0)


    def two_args(prompt, answer):
        return [0.0]
''')


@pytest.fixture
def project(tmp_path):
    """A user's folder: a rewards file and a config naming it relative to itself."""
    (tmp_path / "my_rewards.py").write_text(BREVITY)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "run.yaml").write_text(
        "recipe: demo\nrewards:\n  - {name: sum_correct, weight: 2.0}\n  - {name: ../my_rewards.py:brevity, "
        "weight: 0.5}\n")
    return tmp_path


def test_file_reference_is_relative_to_the_config_and_trains(project, tiny_model_dir, monkeypatch):
    monkeypatch.chdir(project / "conf")  # not the file's folder: the path is taken from the config's place
    cfg = resolve_config(str(project / "conf" / "run.yaml"), [f"model={tiny_model_dir}", "max_steps=1",
                                                              "max_completion_length=8", "evaluate=false",
                                                              f"run_dir={project / 'run'}"])
    prep = prepare(cfg)
    assert prep.rewards.names == ["sum_correct", "brevity"] and prep.rewards.weights == [2.0, 0.5]
    assert prep.rewards.correctness == "sum_correct"  # the recipe's own reward, named in the config, judges
    assert any(line.startswith("gold self-test (all ") and "every reference gets full" in line for line in prep.report)
    from grpo_fast.train import train

    run = train(cfg)
    metrics = [json.loads(line) for line in (run.path / "metrics.jsonl").read_text().splitlines()]
    assert "rewards/brevity/mean" in metrics[0] and "rewards/sum_correct/mean" in metrics[0]


@pytest.mark.parametrize("ref", ["mypkg.scoring.brevity", "mypkg.scoring:brevity"])
def test_dotted_import_path(ref, project, tiny_model_dir, monkeypatch):
    package = project / "mypkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "scoring.py").write_text(BREVITY)
    monkeypatch.syspath_prepend(str(project))
    cfg = resolve_config("demo", {"model": str(tiny_model_dir), "rewards": ["sum_correct", {"name": ref}]})
    assert prepare(cfg).rewards.names == ["sum_correct", "brevity"]
    sys.modules.pop("mypkg.scoring", None)


@pytest.mark.parametrize(("ref", "needles"), [
    ("nowhere.py:brevity", ["rewards[1].name", "does not exist"]),
    ("my_rewards.py:brevty", ["no function 'brevty'", "did you mean 'brevity'"]),
    ("my_rewards.py:two_args", ["wrong signature", "def name(completions, **kwargs)"]),
    ("no_such_module.brevity", ["cannot import 'no_such_module'"]),
])
def test_wrong_references_get_one_clear_message(ref, needles, project, tiny_model_dir, monkeypatch, capsys):
    (project / "bad.yaml").write_text(f"recipe: demo\nrewards: [sum_correct, '{ref}']\n")
    monkeypatch.chdir(project)
    assert main(["train", str(project / "bad.yaml"), f"model={tiny_model_dir}"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "fix:" in err and not (project / "runs").exists()
    for needle in needles:
        assert needle in err, err


def test_rewards_check_probes_the_custom_reward(project, tiny_model_dir, capsys):
    code = main(["rewards", "check", str(project / "conf" / "run.yaml"), f"model={tiny_model_dir}"])
    out = capsys.readouterr().out
    assert "echo_prompt" in out and "sum_correct" in out
    # brevity pays an empty reply full marks: the probes catch it as they would a built-in reward
    assert code == 1 and "FAILED" in out
    empty = next(line for line in out.splitlines() if "empty" in line and "brevity" in line)
    assert "FAIL" in empty and "1.000" in empty
