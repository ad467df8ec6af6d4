"""Building a run configuration: layers merged (defaults, profile, recipe, file, command line), then validated at
every depth against the schema, with every error naming the key by its full path (``stages[1].max_steps``,
``rewards[0].weight``) and the file:line it came from, and the closest known key when it is a typo.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import ValidationError

from grpo_fast.config import grpo_args
from grpo_fast.config.locations import Path_, key_label, path_text, unknown_key
from grpo_fast.config.schema import KIT_KEYS, REWARD_KINDS, HealthSettings, RewardSpec, RunConfig, Stage
from grpo_fast.errors import UserError


def build_config(layers: list[tuple[dict[str, Any], dict[str, str] | str]]) -> RunConfig:
    """Merge layers (values, where each key came from), lowest precedence first, and validate every depth.

    ``where`` is a map of key paths (``stages[1].max_steps``) to file:line, or one label for the whole layer.
    """
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for layer, where in layers:
        for key, value in layer.items():
            values[key] = value
            for stale in [k for k in source if k == key or k.startswith((f"{key}.", f"{key}["))]:
                del source[stale]
            if isinstance(where, str):
                source[key] = where
            else:
                source.update({k: v for k, v in where.items() if k == key or k.startswith((f"{key}.", f"{key}["))})
    cfg = validate(values, source)
    for i, raw in enumerate(cfg.stages or []):
        cfg.add_stage(_stage(cfg, values, source, i, raw))
    return cfg


def validate(values: dict[str, Any], source: dict[str, str], prefix: Path_ = ()) -> RunConfig:
    """One flat mapping -> a checked RunConfig: kit keys by the schema, GRPO fields by TRL's types and checks."""
    kit: dict[str, Any] = {}
    grpo: dict[str, Any] = {}
    known = grpo_args.fields()
    for key, value in values.items():
        label = key_label((*prefix, key), source)
        if key in KIT_KEYS:
            kit[key] = value
        elif key in known or key in grpo_args.REMOVED or key in grpo_args.OWNED:
            grpo[key] = grpo_args.coerce(key, value, label)
        else:
            raise unknown_key(key, [*KIT_KEYS, *known], label)
    try:
        cfg = RunConfig.model_validate({**kit, "grpo": grpo})
    except ValidationError as err:
        raise _schema_error(err, prefix, source) from None
    cfg.attach(source, path_text(prefix), lambda key: key_label((*prefix, key), source))
    _combinations(cfg)
    return cfg


def _combinations(cfg: RunConfig) -> None:
    """Combinations of kit keys that cannot work, caught before any weights load."""
    if not cfg.lora and cfg.load_in_4bit:
        raise UserError("4-bit weights cannot be trained without LoRA", cfg.where("load_in_4bit"),
                        "set lora: true, or load_in_4bit: false for full fine-tuning")
    if cfg.evaluate and cfg.eval_rows == 0:
        raise UserError("eval_rows is 0 but evaluate is on: there is nothing to evaluate on",
                        cfg.where("eval_rows"), "hold out rows (eval_rows: 16 or more), or set evaluate: false")
    low, high = cfg.adaptive_bounds
    if not 0 <= low <= high:
        raise UserError(f"adaptive_bounds must be [min, max] with 0 <= min <= max, got {[low, high]}",
                        cfg.where("adaptive_bounds"), "write e.g. adaptive_bounds: [0.1, 3.0]")
    for i, spec in enumerate(cfg.rewards if isinstance(cfg.rewards, list) else []):
        if spec.range is not None and not spec.range[0] < spec.range[1]:
            raise UserError(f"rewards[{i}].range {list(spec.range)}: the lowest score must come first and be below "
                            "the highest", cfg.where(f"rewards[{i}].range"), _FIXES["range"])
    if cfg.difficulty_filter == 1:
        raise UserError("difficulty_filter needs k >= 2 samples per prompt to tell easy from hard",
                        cfg.where("difficulty_filter"), "use difficulty_filter: 4 (or 0 to turn it off)")


def _stage(cfg: RunConfig, values: dict[str, Any], source: dict[str, str], i: int, raw: Any) -> Stage:
    """Stage ``i``: the base config with the stage's overrides, validated with ``stages[i].`` in every error."""
    if not isinstance(raw, dict):
        raise UserError(f"stages[{i}] must be a mapping of config keys", key_label(("stages", i), source),
                        "write e.g. - {name: format, max_steps: 20, rewards: [xml_count]}")
    overrides = dict(raw)
    name = str(overrides.pop("name", None) or f"stage{i + 1}")
    sft = overrides.pop("sft", False)
    if not isinstance(sft, bool):
        raise UserError(f"'sft' must be true or false, got {sft!r}", key_label(("stages", i, "sft"), source),
                        "write sft: true for a supervised warm-up stage")
    if "stages" in overrides:
        raise UserError("stages cannot nest", key_label(("stages", i, "stages"), source), "list every stage at the top")
    base = {k: v for k, v in values.items() if k != "stages"}
    return Stage(name, validate({**base, **overrides}, source, ("stages", i)), sft)


def _schema_error(err: ValidationError, prefix: Path_, source: dict[str, str]) -> UserError:
    """The first problem pydantic found, as one located message (union member tags dropped from the path)."""
    problem = max(err.errors(), key=lambda e: len(e["loc"]))
    loc = problem["loc"]
    path = tuple(p for p in loc[:-1] if isinstance(p, int) or p in _FIELD_NAMES) + loc[-1:]  # union tags dropped
    label = key_label((*prefix, *path), source)
    key = path_text(path)
    if problem["type"] == "extra_forbidden":
        section = HealthSettings if "health" in path else RunConfig  # rewards[] accept extra keys (parameters)
        known = list(section.model_fields)
        close = difflib.get_close_matches(str(path[-1]), known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"known keys here: {', '.join(known)}"
        return UserError(f"unknown key '{key}'", label, fix)
    got = problem.get("input")
    shown = "" if isinstance(got, dict) else f", got {got!r}"
    fix = _FIXES.get(str(path[-1]), _FIXES[""]) if "rewards" in path else _FIXES[""]
    return UserError(f"'{key}' {_lower(problem['msg'])}{shown}", label, fix)


# The way forward for a bad value of a key whose type alone does not say it.
_FIXES = {
    "": "see `grpo-fast train --help-config` for every key, its type and default",
    "kind": f"use kind: {', '.join(REWARD_KINDS[:-1])} or {REWARD_KINDS[-1]} (correctness marks the judge)",
    "range": "write range: [lowest, highest], e.g. range: [-4.5, 5]",
}


_FIELD_NAMES = {*RunConfig.model_fields, *RewardSpec.model_fields, *HealthSettings.model_fields}


def _lower(msg: str) -> str:
    return msg[:1].lower() + msg[1:]
