"""Train: resolve the config, check data and rewards, plan memory, then run TRL's real GRPOTrainer.

``prepare`` does everything that needs no model weights (it is the whole of ``--dry-run``);
``train`` loads the model, trains, and writes the run directory.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_fast import config as config_mod
from grpo_fast import data, models, rundir
from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.recipes import Recipe, get_recipe
from grpo_fast.stages import Stage

log = logging.getLogger("grpo_fast.train")

# Defaults that make TRL safe on any machine: TRL's own bf16 default fails on CPU.
KIT_DEFAULTS: dict[str, Any] = {
    "report_to": "none",
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 100,
    "save_total_limit": 2,
    "learning_rate": 5.0e-6,
    "num_generations": 8,
    "max_completion_length": 256,
}
PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {"bf16": False, "use_cpu": True, "gradient_checkpointing": False, "cpu_threads": "auto",
            "cpu_autocast_training": True, "shared_prefill": True},
    "memory": {"load_in_4bit": True, "optim": "adamw_8bit", "gradient_checkpointing": True,
               "num_generations": 4, "per_device_train_batch_size": 4, "use_vllm": True,
               "gpu_memory_utilization": 0.5},
    "performance": {"use_vllm": True, "vllm_mode": "colocate", "num_generations": 16,
                    "per_device_train_batch_size": 16, "gpu_memory_utilization": 0.6},
}


def gpu_memory_gb() -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch.cuda.get_device_properties(0).total_memory / 2**30


def profile_defaults(name: str) -> tuple[str, dict[str, Any]]:
    """The profile's settings; ``auto`` picks cpu / memory (< 40 GB) / performance from the GPU."""
    from grpo_fast.plan import profile_for

    card = gpu_memory_gb()
    if name == "auto":
        name = profile_for(card)
    if name not in PROFILES:
        raise UserError(f"unknown profile {name!r}", "config key 'profile'", "use auto, cpu, memory or performance")
    settings = dict(PROFILES[name])
    if card is not None:
        bf16 = models.bf16_supported()
        settings.update({"bf16": bf16, "fp16": not bf16})
    return name, settings


def resolve_config(target: str | None = None, overrides: list[str] | dict[str, Any] | None = None) -> RunConfig:
    """Build the RunConfig from a recipe name or YAML file plus ``key=value`` overrides."""
    cli = config_mod.parse_overrides(overrides) if isinstance(overrides, list) else dict(overrides or {})
    file_values: dict[str, Any] = {}
    lines: dict[str, str] = {}
    if target and (target.endswith((".yaml", ".yml")) or Path(target).is_file()):
        file_values, lines = config_mod.read_yaml(target)
    elif target:
        cli.setdefault("recipe", target)
    recipe_name = cli.get("recipe") or file_values.get("recipe") or "demo"
    recipe = get_recipe(str(recipe_name))
    models.preimport_unsloth(str(cli.get("backend") or file_values.get("backend") or "auto"))
    profile_name, profile = profile_defaults(str(cli.get("profile") or file_values.get("profile") or "auto"))
    cfg = config_mod.build_config([
        (KIT_DEFAULTS, "grpo_fast default"),
        (profile, f"profile {profile_name}"),
        (recipe.defaults, f"recipe {recipe.name}"),
        (file_values, lines),
        (cli, "command line"),
    ])
    cfg.profile = profile_name
    return cfg


# --------------------------------------------------------------------------- checks before loading weights


@dataclass
class Prepared:
    """The outcome of the pre-training checks: data ready to train on and what was found."""

    cfg: RunConfig
    recipe: Recipe
    rewards: Rewards
    train_rows: list[dict]
    eval_rows: list[dict]
    tokenizer: Any
    report: list[str] = field(default_factory=list)


@dataclass
class Rewards:
    """The reward functions of a run, their weights, and which one judges correctness."""

    funcs: list
    weights: list[float]
    correctness: str
    correctness_max: float

    fallback_max: float = 1.0

    @property
    def names(self) -> list[str]:
        return [f.__name__ for f in self.funcs]

    @property
    def max_total(self) -> float:
        """Highest weighted total, from each reward's declared range (else the recipe's figure)."""
        ranges = [getattr(f, "reward_range", None) for f in self.funcs]
        if any(r is None for r in ranges):
            return self.fallback_max
        return sum(w * (r[1] if w >= 0 else r[0]) for w, r in zip(self.weights, ranges))


