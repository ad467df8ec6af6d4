"""Scale out: re-run ``grpo-fast train`` under torchrun (DDP) or ``accelerate launch`` with a shipped config.

    grpo-fast train math --num-processes 4                         # torchrun, DDP (NCCL on GPU, gloo on CPU)
    grpo-fast train math --num-processes 8 --accelerate-config zero3

Each worker runs the ordinary single-process command; TRL's trainer (through accelerate) reads RANK /
WORLD_SIZE from the environment and shards the batch. Only rank 0 writes the run directory
(``rundir.is_main_process``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from grpo_fast import models, rundir
from grpo_fast.errors import UserError
from grpo_fast.models import gpu
from grpo_fast.run.resolve import resolve_config

ACCELERATE_DIR = Path(__file__).parent / "accelerate"
ACCELERATE_CONFIGS = {"ddp": "ddp.yaml", "zero2": "zero2.yaml", "zero3": "zero3.yaml", "fsdp": "fsdp.yaml"}
# threads per worker on CPU: the cores are shared between the workers
_CPU_THREADS_ENV = "OMP_NUM_THREADS"


def accelerate_config(name: str) -> Path:
    """A shipped config by name (ddp, zero2, zero3, fsdp) or a path to the user's own YAML."""
    if name in ACCELERATE_CONFIGS:
        return ACCELERATE_DIR / ACCELERATE_CONFIGS[name]
    path = Path(name).expanduser()
    if not path.is_file():
        raise UserError(f"accelerate config {name!r} is neither a shipped one nor a file", "--accelerate-config",
                        f"use one of: {', '.join(ACCELERATE_CONFIGS)}, or a YAML written by `accelerate config`")
    return path


def check_processes(num_processes: int, *, cuda_devices: int | None = None, cpus: int | None = None) -> str:
    """Refuse more workers than the machine has GPUs (CUDA) or cores (CPU); returns 'cuda' or 'cpu'."""
    if cuda_devices is None:
        import torch

        cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if num_processes < 1:
        raise UserError(f"--num-processes must be at least 1 (got {num_processes})", "--num-processes",
                        "use 1 for a single process, or the number of GPUs")
    if cuda_devices:
        if num_processes > cuda_devices:
            raise UserError(f"--num-processes {num_processes} but only {cuda_devices} CUDA GPU(s) are visible",
                            "--num-processes", f"use at most {cuda_devices} (one process per GPU)")
        return "cuda"
    if num_processes > cpus:
        raise UserError(f"--num-processes {num_processes} but this machine has no GPU and only {cpus} CPU core(s)",
                        "--num-processes", f"use at most {cpus} on CPU (multi-process CPU runs are for testing)")
    return "cpu"


def distributed_type(path: Path) -> str:
    """The accelerate config's ``distributed_type`` (FSDP, DEEPSPEED, MULTI_GPU...), upper case; '' if unreadable."""
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return ""
    return str(values.get("distributed_type", "")).upper() if isinstance(values, dict) else ""


def check_launch(path: Path, backend: str, use_vllm: bool) -> None:
    """Refuse before launching what Unsloth refuses mid-run: vLLM generation (fast_inference) under FSDP.

    unsloth 2026.10.9 raises NotImplementedError for fast_inference under FSDP2 (loader_utils
    ``raise_if_fast_inference_under_fsdp2``), after every worker has loaded the model.
    """
    if distributed_type(path) == "FSDP" and backend == "unsloth" and use_vllm:
        raise UserError("FSDP with the Unsloth backend and use_vllm: Unsloth's vLLM engine (fast_inference) does "
                        "not run under FSDP", "--accelerate-config",
                        "set use_vllm: false, or backend: transformers, or use --accelerate-config ddp / zero2")


def launch_settings(argv_after_train: list[str]) -> tuple[str, bool, str]:
    """(backend, use_vllm, accelerate mixed precision) of the run the workers will train, from its config."""
    positional = [a for a in argv_after_train if not a.startswith("-") and "=" not in a]
    overrides = [a for a in argv_after_train if not a.startswith("-") and "=" in a]
    cfg = resolve_config(positional[0] if positional else None, overrides)
    use_vllm = bool(cfg.args.use_vllm)
    backend = models.select_backend(cfg.backend, load_in_4bit=cfg.load_in_4bit, use_vllm=use_vllm).name
    precision = gpu.train_precision(cfg)
    return backend, use_vllm, {"fp32": "no"}.get(precision, precision)


