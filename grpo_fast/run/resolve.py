"""Resolve a run's config from its layers, lowest precedence first: kit defaults, hardware profile, recipe
defaults, the YAML file, then ``key=value`` overrides from the command line (or keyword arguments in Python).

Every key remembers where it was set (``run.yaml:12`` for nested keys too), so an error can point at it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from grpo_fast import models
from grpo_fast.config import RunConfig, build_config
from grpo_fast.config.grpo_args import advice
from grpo_fast.config.locations import path_text
from grpo_fast.errors import UserError
from grpo_fast.models.plan import profile_for
from grpo_fast.models.templates import is_template_text
from grpo_fast.recipes import get_recipe

# GRPOConfig values the kit chooses over TRL's defaults, for every run.
KIT_DEFAULTS: dict[str, Any] = {
    "report_to": "none",  # TRL's "all" reports to whatever tracker happens to be installed
    "logging_steps": 1,  # a short run still gets a curve
    "save_strategy": "steps",
    "save_steps": 100,
    "save_total_limit": 2,  # the newest checkpoint and one before it, in case the newest is damaged
    "learning_rate": 5.0e-6,  # LoRA GRPO; TRL's 1e-6 is tuned for full fine-tuning
    "num_generations": 8,
    "max_completion_length": 256,
}
# Hardware-shaped defaults; ``auto`` picks one from the GPU (or its absence).
PROFILES: dict[str, dict[str, Any]] = {
    # measured in benchmarks/bench_trainer.py: no checkpointing (nothing to save on CPU RAM); the rest `auto`,
    # decided per machine by cpu_choice: bf16 autocast for the training pass where the CPU has native bf16
    # (generation stays fp32 everywhere), each prompt group's prompt computed once (generation and training
    # forward), LoRA merged into temporary weights while generating, threads on the cores other jobs leave free
    "cpu": {"bf16": False, "use_cpu": True, "gradient_checkpointing": False, "cpu_threads": "auto",
            "cpu_autocast_training": "auto", "shared_prefill": "auto", "merged_generation": "auto"},
    "memory": {"load_in_4bit": True, "optim": "adamw_8bit", "gradient_checkpointing": True,
               "num_generations": 4, "per_device_train_batch_size": 4, "use_vllm": True,
               "vllm_gpu_memory_utilization": 0.5},
    "performance": {"use_vllm": True, "vllm_mode": "colocate", "num_generations": 16,
                    "per_device_train_batch_size": 16, "vllm_gpu_memory_utilization": 0.6},
}


def profile_settings(name: str) -> tuple[str, dict[str, Any], str]:
    """(profile name, its settings, why it was chosen); ``auto`` picks from the GPU's memory."""
    card = models.gpu_memory_gb()
    why = "asked for in the config"
    if name == "auto":
        name = profile_for(card)
        why = "no GPU" if card is None else f"{card:.0f} GiB GPU"
    if name not in PROFILES:
        raise UserError(f"unknown profile {name!r}", "config key 'profile'", "use auto, cpu, memory or performance")
    settings = dict(PROFILES[name])
    if card is not None:
        bf16 = models.bf16_supported()
        settings.update({"bf16": bf16, "fp16": not bf16})
    return name, settings, why


# --------------------------------------------------------------------------- reading YAML and overrides


def read_yaml(path: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Parse a YAML config; return its mapping and the file:line of every key, nested ones included."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"config file {str(path)!r} does not exist", str(path), "check the path") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read config file: {err}", str(path), "save it as UTF-8 text") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err)
        raise UserError(f"YAML syntax error: {problem}", where, "fix the YAML at that line") from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise UserError("a config file must be a YAML mapping of key: value", str(path), "see recipes/*.yaml")
    lines: dict[str, str] = {}
    _node_lines(node, (), path, lines)
    return data, lines