def reward_setup(cfg: RunConfig, recipe: Recipe) -> Rewards:
    """The config's ``rewards`` (registry names, {name, weight, params} maps, or a preset) or the recipe's."""
    from grpo_fast.rewards import get_preset, get_reward

    spec = cfg.rewards
    try:
        if spec is None:
            funcs, weights = recipe.reward_funcs(), list(recipe.reward_weights)
        elif isinstance(spec, str):
            preset = get_preset(spec)
            funcs, weights = preset.funcs, preset.weights
        else:
            funcs, weights = [], []
            for item in spec:
                params = dict(item) if isinstance(item, dict) else {"name": item}
                if "name" not in params:
                    raise UserError(f"reward entry {item!r} has no 'name'",
                                    fix="write {name: fuzzy_match, weight: 2.0}")
                weights.append(float(params.pop("weight", 1.0)))
                funcs.append(get_reward(str(params.pop("name")), **params))
    except UserError as err:
        raise UserError(err.what, cfg.where("rewards"), err.fix) from None
    weights = list(cfg.grpo.get("reward_weights") or weights)
    if len(weights) != len(funcs):
        raise UserError(f"{len(weights)} reward_weights for {len(funcs)} rewards", cfg.where("reward_weights"),
                        "give one weight per reward, in order")
    names = [f.__name__ for f in funcs]
    if recipe.correctness in names:
        return Rewards(funcs, weights, recipe.correctness, recipe.correctness_max, recipe.reward_max)
    judges = [f for f in funcs if getattr(f, "reward_kind", None) == "correctness"]
    if not judges:
        raise UserError("no correctness reward among the configured rewards", cfg.where("rewards"),
                        f"add one (e.g. {recipe.correctness}), so answers can be checked and evaluated")
    best = getattr(judges[0], "reward_range", (0.0, 1.0))[1]
    return Rewards(funcs, weights, judges[0].__name__, best, recipe.reward_max)


def gold_self_test(recipe: Recipe, rewards: Rewards, rows: list[dict], limit: int = 32) -> tuple[int, list[str]]:
    """Score each row's gold completion: the correctness reward must give its maximum, or training is refused."""
    fn = rewards.funcs[rewards.names.index(rewards.correctness)]
    sample = rows[:limit]
    columns = {k: [r.get(k) for r in sample] for k in sample[0] if k != "prompt"}
    completions = [[{"role": "assistant", "content": recipe.gold(r)}] for r in sample]
    scores = fn(prompts=[r["prompt"] for r in sample], completions=completions, **columns)
    best = rewards.correctness_max
    failures = [f"row {i}: gold completion scored {s} (< {best}): {completions[i][0]['content'][:80]!r}"
                for i, s in enumerate(scores) if s is None or s < best - 1e-9]
    return len(sample), failures


def prepare(cfg: RunConfig, force: bool = False) -> Prepared:
    """Everything that needs no weights: backend choice, data, prompt lengths, gold self-test, memory plan."""
    recipe = get_recipe(cfg.recipe)
    backend = models.select_backend(cfg.backend, load_in_4bit=cfg.load_in_4bit,
                                    use_vllm=cfg.grpo.get("use_vllm", False))
    report = [f"recipe {recipe.name}: {recipe.description}", f"backend: {backend.name} ({backend.reason})"]
    rows = recipe.rows(cfg)
    origin = cfg.dataset or f"recipe {recipe.name} sample"
    data.validate_rows(rows, recipe.required, origin)
    rows, duplicates = data.dedupe(rows)
    model_path = models.resolve_model_path(cfg.model)
    tokenizer = _load_tokenizer(model_path)
    rows, stats = data.filter_long_prompts(rows, tokenizer, cfg.max_prompt_tokens)
    if recipe.holdout is not None and cfg.dataset is None:
        train_rows = rows
        eval_rows, _ = data.filter_long_prompts(recipe.holdout(cfg, train_rows), tokenizer, cfg.max_prompt_tokens)
    else:
        train_rows, eval_rows = data.split_holdout(rows, cfg.eval_rows, cfg.seed)
    report.append(f"data: {len(train_rows)} train rows, {len(eval_rows)} held out, {duplicates} duplicates dropped")
    report.append(stats.line())
    rewards = reward_setup(cfg, recipe)
    report.append("rewards: " + ", ".join(f"{n} x{w:g}" for n, w in zip(rewards.names, rewards.weights)))
    checked, failures = gold_self_test(recipe, rewards, train_rows)
    if failures and not force:
        raise UserError(
            f"reward gold self-test failed: {len(failures)} of {checked} gold answers did not get full "
            f"'{rewards.correctness}' reward\n  " + "\n  ".join(failures[:5]),
            origin, "fix the reward or the gold column (run `grpo-fast rewards check`), or pass --force",
        )
    report.append(f"gold self-test: {checked - len(failures)}/{checked} gold answers get full '{rewards.correctness}'")
    report.append(memory_line(cfg, model_path, stats.max))
    return Prepared(cfg, recipe, rewards, train_rows, eval_rows, tokenizer, report)


