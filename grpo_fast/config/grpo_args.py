"""The GRPO half of a config: TRL's own ``GRPOConfig`` is its schema and its validator.

Each GRPO key is coerced with TRL's type annotation (lax: ``"1e-5"`` becomes 1e-05), checked against the few
ranges TRL accepts silently but that cannot train, and the whole set then runs through ``GRPOConfig.__post_init__``
so TRL's own checks (group size, batch divisibility, bf16 on this machine) fire before any weights load.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from grpo_fast.errors import UserError

# GRPOConfig keys that old tutorials use and today's TRL no longer has, with what to do instead.
REMOVED = {
    "max_prompt_length": "TRL removed it; set max_prompt_tokens (the kit drops longer prompts and reports them)",
    "max_length": "set max_prompt_tokens and max_completion_length instead",
}
# GRPOConfig fields the kit sets itself from its own keys.
OWNED = {"output_dir": "run_dir", "seed": "seed"}
# Ranges TRL accepts silently but that cannot train (TRL's own checks run afterwards, in GRPOConfig).
LIMITS: dict[str, Any] = {
    "learning_rate": Annotated[float, Field(gt=0)],
    "num_generations": Annotated[int | None, Field(ge=2)],
    "max_completion_length": Annotated[int, Field(ge=1)],
    "per_device_train_batch_size": Annotated[int, Field(ge=1)],
    "gradient_accumulation_steps": Annotated[int, Field(ge=1)],
    "num_iterations": Annotated[int, Field(ge=1)],
    "temperature": Annotated[float, Field(gt=0)],
    "top_p": Annotated[float, Field(gt=0, le=1)],
    "beta": Annotated[float, Field(ge=0)],
    "epsilon": Annotated[float, Field(gt=0)],
    "num_train_epochs": Annotated[float, Field(gt=0)],
    "logging_steps": Annotated[float, Field(gt=0)],
    "save_steps": Annotated[float, Field(gt=0)],
    "warmup_ratio": Annotated[float, Field(ge=0, le=1)],
    "weight_decay": Annotated[float, Field(ge=0)],
    "max_grad_norm": Annotated[float, Field(ge=0)],
    "vllm_gpu_memory_utilization": Annotated[float, Field(gt=0, le=1)],
    "generation_batch_size": Annotated[int | None, Field(ge=1)],
    "steps_per_generation": Annotated[int | None, Field(ge=1)],
}
LIMIT_FIXES = {
    "learning_rate": "use a positive rate, e.g. 5.0e-6 for LoRA or 1.0e-6 for full fine-tuning",
    "num_generations": "GRPO compares completions within a group: use 4 (small GPUs), 8 (default) or 16",
    "max_completion_length": "give the longest completion in tokens, e.g. 256 (512+ for reasoning)",
    "temperature": "sample with a positive temperature, e.g. 1.0 (GRPO needs varied completions)",
}
# GRPOConfig fields whose defaults Unsloth rewrites when it patches TRL's config class (the ``replacements``
# dicts in unsloth/models/rl.py, 2026.10.9), plus epsilon_high, which Unsloth sets to 0.28 when loss_type is
# given explicitly as dapo. The kit passes each one explicitly (TRL's default unless the config sets it), so
# one YAML trains the same on both backends. tests/gpu/test_contracts.py checks this list against the wheel.
UNSLOTH_CHANGED_DEFAULTS = (
    "logging_nan_inf_filter", "per_device_train_batch_size", "gradient_accumulation_steps", "weight_decay", "seed",
    "optim", "learning_rate", "per_device_eval_batch_size", "eval_accumulation_steps", "torch_empty_cache_steps",
    "logging_steps", "num_generations", "vllm_mode", "generation_kwargs", "bf16", "fp16", "report_to",
    "include_tokens_per_second", "include_num_input_tokens_seen", "auto_find_batch_size", "dataloader_pin_memory",
    "padding_free", "warmup_steps", "warmup_ratio", "loss_type", "beta", "vllm_importance_sampling_correction",
    "router_aux_loss_coef", "mask_truncated_completions", "epsilon_high",
)
# Words of TRL's messages that point at a key without naming it.
TRL_WORDS = {"num_generations": "generations per prompt", "bf16": "bf16"}
# A fix to print beside TRL's own message when it names one of these keys.
TRL_HINTS = {
    "num_generations": "in today's TRL the batch counts completions, not prompts: make per_device_train_batch_size "
                       "x steps_per_generation a multiple of num_generations (e.g. 8 and 8, or 4 and 4)",
    "bf16": "bf16 needs a GPU with native bf16 (Ampere or newer); use profile: cpu or set bf16: false",
}


@functools.lru_cache(maxsize=1)
def fields() -> dict[str, Any]:
    """GRPOConfig's init fields with their resolved type annotations (imports trl, ~5 s, once)."""
    from trl import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    return {f.name: hints[f.name] for f in dataclass_fields(GRPOConfig) if f.init}


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def coerce(key: str, value: Any, label: str) -> Any:
    """One GRPO key's value, coerced by TRL's annotation and checked against the kit's range for it."""
    if key in OWNED and OWNED[key] != key:
        raise UserError(f"'{key}' is set by grpo_fast", label, f"set '{OWNED[key]}' instead")
    if key in REMOVED:
        raise UserError(f"'{key}' is no longer a GRPOConfig field", label, REMOVED[key])
    annotation = fields()[key]
    if isinstance(value, bool) and annotation is not bool:
        try:
            _adapter(annotation).validate_python(value, strict=True)
        except ValidationError:
            value = "yes" if value else "no"  # YAML 1.1 reads `save_strategy: no` as False
    for check in (annotation, LIMITS.get(key)):
        if check is None:
            continue
        try:
            value = _adapter(check).validate_python(value)
        except ValidationError as err:
            problem = err.errors()[0]["msg"]
            fix = LIMIT_FIXES.get(key, f"give '{key}' a valid value (TRL's type: {type_name(annotation)})")
            raise UserError(f"'{key}' {problem[:1].lower() + problem[1:]}, got {value!r}", label, fix) from None
    return value


