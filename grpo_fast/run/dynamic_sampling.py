"""Dynamic sampling (DAPO): drop the groups whose completions all scored the same and refill the batch with
groups of fresh prompts, so each optimisation step learns from groups that carry an advantage.

A group whose rewards are all equal has zero advantage under GRPO: its completions cost a generation and a
training forward/backward and move nothing (but the KL term). TRL 1.14.2 has no such option, and its training
loop is not forked here: ``install`` wraps the one trainer method that turns a batch of prompts into scored,
advantage-weighted completions (``GRPOTrainer._generate_and_score_completions``), calls TRL's own method again
for fresh prompts drawn from the training set, and hands TRL a batch of the same size. When the cap on extra
generation is spent before the batch is full, the remaining places keep the dropped groups (zero advantage:
they add nothing, and TRL's batch split stays exact).

Per logged step (TRL's averaging of its metrics over the step): ``dynamic_sampling/groups_dropped``,
``dynamic_sampling/extra_generations`` (completions generated beyond the batch) and
``dynamic_sampling/effective_groups`` (groups with an advantage in the batch trained on). TRL's reward metrics
average every completion generated, refills included.
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any

from grpo_fast.errors import UserError

MAX_EXTRA = 1.0
"""Cap on extra generation per step: at most this many times the batch's groups are generated again (1.0: a
step generates at most twice its batch)."""
MEASURED_WINS: frozenset[str] = frozenset({"demo"})
"""Recipes on which ``dynamic_sampling: auto`` turns it on: those where benchmarks/bench_learning.py
(``--compare dynamic_sampling``, 3 seeds) measured it better (docs/training.md). The demo: ahead at equal steps on
every seed and at equal wall time on average (+6 points)."""
LEFT_PADDED = {"prompt_ids", "prompt_mask"}
PAD_VALUE = {"completion_mask": 0, "prompt_mask": 0, "tool_mask": 1, "importance_sampling_ratio": 1.0}
SUPPORTED = {"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages", "num_items_in_batch",
             "old_per_token_logps", "sampling_per_token_logps", "ref_per_token_logps", "tool_mask",
             "importance_sampling_ratio"}


def wanted(setting: bool | str, recipe: str, processes: int = 1) -> bool:
    """``dynamic_sampling``'s value for this run: ``auto`` is on only for recipes where it measured better, on
    one process."""
    return recipe in MEASURED_WINS and processes == 1 if setting == "auto" else bool(setting)


def uniform_groups(advantages: Any, group: int) -> list[bool]:
    """Per group of ``group`` consecutive rows: True when every completion got the same advantage (zero: the
    group's rewards were all equal)."""
    grouped = advantages.detach().float().view(-1, group)
    return (grouped.abs().amax(dim=1) <= 1e-6).tolist()


def _rows(batch: dict[str, Any], rows: list[int]) -> dict[str, Any]:
    return {k: v[rows] for k, v in batch.items() if k != "num_items_in_batch"}


def merge(parts: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Concatenate batches of TRL's scored completions (each padded to its own width): prompts stay left-padded,
    completions right-padded; ``num_items_in_batch`` is recounted (the completion tokens the loss averages over)."""
    import torch
    import torch.nn.functional as F

    merged: dict[str, Any] = {}
    for key in parts[0]:
        tensors = [p[key] for p in parts]
        if tensors[0].dim() >= 2:
            width = max(t.shape[1] for t in tensors)
            value = PAD_VALUE.get(key, pad_token_id if key.endswith("_ids") else 0.0)
            tensors = [F.pad(t, (width - t.shape[1], 0) if key in LEFT_PADDED else (0, width - t.shape[1]),
                             value=value) for t in tensors]
        merged[key] = torch.cat(tensors)
    mask = merged["completion_mask"] * merged["tool_mask"] if "tool_mask" in merged else merged["completion_mask"]
    merged["num_items_in_batch"] = mask.sum()
    return merged


class DynamicSampler:
    """The wrapper around one trainer's ``_generate_and_score_completions``; its counts of the last refill."""

    def __init__(self, trainer: Any, max_extra: float = MAX_EXTRA):
        self.trainer, self.max_extra = trainer, max_extra
        self.score = trainer._generate_and_score_completions
        self.last: dict[str, int] = {}
        self.warned = False

    def fresh(self, groups: int, rng: random.Random) -> list[dict[str, Any]]:
        """``groups`` prompts drawn from the training set, each repeated once per completion as TRL's sampler does."""
        data = self.trainer.train_dataset
        picks = [rng.randrange(len(data)) for _ in range(groups)]
        return [dict(data[i]) for i in picks for _ in range(self.trainer.num_generations)]

    def __call__(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        trainer = self.trainer
        batch = self.score(inputs)
        if not trainer.model.training:
            return batch
        if set(batch) - SUPPORTED:  # inputs (images) this merge does not know how to pad: TRL's batch as is
            if not self.warned:
                self.warned = True
                print(f"dynamic_sampling: off for this run (its batches carry {sorted(set(batch) - SUPPORTED)}, "
                      "which the refill cannot pad)", file=sys.stderr, flush=True)
            return batch
        g = trainer.num_generations
        flat = uniform_groups(batch["advantages"], g)
        keep = [i for i, same in enumerate(flat) if not same]
        need, budget = len(flat) - len(keep), math.ceil(self.max_extra * len(flat))
        parts, extra, dropped = [_rows(batch, _members(keep, g))], 0, need
        # seeded by the run's seed and the step, not a stream: a run resumed from a checkpoint draws what the
        # straight run drew (TRL restores its own generators; this one has no state to restore)
        rng = random.Random(f"dynamic_sampling:{trainer.args.seed}:{trainer.state.global_step}")
        while need > 0 and budget > 0:
            ask = min(need, budget)
            more = self.score(self.fresh(ask, rng))
            budget, extra = budget - ask, extra + ask * g
            good = [i for i, same in enumerate(uniform_groups(more["advantages"], g)) if not same][:need]
            dropped += ask - len(good)
            need -= len(good)
            parts.append(_rows(more, _members(good, g)))
        if need:  # the cap is spent: fill with the dropped groups (zero advantage), so the batch keeps its size
            refill = [i for i, same in enumerate(flat) if same][:need]
            parts.append(_rows(batch, _members(refill, g)))
        merged = merge(parts, trainer.processing_class.pad_token_id if hasattr(trainer.processing_class,
                                                                                 "pad_token_id") else 0)
        self.last = {"groups_dropped": dropped, "extra_generations": extra,
                     "effective_groups": len(flat) - need, "batch_groups": len(flat)}
        metrics = trainer._metrics["train"]
        for key in ("groups_dropped", "extra_generations", "effective_groups"):
            metrics[f"dynamic_sampling/{key}"].append(float(self.last[key]))
        return merged


def _members(groups: list[int], size: int) -> list[int]:
    return [g * size + j for g in groups for j in range(size)]


def install(trainer: Any, max_extra: float = MAX_EXTRA) -> DynamicSampler:
    """Wrap ``trainer._generate_and_score_completions`` with dynamic sampling (single process only: TRL spreads
    a group's completions over processes, so one process cannot tell a uniform group from its share)."""
    if trainer.accelerator.num_processes > 1:
        raise UserError(f"dynamic_sampling needs one process; this run has {trainer.accelerator.num_processes} "
                        "(TRL splits a group's completions across processes)", "config key 'dynamic_sampling'",
                        "set dynamic_sampling: false for multi-GPU runs")
    sampler = DynamicSampler(trainer, max_extra)
    trainer._generate_and_score_completions = sampler
    return sampler