def build_command(argv_after_train: list[str], num_processes: int, config: str | None, device: str,
                  mixed_precision: str = "no") -> list[str]:
    """The launcher command line. torchrun is the default; an accelerate config selects accelerate launch.

    ``mixed_precision`` (bf16 | fp16 | no) comes from the run's config: the shipped YAMLs do not fix it."""
    train = ["-m", "grpo_fast", "train", *argv_after_train]
    if config is None:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                str(num_processes), *train]
    path = accelerate_config(config)
    if device == "cpu":
        raise UserError("accelerate configs (DeepSpeed, FSDP, multi-GPU DDP) need CUDA GPUs", "--accelerate-config",
                        "drop --accelerate-config: on CPU the launch uses torchrun with the gloo backend")
    if shutil.which("accelerate") is None and not (Path(sys.executable).parent / "accelerate").exists():
        raise UserError("the accelerate command is not on PATH", "--accelerate-config", "pip install accelerate")
    if "zero" in path.name:
        if importlib.util.find_spec("deepspeed") is None:
            raise UserError(f"{path.name} needs DeepSpeed, which is not installed", "--accelerate-config",
                            "pip install deepspeed, or use --accelerate-config ddp / fsdp")
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(path), "--num_processes",
            str(num_processes), "--mixed_precision", mixed_precision, *train]


def pin_run_dir(argv_after_train: list[str]) -> list[str]:
    """Add ``run_dir=runs/<recipe>-<time>`` unless given: each worker would otherwise stamp its own time."""
    if any(a.startswith("run_dir=") for a in argv_after_train):
        return list(argv_after_train)
    positional = [a for a in argv_after_train if not a.startswith("-") and "=" not in a]
    label = "demo"
    if positional:
        target = positional[0]
        if target.endswith((".yaml", ".yml")) or Path(target).is_file():
            try:
                values = yaml.safe_load(Path(target).read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError):
                values = {}
            if values.get("run_dir"):
                return list(argv_after_train)
            label = str(values.get("recipe") or Path(target).stem)
        else:
            label = target
    label = next((a.split("=", 1)[1] for a in argv_after_train if a.startswith("recipe=")), label)
    return [*argv_after_train, f"run_dir=runs/{label}-{time.strftime('%Y%m%d-%H%M%S')}"]


def launch(argv_after_train: list[str], num_processes: int, config: str | None = None) -> int:
    """Run ``grpo-fast train <argv>`` on ``num_processes`` workers; returns the launcher's exit code."""
    if "--num-processes" in argv_after_train or "--accelerate-config" in argv_after_train:
        raise ValueError("strip --num-processes/--accelerate-config before calling launch()")
    device = check_processes(num_processes)
    argv = argv_after_train if "--dry-run" in argv_after_train else pin_run_dir(argv_after_train)
    mixed_precision = "no"
    if config is not None and device == "cuda":
        backend, use_vllm, mixed_precision = launch_settings(list(argv_after_train))
        check_launch(accelerate_config(config), backend, use_vllm)
    cmd = build_command(list(argv), num_processes, config, device, mixed_precision)
    env = dict(os.environ)
    if device == "cpu":
        # torch picks gloo for CPU tensors; keep the workers from fighting over the same cores
        env.setdefault(_CPU_THREADS_ENV, str(max(1, (os.cpu_count() or 1) // num_processes)))
        env.setdefault("ACCELERATE_USE_CPU", "true")
    print(f"launching {num_processes} processes ({device}): {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    return subprocess.call(cmd, env=env)


def release_workers() -> None:
    """Once training is over, every worker meets the others; all but rank 0 then leave the process group,
    done. A worker that exits still in it can abort in gloo's teardown ("terminate called without an active
    exception", pytorch#179291): torchrun then failed a run that had trained. Rank 0 keeps its group while it
    writes and evaluates alone (a new one would wait for the others) and leaves at the end (``leave_group``)."""
    import torch.distributed as dist

    if in_workers_group():
        dist.barrier()
        if not rundir.is_main_process():
            dist.destroy_process_group()


def leave_group() -> None:
    """Leave the workers' process group, if this process is still in one: nothing else waits any more."""
    import torch.distributed as dist

    if in_workers_group():
        dist.destroy_process_group()


def in_workers_group() -> bool:
    """Whether this process is one of several workers (torchrun or accelerate launch set WORLD_SIZE) and still in
    their process group. A single process keeps its own (vLLM colocated on one device starts a group of one)."""
    import torch.distributed as dist

    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and dist.is_available() and dist.is_initialized()
