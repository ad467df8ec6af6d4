"""Run one stage of training on the shared model: TRL's GRPOTrainer, or the optional SFT warm-up.

Stages share one model, so the adapter carries over (the seeds' "format first, then correctness"). Each stage
writes its checkpoints under its own folder and, when it ends, its weights and a done marker, so a resume
continues at the right stage and step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_fast.config import RunConfig, Stage
from grpo_fast.models import LoadedModel, vllm_colocate, vllm_server
from grpo_fast.models.cpu_choice import choose, cpu_class
from grpo_fast.models.cpu_speed import apply_speedups, autocast_training_pass, set_cpu_threads
from grpo_fast.rewards.combine import AdaptiveRewardScaler
from grpo_fast.rewards.guard import guard_rewards, tripped
from grpo_fast.rewards.reward_model import trl_reward_funcs
from grpo_fast.run import dynamic_sampling
from grpo_fast.run.prepare import Prepared
from grpo_fast.tools import environment_class
from grpo_fast.watch import trackers

if TYPE_CHECKING:
    from grpo_fast.run.callbacks import RunLogger


@dataclass
class StageResult:
    """What a stage did: steps taken (its own count) and its health monitor (None for SFT or health off)."""

    steps: int
    monitor: Any = None
    cpu_choices: dict[str, Any] | None = None  # the speed-ups chosen for this stage's trainer, and why

    @property
    def stopped(self) -> bool:
        return bool(self.monitor and self.monitor.stopped_by)


def build_trainer(prep: Prepared, loaded: LoadedModel, run_dir: Path, stage: str | None = None,
                  callbacks: list | None = None) -> tuple[Any, dict[str, Any]]:
    """TRL's GRPOTrainer with the run's rewards (guarded, their weights in GRPOConfig.reward_weights), writing
    checkpoints under the stage's folder and tracker logs under the run directory; and the speed-ups chosen."""
    cfg = prep.cfg
    named = trackers.point_at(run_dir, stage, cfg)  # before TRL's trainer module imports trackio
    from datasets import Dataset
    from trl import GRPOTrainer

    from grpo_fast.run import checkpoints
    from grpo_fast.run.callbacks import StopOnRewardFailure

    output_dir = checkpoints.output_dir(run_dir, stage)
    args = cfg.training_args(str(output_dir), reward_weights=prep.rewards.weights, **named)
    funcs = guard_rewards(trl_reward_funcs(prep.rewards.funcs), max_failure_rate=cfg.max_reward_failure_rate,
                          log_dir=output_dir.parent, raise_on_failure=False)
    env = environment_class(cfg, prep.recipe)
    # server mode with LoRA: the server loads each step's adapter; colocate on CPU: vLLM's packed weights re-packed
    with vllm_server.adapter_server(cfg, run_dir), vllm_colocate.packed_colocate(cfg, run_dir):
        trainer = GRPOTrainer(
            model=loaded.model, processing_class=loaded.tokenizer, reward_funcs=funcs, args=args,
            train_dataset=Dataset.from_list(prep.train_rows), environment_factory=env,
            callbacks=[*(callbacks or []), StopOnRewardFailure(funcs), checkpoints.ManifestWriter()],
        )
    vllm_server.set_probe(trainer, loaded.tokenizer, prep.train_rows[0]["prompt"])
    if dynamic_sampling.wanted(cfg.dynamic_sampling, cfg.recipe, trainer.accelerator.num_processes):
        dynamic_sampling.install(trainer)
        if cfg.dynamic_sampling == "auto":
            print(f"dynamic_sampling: on (auto) — measured better on the {cfg.recipe} recipe (docs/training.md); "
                  "dynamic_sampling: false turns it off", flush=True)
    return trainer, apply_speedups(trainer, cfg)