def _load_tokenizer(model_path: str) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path)
    except OSError as err:
        raise models._hub_error(model_path, err) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def plan_input(cfg: RunConfig, model_path: str, card_gb: float | None, prompt_tokens: int | None = None) -> Any:
    """The planner's view of this run, from the model config alone (no weights)."""
    from grpo_fast.plan import ModelShape, PlanInput

    g = cfg.grpo
    dtype = "bf16" if g.get("bf16") else ("fp16" if g.get("fp16") else "fp32")
    return PlanInput(
        shape=ModelShape.resolve(model_path), load_in_4bit=cfg.load_in_4bit, lora=cfg.lora, lora_r=cfg.lora_r,
        full_finetune=not cfg.lora, optim=g.get("optim", "adamw_torch"),
        gradient_checkpointing=g.get("gradient_checkpointing", False),
        num_generations=g.get("num_generations", 8),
        per_device_train_batch_size=g.get("per_device_train_batch_size", 8),
        max_prompt_tokens=min(prompt_tokens or cfg.max_prompt_tokens, cfg.max_prompt_tokens),
        max_completion_length=g.get("max_completion_length", 256), dtype=dtype, use_vllm=g.get("use_vllm", False),
        vllm_gpu_memory_utilization=cfg.gpu_memory_utilization, beta=g.get("beta", 0.0),
        unsloth=models.select_backend(cfg.backend, cuda=card_gb is not None).name == "unsloth", card_gb=card_gb,
    )


def memory_line(cfg: RunConfig, model_path: str, prompt_tokens: int) -> str:
    """One line for the pre-training report: the planner's peak estimate against this machine."""
    from grpo_fast.plan import estimate

    card = gpu_memory_gb()
    try:
        plan = estimate(plan_input(cfg, model_path, card, prompt_tokens))
    except UserError:
        return f"memory plan: skipped (no config for {model_path} without the network)"
    where = f"of {card:.1f} GiB on this GPU" if card else "(no GPU: this is RAM, an upper bound)"
    verdict = "" if card is None or plan.total_gb <= card else "  WARNING: over the card; see `grpo-fast plan`"
    return f"memory plan: peak about {plan.total_gb:.1f} GiB {where}{verdict}"


# --------------------------------------------------------------------------- training


@dataclass
class RunResult:
    """What a finished run reports; also written as summary.json."""

    run_dir: Path
    steps: int
    reward_first: float
    reward_last: float
    reward_max: float
    wall_s: float
    s_per_step: float
    backend: str

    def text(self) -> str:
        return (f"reward (mean of first 5 -> last 5 logged steps): {self.reward_first:.3f} -> {self.reward_last:.3f}"
                f"  (max possible {self.reward_max:g})\n"
                f"{self.steps} steps in {self.wall_s:.0f} s ({self.s_per_step:.1f} s/step, backend {self.backend})\n"
                f"artifacts: {self.run_dir}/ (config.yaml, metrics.jsonl, samples.jsonl, reward_curve.png, adapter/)")


