"""Config loading: YAML + overrides, GRPOConfig passthrough, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_fast.config import build_config
from grpo_fast.errors import UserError
from grpo_fast.run.resolve import parse_overrides, read_yaml, resolve_config


def test_recipe_defaults_file_and_overrides_layer_in_order(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("recipe: demo\nlearning_rate: 1.0e-4\nmax_steps: 7\nlora_r: 8\n")
    cfg = resolve_config(str(path), ["max_steps=3", "beta=0.04"])
    assert cfg.recipe == "demo" and cfg.lora_r == 8
    assert cfg.grpo["learning_rate"] == 1.0e-4  # file beats recipe default (2e-4)
    assert cfg.grpo["max_steps"] == 3  # command line beats file
    assert cfg.grpo["beta"] == 0.04  # any GRPOConfig field passes through
    assert cfg.grpo["bf16"] is False and cfg.profile == "cpu"  # CPU-safe default, TRL's bf16 would fail
    assert cfg.where("learning_rate").endswith("run.yaml:2)")


def test_unknown_key_names_file_line_and_suggests(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("recipe: demo\nlearning_rat: 1.0e-4\n")
    with pytest.raises(UserError) as err:
        resolve_config(str(path))
    text = str(err.value)
    assert "learning_rat" in text and "run.yaml:2" in text and "learning_rate" in text


def test_removed_trl_key_explains_replacement():
    with pytest.raises(UserError, match="max_prompt_tokens"):
        resolve_config("demo", ["max_prompt_length=256"])


def test_wrong_type_is_rejected_with_key():
    with pytest.raises(UserError, match="'lora_r' input should be a valid integer"):
        build_config([({"lora_r": "big"}, "test")])
    with pytest.raises(UserError, match="'num_generations'"):
        build_config([({"num_generations": 2.5}, "test")])


def test_generation_batch_must_divide_by_group_size():
    with pytest.raises(UserError, match=r"must be divisible by num_generations \(3\)"):
        resolve_config("demo", ["num_generations=3"])
    cfg = resolve_config("demo", ["num_generations=4", "per_device_train_batch_size=4"])
    assert cfg.grpo["num_generations"] == 4


def test_output_dir_is_owned_by_the_kit():
    with pytest.raises(UserError, match="set 'run_dir' instead"):
        resolve_config("demo", ["output_dir=/tmp/x"])


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("recipe: demo\nlearning_rate: [1, 2\nmax_steps: 3\n")
    with pytest.raises(UserError) as err:
        read_yaml(path)
    assert "YAML syntax error" in str(err.value) and "bad.yaml:" in str(err.value)


def test_missing_file_and_non_mapping(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        read_yaml(tmp_path / "nope.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(UserError, match="mapping"):
        read_yaml(path)


def test_overrides_parse_yaml_scalars():
    assert parse_overrides(["a=1", "b=1.0e-5", "c=true", "d=[x, y]", "e=text"]) == {
        "a": 1, "b": 1e-5, "c": True, "d": ["x", "y"], "e": "text"}
    with pytest.raises(UserError, match="key=value"):
        parse_overrides(["oops"])


def test_unknown_recipe_suggests():
    with pytest.raises(UserError, match="did you mean 'math'"):
        resolve_config("maths")


def test_to_dict_is_flat_and_round_trips(tmp_path):
    cfg = resolve_config("demo", ["max_steps=2"])
    flat = cfg.to_dict()
    assert flat["max_steps"] == 2 and "grpo" not in flat
    again = build_config([(flat, "round trip")])
    assert again.to_dict() == flat


def test_yaml_no_stays_a_strategy_name():
    cfg = resolve_config("demo", ["save_strategy=no", "eval_strategy=no"])
    assert cfg.grpo["save_strategy"] == "no" and cfg.grpo["eval_strategy"] == "no"


def test_unknown_profile_is_a_user_error():
    with pytest.raises(UserError, match="unknown profile 'fast'"):
        resolve_config("demo", ["profile=fast"])


def test_cispo_without_epsilon_high_is_said_once_with_its_fix():
    """TRL's default epsilon_high (= epsilon) caps every CISPO weight at 0.2: the run's report says so, and a
    run that sets epsilon_high (or uses another loss) hears nothing about it."""
    cispo = [n for n in resolve_config("demo", ["loss_type=cispo"]).notes if "cispo" in n]
    assert len(cispo) == 1 and "epsilon_high: 5.0" in cispo[0] and "0.2" in cispo[0]
    assert not [n for n in resolve_config("demo", ["loss_type=cispo", "epsilon_high=5.0"]).notes if "cispo" in n]
    assert not [n for n in resolve_config("demo", ["loss_type=dapo"]).notes if "cispo" in n]
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "tool_math_short_warmup.yaml"
    staged = [n for n in resolve_config(str(recipe), ["loss_type=cispo"]).notes if "cispo" in n]
    assert staged and all(n.startswith("stage grpo:") for n in staged)  # the SFT warm-up has no GRPO loss
