"""Multi-stage runs (the seeds' "format first, then correctness") and the optional SFT warm-up stage.

Stages share one model, so the adapter carries over; each stage is a map of config overrides validated
like a config file, with errors naming ``stages[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig, build_config
from grpo_fast.errors import UserError


@dataclass
class Stage:
    """One stage: its name, its full config, and whether it is a supervised warm-up."""

    name: str
    cfg: RunConfig
    sft: bool = False


def stage_configs(cfg: RunConfig) -> list[Stage]:
    """The run's stages; a config without ``stages`` is one stage named ``grpo``."""
    if not cfg.stages:
        return [Stage("grpo", cfg)]
    base = {k: v for k, v in cfg.to_dict().items() if k != "stages"}
    stages = []
    for i, overrides in enumerate(cfg.stages):
        if not isinstance(overrides, dict):
            raise UserError(f"stages[{i}] must be a mapping of config keys", cfg.where("stages"),
                            "write e.g. - {name: format, max_steps: 20, rewards: [xml_count]}")
        extra = dict(overrides)
        name = str(extra.pop("name", f"stage{i + 1}"))
        sft = bool(extra.pop("sft", False))
        if "stages" in extra:
            raise UserError("stages cannot nest", f"stages[{i}]", "list every stage at the top level")
        stage_cfg = build_config([(base, "base config"), (extra, f"stages[{i}] ({name})")])
        stages.append(Stage(name, stage_cfg, sft))
    return stages


def sft_warmup(prep: Any, loaded: Any, out_dir: Path, callbacks: list) -> int:
    """Supervised steps on (prompt, gold answer) pairs to prime the format; returns the steps taken."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    cfg = prep.cfg
    rows = [{"prompt": r["prompt"], "completion": [{"role": "assistant", "content": prep.recipe.gold(r)}]}
            for r in prep.train_rows]
    g = cfg.grpo
    shared = ("max_steps", "learning_rate", "lr_scheduler_type", "per_device_train_batch_size", "bf16", "fp16",
              "use_cpu", "gradient_accumulation_steps", "gradient_checkpointing", "optim", "warmup_steps")
    args = SFTConfig(output_dir=str(out_dir), seed=cfg.seed, report_to="none", logging_steps=1,
                     save_strategy="no", **{k: g[k] for k in shared if k in g})
    trainer = SFTTrainer(model=loaded.model, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=loaded.tokenizer, callbacks=callbacks)
    trainer.train()
    return trainer.state.global_step