def check(build: Callable[[], Any], grpo: dict[str, Any], label: Callable[[str], str]) -> Any:
    """``build()`` (a GRPOConfig) with TRL's own ``__post_init__`` checks; its message, located at the key."""
    try:
        return build()
    except (ValueError, TypeError) as err:
        message = str(err).strip().splitlines()[0]
        named = [k for k in grpo if k in message] or [k for k, words in TRL_WORDS.items() if words in message]
        key = named[0] if named else None
        fix = TRL_HINTS.get(key or "", "change the setting TRL names (see TRL's GRPOConfig documentation)")
        raise UserError(f"TRL rejects the GRPO settings: {message}", label(key) if key else "GRPOConfig settings",
                        fix) from None


def advice(grpo: dict[str, Any]) -> list[str]:
    """Combinations TRL accepts as given but that do not do what their name promises (measured: docs/training.md),
    each with its fix. Said once in the run's report; the values stay as the user set them."""
    notes = []
    eps = grpo.get("epsilon", 0.2)
    if grpo.get("loss_type") == "cispo" and grpo.get("epsilon_high") is None and eps < 1:
        notes.append(f"loss_type=cispo with epsilon_high unset: TRL caps each token's importance weight at "
                     f"epsilon_high, which defaults to epsilon ({eps}), so every weight is {eps} instead of about 1 "
                     "and each update shrinks as much; set epsilon_high: 5.0, as TRL's documentation recommends "
                     "for CISPO")
    return notes


def trainer_args(values: dict[str, Any], config_cls: Any = None) -> dict[str, Any]:
    """The config class's arguments with every default Unsloth rewrites pinned explicitly.

    A field the config does not set gets the TRL default, so Unsloth's patched defaults never apply and the
    same YAML trains the same way on both backends. ``config_cls`` defaults to TRL's GRPOConfig.
    """
    if config_cls is None:
        from trl import GRPOConfig as config_cls
    declared = {f.name: f for f in dataclass_fields(config_cls) if f.init}
    pinned: dict[str, Any] = {}
    for name in UNSLOTH_CHANGED_DEFAULTS:
        field = declared.get(name)
        if field is None or name in values or name in ("seed", "output_dir"):
            continue
        if field.default is not MISSING:
            pinned[name] = field.default
        elif field.default_factory is not MISSING:
            pinned[name] = field.default_factory()
    if "epsilon_high" in pinned and pinned["epsilon_high"] is None and "epsilon" in declared:
        pinned["epsilon_high"] = values.get("epsilon", declared["epsilon"].default)  # TRL's own resolution
    return {**pinned, **values}


def type_name(annotation: Any) -> str:
    return str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