def _node_lines(node: yaml.Node, at: tuple, path: Path, out: dict[str, str]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            here = (*at, key.value)
            out[path_text(here)] = f"{path}:{key.start_mark.line + 1}"
            _node_lines(value, here, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            here = (*at, i)
            out[path_text(here)] = f"{path}:{item.start_mark.line + 1}"
            _node_lines(item, here, path, out)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``key=value`` strings from the command line; values are read as YAML scalars (1e-5, true, [a, b])."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"override {item!r} is not key=value", "command line", "write e.g. max_steps=20")
        try:
            out[key.strip().replace("-", "_")] = yaml.safe_load(raw) if raw else None
        except yaml.YAMLError:
            out[key.strip().replace("-", "_")] = raw
    return out


def is_config_file(target: str) -> bool:
    return target.endswith((".yaml", ".yml")) or Path(target).is_file()


# --------------------------------------------------------------------------- layering


def resolve_config(target: str | RunConfig | None = None,
                   overrides: list[str] | dict[str, Any] | None = None) -> RunConfig:
    """The RunConfig for a recipe name or YAML file (or a RunConfig to change) plus overrides.

    ``overrides``: ``key=value`` strings (command line) or a mapping (Python API).
    """
    cli = parse_overrides(overrides) if isinstance(overrides, list) else dict(overrides or {})
    file_values: dict[str, Any] = {}
    lines: dict[str, str] | str = {}
    if isinstance(target, RunConfig):
        file_values, lines = target.to_dict(), "the given RunConfig"
    elif target and is_config_file(target):
        file_values, lines = read_yaml(target)
        _anchor_reward_files(file_values, Path(target).resolve().parent)
        _anchor_own_files(file_values, Path(target).resolve().parent)
    elif target:
        cli.setdefault("recipe", target)
    _anchor_own_files(cli, Path.cwd())  # config.yaml records them absolute: evaluation resolves it from the run dir
    # Unsloth patches transformers, trl and peft when it is imported: before the recipe (its data and rewards) loads
    models.preimport_unsloth(str(cli.get("backend") or file_values.get("backend") or "auto"))
    recipe = get_recipe(str(cli.get("recipe") or file_values.get("recipe") or "demo"))
    profile, settings, why = profile_settings(str(cli.get("profile") or file_values.get("profile") or "auto"))
    cfg = build_config([
        (KIT_DEFAULTS, "grpo_fast default"),
        (settings, f"profile {profile}"),
        (recipe.defaults, f"recipe {recipe.name}"),
        (file_values, lines),
        (cli, "command line"),
    ])
    cfg.profile = profile  # type: ignore[assignment]
    flat = cfg.to_dict()
    chosen = {k: v for k, v in settings.items() if flat.get(k) == v}
    if chosen:
        cfg.notes.append(f"profile {profile} ({why}): " + ", ".join(f"{k}={v}" for k, v in chosen.items()))
    for stage in cfg.stage_list:
        cfg.notes.extend(f"stage {stage.name}: {note}" if cfg.stages else note for note in advice(stage.cfg.grpo)
                         if not stage.sft)
    return cfg


def _anchor_own_files(values: dict[str, Any], base: Path) -> None:
    """``recipe: my_task.py:RECIPE`` and ``chat_template: my.jinja`` are relative to the config file too."""
    recipe = values.get("recipe")
    if isinstance(recipe, str) and ".py:" in recipe and not Path(recipe.split(".py:")[0]).is_absolute():
        values["recipe"] = f"{base / recipe.split('.py:')[0]}.py:{recipe.split('.py:', 1)[1]}"
    template = values.get("chat_template")
    if isinstance(template, str) and not is_template_text(template) and not Path(template).expanduser().is_absolute():
        values["chat_template"] = str(base / template)


def _anchor_reward_files(values: dict[str, Any], base: Path) -> None:
    """``rewards: [{name: my_rewards.py:brevity}]`` is relative to the config file: make it absolute."""
    rewards = values.get("rewards")
    if not isinstance(rewards, list):
        return
    for i, item in enumerate(rewards):
        name = item.get("name") if isinstance(item, dict) else item
        if isinstance(name, str) and ".py:" in name and not Path(name.split(".py:")[0]).is_absolute():
            anchored = f"{base / name.split('.py:')[0]}.py:{name.split('.py:', 1)[1]}"
            rewards[i] = {**item, "name": anchored} if isinstance(item, dict) else anchored