def build_trainer(prep: Prepared, loaded: models.LoadedModel, output_dir: Path, callbacks: list | None = None) -> Any:
    """TRL's GRPOTrainer with the recipe's rewards; the rewards' weights go to GRPOConfig.reward_weights."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo_fast.rewards.guard import guard_rewards

    cfg = prep.cfg
    grpo = {**cfg.grpo, "reward_weights": prep.rewards.weights}
    args = GRPOConfig(output_dir=str(output_dir), seed=cfg.seed, **grpo)
    funcs = guard_rewards(prep.rewards.funcs, max_failure_rate=cfg.max_reward_failure_rate, log_dir=output_dir.parent)
    trainer = GRPOTrainer(
        model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=funcs, args=args,
        train_dataset=Dataset.from_list(prep.train_rows), callbacks=callbacks,
    )
    from grpo_fast.cpu_speed import apply_speedups

    apply_speedups(trainer, cfg)
    return trainer


# Keys a checkpoint depends on: resuming with another value would train a different model.
RESUME_KEYS = ("recipe", "model", "lora", "lora_r", "lora_alpha", "lora_target_modules", "num_generations",
               "per_device_train_batch_size", "gradient_accumulation_steps", "seed")


def check_resumable(cfg: RunConfig, run_dir: Path) -> None:
    """Refuse a checkpoint whose run used another model or training shape."""
    saved = rundir.read_yaml(run_dir / "config.yaml")
    now = cfg.to_dict()
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {now.get(k)!r}" for k in RESUME_KEYS if saved.get(k) != now.get(k)]
    if diffs:
        raise UserError("the checkpoint comes from a run with another model or config:\n  " + "\n  ".join(diffs),
                        str(run_dir / "config.yaml"), "resume with that run's config, or start a new run")


def open_run_dir(cfg: RunConfig, resume: str | None) -> tuple[Path, Path | None]:
    """A new run directory, or the one being resumed with its newest (or named) checkpoint."""
    if resume is None:
        run_dir = rundir.new_run_dir(cfg.run_dir, cfg.recipe)
        rundir.write_yaml(run_dir / "config.yaml", cfg.to_dict())
        rundir.write_json(run_dir / "versions.json", rundir.versions())
        return run_dir, None
    run_dir, checkpoint = rundir.resume_point(resume)
    check_resumable(cfg, run_dir)
    if rundir.is_main_process():
        rundir.truncate_step_logs(run_dir, rundir.step_of(checkpoint))
        (run_dir / rundir.SUMMARY).unlink(missing_ok=True)
    print(f"resuming {run_dir} from {checkpoint.name}", flush=True)
    return run_dir, checkpoint


def difficulty_filter(prep: Prepared, loaded: models.LoadedModel, k: int) -> None:
    """Sample k completions per prompt with the base model; drop prompts solved always or never (no signal)."""
    from grpo_fast.evaluate import _score, generate

    rows = prep.train_rows
    fn = prep.rewards.funcs[prep.rewards.names.index(prep.rewards.correctness)]
    groups = generate(loaded.model, loaded.tokenizer, [r["prompt"] for r in rows], n=k, greedy=False,
                      max_new_tokens=prep.cfg.grpo.get("max_completion_length", 256),
                      temperature=prep.cfg.grpo.get("temperature", 1.0))
    kept, always, never = [], 0, 0
    for row, group in zip(rows, groups):
        scores = _score(fn, [row] * k, [text for text, _ in group])
        solved = sum(1 for x in scores if x is not None and x >= prep.rewards.correctness_max - 1e-9)
        always += solved == k
        never += solved == 0
        if 0 < solved < k:
            kept.append(row)
    line = (f"difficulty filter (k={k}): kept {len(kept)} of {len(rows)} prompts; "
            f"{always} always solved, {never} never solved")
    print(line, flush=True)
    if not kept:
        raise UserError(line + ": nothing left to learn from", prep.cfg.where("difficulty_filter"),
                        "set difficulty_filter: 0, or use an easier/harder dataset or a larger k")
    prep.train_rows = kept
    prep.report.append(line)


def memory_check(cfg: RunConfig, run_dir: Path) -> Any:
    """On CUDA only: a callback comparing the plan with the measured peak after two steps."""
    from grpo_fast.callbacks import MemoryCheck
    from grpo_fast.plan import estimate

    card = gpu_memory_gb()
    if card is None:
        return None
    try:
        return MemoryCheck(estimate(plan_input(cfg, models.resolve_model_path(cfg.model), card)), run_dir)
    except UserError:
        return None


def run_stage(stage: Stage, prep: Prepared, loaded: models.LoadedModel, run_dir: Path, offset: int,
              checkpoint: Path | None, staged: bool) -> tuple[int, Any]:
    """Train one stage on the shared model; return the steps it took and its health monitor."""
    from grpo_fast.callbacks import AdaptiveWeights, RunLogger
    from grpo_fast.health import HealthMonitor
    from grpo_fast.rewards.combine import AdaptiveRewardScaler
    from grpo_fast.rewards.guard import RewardFailure

    cfg = stage.cfg
    out = run_dir / ("stages" if staged else "") / (stage.name if staged else "") / rundir.CHECKPOINTS
    logger = RunLogger(run_dir, cfg.sample_every, step_offset=offset, stage=stage.name if staged else None)
    if stage.sft:
        from grpo_fast.stages import sft_warmup

        return sft_warmup(prep, loaded, out, [logger]), None
    monitor = HealthMonitor.for_prepared(run_dir, prep, on_alarm=cfg.on_alarm) if cfg.health else None
    adaptive = None
    if cfg.adaptive_rewards:
        low, high = cfg.adaptive_bounds
        scaler = AdaptiveRewardScaler(prep.rewards.funcs, prep.rewards.weights, w_min=low, w_max=high)
        adaptive = AdaptiveWeights(scaler)
    callbacks = [c for c in (adaptive, logger, monitor, memory_check(cfg, run_dir)) if c is not None]
    trainer = build_trainer(prep, loaded, out, callbacks=callbacks)
    logger.attach(trainer)
    if adaptive:
        adaptive.trainer = trainer
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except RewardFailure:
        trainer._save_checkpoint(trainer.model, None)  # keep the work done; --resume after fixing the reward
        raise
    if monitor and monitor.stopped_by:
        print(monitor.stopped_by.text(), flush=True)
    return trainer.state.global_step, monitor


def train(cfg: RunConfig, force: bool = False, resume: str | None = None) -> RunResult:
    """Check every stage, load, train, write artifacts. The run directory is created only after all checks.

    ``resume``: a run directory (its newest complete checkpoint) or a checkpoint folder; the optimizer,
    scheduler, RNG and data position come back with it (Trainer's resume_from_checkpoint).
    """
    from grpo_fast.stages import stage_configs

    main = rundir.is_main_process()
    stages = stage_configs(cfg)
    staged = cfg.stages is not None
    if resume is not None:
        if staged:
            raise UserError("--resume of a multi-stage run is not supported yet", cfg.where("stages"),
                            "run the remaining stages as a new run from the exported adapter")
        cfg.run_dir = str(rundir.resume_point(resume)[0])
    preps = [prepare(stage.cfg, force=force) for stage in stages]  # every stage checked before any weights
    if main:
        print("\n".join(preps[0].report), flush=True)
    loaded = models.load_model(cfg)
    if cfg.difficulty_filter:
        difficulty_filter(preps[0], loaded, cfg.difficulty_filter)
        for prep in preps[1:]:
            prep.train_rows = preps[0].train_rows
    run_dir, checkpoint = open_run_dir(cfg, resume)
    start, steps, monitors = time.time(), 0, []
    for stage, prep in zip(stages, preps):
        if staged and main:
            print(f"stage {stage.name}: {'SFT warm-up' if stage.sft else 'GRPO'}", flush=True)
        taken, monitor = run_stage(stage, prep, loaded, run_dir, steps, checkpoint, staged)
        steps += taken
        monitors.append(monitor)
        if monitor and monitor.stopped_by and cfg.on_alarm == "stop":
            break
    wall = time.time() - start
    if main:
        loaded.model.save_pretrained(str(run_dir / ".adapter.tmp"))
    metrics = [m for m in rundir.read_jsonl(run_dir / "metrics.jsonl") if m.get("reward") is not None]
    rewards = [m["reward"] for m in metrics if not math.isnan(m["reward"])]
    done = steps - (rundir.step_of(checkpoint) if checkpoint else 0)
    result = RunResult(
        run_dir=run_dir, steps=steps,
        reward_first=sum(rewards[:5]) / max(1, len(rewards[:5])),
        reward_last=sum(rewards[-5:]) / max(1, len(rewards[-5:])),
        reward_max=preps[-1].rewards.max_total, wall_s=wall, s_per_step=wall / max(1, done),
        backend=loaded.backend.name,
    )
    if main:
        adapter = run_dir / "adapter"
        if adapter.exists():
            import shutil

            shutil.rmtree(adapter)
        (run_dir / ".adapter.tmp").replace(adapter)
        loaded.tokenizer.save_pretrained(str(adapter))
        rundir.plot_rewards(metrics, run_dir / "reward_curve.png", f"grpo_fast {cfg.recipe}: reward per step")
        health = [m.summary() for m in monitors if m]
        rundir.write_json(run_dir / rundir.SUMMARY, {**result.__dict__, "run_dir": str(run_dir), "health": health})
        if cfg.evaluate:
            finish_with_evaluation(run_dir, cfg)
    return result


def finish_with_evaluation(run_dir: Path, cfg: RunConfig) -> None:
    """Base vs trained on the held-out rows (eval.json), then report.html; printed as a small table."""
    from grpo_fast.evaluate import evaluate_run, format_table
    from grpo_fast.report import write_report

    evaluation = evaluate_run(run_dir, k=cfg.eval_k)
    print("held-out evaluation, base vs trained:\n" + format_table(evaluation["comparison"]), flush=True)
    print(f"report: {write_report(run_dir)}", flush=True)
