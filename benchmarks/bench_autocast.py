"""Why bf16 autocast does or does not pay for the kit's training pass on this CPU, and whether the probe agrees.

Times the real training pass (TRL's ``compute_loss`` + backward, the embedded model with the run's LoRA and the
kit's speed-ups, built as ``grpo-fast train`` builds it) on one micro-batch, alternating in one process (min of
``--reps``):

- ``off``: fp32;  ``on``: bf16 autocast, as ``cpu_autocast_training`` runs it;
- ``on, base pre-cast``: the same with the frozen base weights already bf16, so autocast has nothing to cast:
  ``on`` minus this is what re-casting frozen weights on every model call costs (autocast keeps its casts only
  for leaf tensors that require grad);

for the shared-prompt training forward on and off, on 1 and 2 threads; then ``cpu_probe``'s estimate for the
same shape (one thread). On a quiet machine:

    .venv/bin/python benchmarks/bench_autocast.py [--completion 16 64] [--threads 1 2] [--reps 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

MODES = ("off", "on", "on, base pre-cast")


def training_pass(rows: int, completion: int, shared: bool) -> tuple[Any, dict[str, Any]]:
    """A kit trainer for the demo at this micro-batch (bf16 pass off: the bench wraps it) and one batch of inputs."""
    import torch

    from grpo_fast.models import load_model
    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.run.stages import build_trainer

    tmp = tempfile.mkdtemp()
    cfg = resolve_config("demo", [f"run_dir={tmp}/run", "profile=cpu", f"max_completion_length={completion}",
                                  f"per_device_train_batch_size={rows}", f"num_generations={rows}",
                                  "save_strategy=no", "evaluate=false", "health=false", "cpu_threads=1",
                                  "cpu_autocast_training=false", f"shared_prefill={'auto' if shared else 'false'}"])
    trainer, _ = build_trainer(prepare(cfg), load_model(cfg), Path(tmp) / "run")
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop, which this bench does not run
    trainer.model.train()
    gen = torch.Generator().manual_seed(0)
    prompt = torch.randint(100, 40000, (1, 50), generator=gen).repeat(rows, 1)  # the demo's prompts: ~50 tokens
    return trainer, {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt),
                     "completion_ids": torch.randint(100, 40000, (rows, completion), generator=gen),
                     "completion_mask": torch.ones(rows, completion, dtype=torch.long),
                     "advantages": torch.randn(rows, generator=gen),
                     "num_items_in_batch": torch.tensor(rows * completion)}


def time_modes(trainer: Any, inputs: dict[str, Any], reps: int) -> dict[str, float]:
    """Fastest forward+backward of each mode, alternating."""
    import torch

    model = trainer.model
    frozen = [p for p in model.parameters() if not p.requires_grad and p.dim() == 2]
    fp32 = [p.data for p in frozen]
    bf16 = [d.bfloat16() for d in fp32]

    def once(mode: str) -> float:
        for p, data in zip(frozen, bf16 if mode == "on, base pre-cast" else fp32):
            p.data = data
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode != "off"):
            loss = trainer.compute_loss(model, inputs)
        loss.backward()
        elapsed = time.perf_counter() - start
        model.zero_grad(set_to_none=True)
        return elapsed

    for mode in MODES:
        once(mode)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(reps):
        for mode in MODES:
            times[mode].append(once(mode))
    for p, data in zip(frozen, fp32):
        p.data = data
    return {m: min(t) for m, t in times.items()}


def main() -> None:
    import torch

    from grpo_fast.models.cpu_choice import cpu_class
    from grpo_fast.models.cpu_probe import ProbeShape, run_probe

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--completion", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--reps", type=int, default=8)
    args = parser.parse_args()
    print(f"CPU: {cpu_class().label}; {os.cpu_count()} cores; torch {torch.__version__}", flush=True)
    for completion in args.completion:
        for shared in (True, False):
            trainer, inputs = training_pass(args.rows, completion, shared)
            what = f"{args.rows} x (50 + {completion}) tokens, shared prompt {'on' if shared else 'off'}"
            for threads in args.threads:
                torch.set_num_threads(threads)
                best = time_modes(trainer, inputs, args.reps)
                cells = "; ".join(f"{m} {t * 1000:.0f} ms ({best['off'] / t:.2f}x)" for m, t in best.items())
                print(f"{what}, {threads} thread(s): {cells}; re-casting frozen weights "
                      f"{(best['on'] - best['on, base pre-cast']) * 1000:.0f} ms/pass (load {os.getloadavg()[0]:.1f})",
                      flush=True)
            probe = run_probe(ProbeShape(rows=args.rows, prompt_tokens=50, completion_tokens=completion,
                                         shared=shared))
            print(f"{what}: probe {probe['bf16_speed']:.2f}x (layer {probe['layer_speed']:.2f}x, head "
                  f"{probe['head_speed']:.2f}x, {probe['probe_s']} s; load {os.getloadavg()[0]:.1f})", flush=True)
            del trainer, inputs


if __name__ == "__main__":
    main()