def run_stage(stage: Stage, prep: Prepared, loaded: LoadedModel, run_dir: Path, *, staged: bool, offset: int,
              checkpoint: Path | None = None, resume_step: int | None = None) -> StageResult:
    """Train one stage; ``checkpoint`` resumes it, ``resume_step`` trims the logs once that has loaded."""
    from grpo_fast.models.vllm_sync import sync_check
    from grpo_fast.run import checkpoints
    from grpo_fast.run.callbacks import AdaptiveWeights, MemoryCheck, RunLogger
    from grpo_fast.watch.health import HealthMonitor

    cfg = stage.cfg
    out = checkpoints.output_dir(run_dir, stage.name if staged else None)
    logger = RunLogger(run_dir, cfg.sample_every, step_offset=offset, stage=stage.name if staged else None,
                       resume_step=resume_step, label="SFT" if stage.sft else "GRPO", thinking=prep.thinking)
    if stage.sft:
        return StageResult(sft_warmup(prep, loaded, out, logger))
    monitor = HealthMonitor.for_run(run_dir, cfg.health, prep.rewards, cfg.on_alarm) if cfg.health.enabled else None
    adaptive = None
    if cfg.adaptive_rewards:
        low, high = cfg.adaptive_bounds
        adaptive = AdaptiveWeights(AdaptiveRewardScaler(prep.rewards.funcs, prep.rewards.weights, w_min=low,
                                                        w_max=high))
    memory = MemoryCheck.for_run(cfg, run_dir)
    sync = sync_check(cfg, run_dir)  # only with vLLM on CPU (GRPO_FAST_VLLM_CPU=1): does vLLM get the weights?
    trainer, cpu_choices = build_trainer(prep, loaded, run_dir, stage.name if staged else None,
                            callbacks=[c for c in (adaptive, logger, monitor, memory, sync) if c])
    logger.attach(trainer)
    if sync:
        sync.attach(trainer)
    if adaptive:
        adaptive.trainer = trainer
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    failure = tripped(trainer.reward_funcs)
    if failure is not None:
        raise failure  # the step it tripped in ended with a checkpoint: fix the reward, then --resume
    if monitor and monitor.stopped_by:
        print(monitor.stopped_by.text(), flush=True)
    return StageResult(trainer.state.global_step, monitor, cpu_choices)


def sft_warmup(prep: Prepared, loaded: LoadedModel, out_dir: Path, logger: RunLogger) -> int:
    """Supervised steps on (prompt, gold answer) pairs to prime the format; returns the steps taken. A recipe's
    ``demonstration`` gives whole completions instead (tool calls and their replies), shown with the tools' schemas
    in the prompt as the GRPO stage will show them."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    cfg, recipe = prep.cfg, prep.recipe
    tools = json.dumps(prep.tools) if prep.tools is not None else None

    def completion(row: dict) -> list[dict] | None:
        if recipe.demonstration is not None:
            return recipe.demonstration(row)
        answer = recipe.gold(row)
        return [{"role": "assistant", "content": answer}] if answer else None

    mode = {"chat_template_kwargs": prep.thinking.kwargs} if prep.thinking.kwargs else {}  # as GRPO renders
    rows = [{"prompt": r["prompt"], "completion": c, **({"tools": tools} if tools else {}), **mode}
            for r in prep.train_rows if (c := completion(r))]
    shared = ("max_steps", "learning_rate", "lr_scheduler_type", "per_device_train_batch_size", "bf16", "fp16",
              "use_cpu", "gradient_accumulation_steps", "gradient_checkpointing", "optim", "warmup_steps")
    args = SFTConfig(output_dir=str(out_dir), seed=cfg.seed, report_to="none", logging_steps=1,
                     save_strategy="no", **{k: cfg.grpo[k] for k in shared if k in cfg.grpo})
    trainer = SFTTrainer(model=loaded.model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=loaded.tokenizer, callbacks=[logger])
    logger.attach(trainer)  # its progress bar replaces transformers' dict dumps
    warmup_speedups(trainer, cfg)
    trainer.train()
    return trainer.state.global_step


def warmup_speedups(trainer: Any, cfg: RunConfig) -> dict[str, Any]:
    """The CPU threads and bf16 training pass the GRPO stage gets, for the warm-up's SFT trainer too (what was
    chosen, by key). Without them it ran fp32 on torch's default threads: on 2 shared cores a warm-up step of 4
    gold replies took 55-170 s, a GRPO step of 4 completions 25 s (benchmarks/bench_recipes.py, qa)."""
    import torch

    if torch.cuda.is_available():
        return {}

    threads = set_cpu_threads(cfg)
    chosen = {c.key: c.value for c in choose(cfg, cls=cpu_class(), threads=threads)}
    if chosen.get("cpu_autocast_training"):
        autocast_training_pass(trainer)
    print(f"warm-up speed-ups: threads {torch.get_num_threads()}, bf16 training pass "
          f"{'on' if chosen.get('cpu_autocast_training') else 'off'}", flush=True)
    return chosen
