"""Trainer callbacks: a compact progress bar, per-step metrics and sample completions in the run directory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers import TrainerCallback  # noqa: TID253  # subclassed here: this module loads after Unsloth
from transformers.trainer_callback import PrinterCallback, ProgressCallback  # noqa: TID253

from grpo_fast import rundir
from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.files import append_jsonl, write_json
from grpo_fast.models import gpu_memory_gb, model_source
from grpo_fast.models.plan import compare, estimate, measured_peak_gb, plan_input
from grpo_fast.rewards.base import user_text
from grpo_fast.rewards.guard import last_batch, tripped
from grpo_fast.rewards.thinking import folded
from grpo_fast.run.checkpoints import truncate_step_logs  # noqa: TID253  # both load transformers


class RunLogger(TrainerCallback):
    """Writes metrics.jsonl every logged step and samples.jsonl every ``sample_every`` steps.

    Replaces transformers' ProgressCallback/PrinterCallback, whose dict dumps drown the progress bar.
    """

    def __init__(self, run_dir: Path, sample_every: int = 5, n_samples: int = 4, step_offset: int = 0,
                 stage: str | None = None, resume_step: int | None = None, label: str = "GRPO",
                 thinking: Any = None):
        self.run_dir = Path(run_dir)
        self.thinking = thinking  # the run's ThinkingMode: samples keep the thinking apart from the answer
        self.label = label
        self.resume_step = resume_step
        self.step_offset = step_offset
        self.stage = stage
        self.sample_every = sample_every
        self.n_samples = n_samples
        self.trainer: Any = None
        self.bar: Any = None

    def attach(self, trainer: Any) -> None:
        """Give the callback the trainer, whose recent completions it samples."""
        self.trainer = trainer
        trainer.remove_callback(ProgressCallback)
        trainer.remove_callback(PrinterCallback)

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.resume_step is not None:
            # Only now, with the checkpoint loaded, does the resumed run take over the run directory.
            truncate_step_logs(self.run_dir, self.resume_step)
            (self.run_dir / rundir.SUMMARY).unlink(missing_ok=True)
        if state.is_world_process_zero:
            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc=self.label, unit="step",
                            dynamic_ncols=True)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_train_end(self, args, state, control, **kwargs):
        if self.bar is not None:
            self.bar.close()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or not ("reward" in logs or "loss" in logs):
            return
        if "train_runtime" in logs:
            return  # the end-of-training summary, not a step
        step = self.step_offset + state.global_step
        record = {"step": step, **({"stage": self.stage} if self.stage else {}),
                  **{k: _clean(v) for k, v in logs.items()}}
        append_jsonl(self.run_dir / "metrics.jsonl", record)
        if self.bar is not None and "reward" in logs:
            self.bar.set_postfix(reward=f"{logs['reward']:.2f}", std=f"{logs.get('reward_std', 0):.2f}")
        if state.global_step % self.sample_every == 0 or state.global_step == 1:
            samples = self.samples(step)
            for sample in samples:
                append_jsonl(self.run_dir / "samples.jsonl", sample)
            self.show(step, samples)

    def show(self, step: int, samples: list[dict]) -> None:
        """A compact table of the newest samples, printed above the progress bar."""
        if not samples:
            return
        names = list(samples[0]["rewards"])
        lines = [f"samples at step {step}: " + " | ".join(names) + " | completion"]
        for s in samples:
            scores = " | ".join("-" if s["rewards"][n] is None else f"{s['rewards'][n]:.2f}" for n in names)
            text = " ".join(s.get("answer", s["completion"]).split())
            if "thinking" in s:  # the thinking folded: its size, and whether it closed
                text = f"[thinking {len(s['thinking'])} chars{'' if s['thinking_closed'] else ', never closed'}] {text}"
            lines.append(f"  {scores} | {text[:70] + ('...' if len(text) > 70 else '')}")
        write = self.bar.write if self.bar is not None else print
        write("\n".join(lines))

    def samples(self, step: int) -> list[dict]:
        """The last few completions the rewards scored, with each reward's score; the prompt is the question
        (the last user message: the system prompt is shown once in the report, not per sample)."""
        batch = last_batch(getattr(self.trainer, "reward_funcs", []))
        if batch is None:
            return []
        n = len(batch.completions)
        out = [{"step": step, "prompt": user_text(batch.prompts[i])[-300:], "completion": batch.completions[i],
                "rewards": {name: _clean(values[i]) for name, values in batch.scores.items()}}
               for i in range(max(0, n - self.n_samples), n)]
        if self.thinking is not None and self.thinking.active:
            out = [folded(s, s["completion"], self.thinking.tags, self.thinking.opened) for s in out]
        return out


def _clean(value: Any) -> Any:
    """JSON-safe numbers: NaN/inf become None."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


class AdaptiveWeights(TrainerCallback):
    """Adaptive reward scaling wired into TRL: after each step, the last batch's per-reward scores update
    each reward's running success rate, and the trainer's ``reward_weights`` follow (bounded). TRL keeps
    logging every reward separately; the weights are logged as ``adaptive/<reward>``.
    """

    def __init__(self, scaler: Any):
        self.scaler = scaler
        self.trainer: Any = None
        self.seen = 0

    def on_step_end(self, args, state, control, **kwargs):
        import torch

        batch = last_batch(getattr(self.trainer, "reward_funcs", []))
        if batch is None or batch.number == self.seen:
            return  # a batch is learned from once, however many optimizer steps it feeds
        self.seen = batch.number
        columns = [[_clean(v) for v in batch.scores.get(name, [])] for name in self.scaler.names]
        self.scaler.observe(columns)
        weights = [self.scaler.weights[name] for name in self.scaler.names]
        self.trainer.reward_weights = torch.tensor(weights, dtype=self.trainer.reward_weights.dtype)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is not None and "reward" in logs:
            logs.update({f"adaptive/{name}": w for name, w in self.scaler.weights.items()})


class MemoryCheck(TrainerCallback):
    """On CUDA, compare the planner's estimate with the measured peak after the first steps."""

    def __init__(self, plan: Any, run_dir: Path, after_step: int = 2):
        self.plan, self.run_dir, self.after_step = plan, Path(run_dir), after_step

    @classmethod
    def for_run(cls, cfg: RunConfig, run_dir: Path) -> MemoryCheck | None:
        """On CUDA only (None elsewhere, or when the model's shape is unknown without the network)."""
        card = gpu_memory_gb()
        if card is None:
            return None
        try:
            return cls(estimate(plan_input(cfg, model_source(cfg.model), card)), run_dir)
        except UserError:
            return None

    def on_step_end(self, args, state, control, **kwargs):
        measured = measured_peak_gb()
        if state.global_step != self.after_step or measured is None or not state.is_world_process_zero:
            return
        error = compare(self.plan, measured)
        write_json(self.run_dir / "memory.json", {"estimate_gb": self.plan.allocated_gb,
                                                  "measured_gb": measured, "relative_error": error})
        print(f"memory: planned {self.plan.allocated_gb:.1f} GiB, measured peak {measured:.1f} GiB "
              f"({error:+.0%})", flush=True)


class StopOnRewardFailure(TrainerCallback):
    """End the run cleanly, with a checkpoint, after the step in which a guarded reward passed its failure
    limit (TrainerControl is the public way to save and stop; the failure is raised once training returns)."""

    def __init__(self, funcs: list):
        self.funcs = funcs

    def on_step_end(self, args, state, control, **kwargs):
        if tripped(self.funcs) is not None:
            control.should_save = True
            control.should_training_stop = True
        return control
