"""VRAM planner: estimate the peak GPU memory of a GRPO run from the model config, without loading weights.

Why: users otherwise find the right ``num_generations`` / batch / completion length by going OOM repeatedly.
The model is analytic (bytes per parameter, bytes per token per layer, logits, KV cache) and deliberately
simple; ``docs/memory.md`` documents every constant and the calibration against published numbers.

Units: all "GB" in this module are GiB (2**30 bytes), the unit ``torch.cuda`` and ``nvidia-smi`` report.
Peak model: ``resident + max(generation phase, training phase)`` -- generation (KV cache) and the
training forward/backward (activations, logits) do not overlap in TRL's GRPO loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.models.loading import select_backend
from grpo_fast.models.shapes import ModelShape

GIB = 2**30

# ---- documented constants (see docs/memory.md) -------------------------------------------------------------
CUDA_CONTEXT_GB = 0.8
"""CUDA context + cuBLAS/cuDNN workspaces; not visible to ``max_memory_allocated``."""
FRAGMENTATION = 0.05
"""Caching-allocator slack on the transient (activation/logit/KV) memory."""
NF4_BYTES_PER_PARAM = 0.5 + 0.0625
"""bitsandbytes NF4: 4 bits + absmax/double-quant stats (~0.5 bit) per quantised weight."""
LOGIT_BYTES_16BIT = 6
"""Per logit element in TRL: bf16 logits (2) + saved bf16 log-softmax (2) + bf16 grad in backward (2)."""
UNSLOTH_LOGIT_SEQUENCES = 1
"""Unsloth's fused GRPO loss materialises fp32 logits one sequence at a time (blog: 78.3 -> 9.8 GB at 8)."""
VLLM_MIN_EXTRA_GB = 1.0
"""vLLM's CUDA graphs/activation scratch, used when the colocated share is sized from need (no card)."""
SAFETY_MARGIN = 0.10
"""propose() keeps this fraction of the card free (at least 1 GiB) for what the model does not see."""

_MODULES = ("q", "k", "v", "o", "gate", "up", "down")
_OPTIMS = ("adamw_torch", "adamw_8bit", "paged_adamw_8bit")
_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass
class PlanInput:
    """Everything about a GRPO run that moves the memory peak (names follow TRL's GRPOConfig)."""

    shape: ModelShape
    """The model being trained."""
    load_in_4bit: bool = False
    """QLoRA: base linear weights in bitsandbytes NF4; embeddings/lm_head stay 16-bit. Requires ``lora``."""
    lora: bool = True
    """Train LoRA adapters on a frozen base (the kit's default)."""
    lora_r: int = 16
    """LoRA rank."""
    lora_target: str | tuple[str, ...] = "all-linear"
    """Adapted projections: "all-linear" (q,k,v,o,gate,up,down) or names such as ("q_proj", "v_proj")."""
    full_finetune: bool = False
    """Train every weight (mutually exclusive with ``lora``)."""
    optim: str = "adamw_8bit"
    """"adamw_torch" (2 states in the param dtype) | "adamw_8bit" | "paged_adamw_8bit" (1 byte per state)."""
    gradient_checkpointing: bool = True
    """Keep only each layer's input during forward and recompute the layer in backward."""
    num_generations: int = 8
    """Completions sampled per prompt (the GRPO group size)."""
    per_device_train_batch_size: int = 8
    """Completions per forward/backward micro-batch (current TRL counts completions, not prompts)."""
    max_prompt_tokens: int = 512
    """Longest prompt after truncation."""
    max_completion_length: int = 1024
    """Longest sampled completion."""
    dtype: str = "bf16"
    """Compute/weight dtype: "bf16" | "fp16" | "fp32"."""
    use_vllm: bool = False
    """Generate with vLLM instead of ``model.generate``."""
    vllm_gpu_memory_utilization: float = 0.3
    """Fraction of the card vLLM reserves when colocated (weights + KV cache + graphs)."""
    vllm_mode: str = "colocate"
    """"colocate" (same GPU) | "server" (another GPU: costs nothing here)."""
    beta: float = 0.0
    """KL coefficient; > 0 needs reference log-probs: a weight copy unless LoRA (adapters disabled instead)."""
    unsloth: bool = True
    """Unsloth: offloaded gradient checkpointing, fused kernels, per-sequence fp32 logits, shared vLLM weights."""
    card_gb: float | None = None
    """GPU memory in GiB; sizes the colocated vLLM share. None: size that share from what vLLM needs."""

    def __post_init__(self) -> None:
        problems = []
        if self.lora == self.full_finetune:
            problems.append(("set exactly one of lora / full_finetune", "lora=True for LoRA, full_finetune=True"))
        if self.load_in_4bit and not self.lora:
            problems.append(("4-bit loading only works with LoRA (QLoRA)", "set lora=True or load_in_4bit=False"))
        if self.optim not in _OPTIMS:
            problems.append((f"unknown optim {self.optim!r}", "use one of " + ", ".join(_OPTIMS)))
        if self.dtype not in _DTYPE_BYTES:
            problems.append((f"unknown dtype {self.dtype!r}", "use bf16, fp16 or fp32"))
        if self.vllm_mode not in ("colocate", "server"):
            problems.append((f"unknown vllm_mode {self.vllm_mode!r}", "use colocate or server"))
        if min(self.num_generations, self.per_device_train_batch_size, self.max_completion_length) < 1:
            problems.append(("num_generations, batch size and completion length must be >= 1", None))
        if problems:
            raise UserError(problems[0][0], "plan input", problems[0][1])

    @property
    def seq_len(self) -> int:
        """Prompt + completion tokens of one sequence."""
        return self.max_prompt_tokens + self.max_completion_length

    @property
    def generation_batch(self) -> int:
        """Sequences generated at once: at least one full group (TRL generates a group per prompt together)."""
        return max(self.num_generations, self.per_device_train_batch_size)

    @property
    def steps_per_generation(self) -> int:
        """Micro-batches per generation batch: set gradient_accumulation_steps to this (TRL's default)."""
        return max(1, math.ceil(self.num_generations / self.per_device_train_batch_size))

    def lora_params(self) -> int:
        """Trainable LoRA parameters: r * (in + out) for every adapted projection in every layer."""
        if not self.lora:
            return 0
        targets = _MODULES if self.lora_target == "all-linear" else self.lora_target
        if isinstance(targets, str):
            targets = tuple(t.strip() for t in targets.split(","))
        names = {t.removesuffix("_proj") for t in targets}
        shapes = self.shape.linear_shapes()
        unknown = names - set(shapes)
        if unknown:
            raise UserError(f"unknown LoRA target(s) {sorted(unknown)}", "lora_target",
                            "use 'all-linear' or names among q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj")
        return self.shape.num_layers * self.lora_r * sum(sum(shapes[n]) for n in names)


@dataclass
class MemoryPlan:
    """Estimated peak GPU memory of one GRPO run, by component."""

    input: PlanInput
    """What was planned."""
    components: dict[str, float] = field(default_factory=dict)
    """Component name -> bytes that count towards the peak."""
    notes: list[str] = field(default_factory=list)
    """Assumptions worth showing next to the numbers."""

    @property
    def total_bytes(self) -> float:
        """Sum of all components."""
        return sum(self.components.values())

    @property
    def total_gb(self) -> float:
        """Estimated peak in GiB, CUDA context included (compare with nvidia-smi)."""
        return self.total_bytes / GIB

    @property
    def allocated_gb(self) -> float:
        """Peak without the CUDA context: what ``torch.cuda.max_memory_allocated`` can see."""
        return (self.total_bytes - self.components.get("cuda context", 0.0)) / GIB

    def table(self) -> str:
        """Aligned text table for the CLI."""
        width = max(len(k) for k in self.components) + 2
        lines = [f"{'component':<{width}}{'GiB':>8}"]
        lines += [f"{k:<{width}}{v / GIB:>8.2f}" for k, v in self.components.items()]
        lines.append(f"{'total (peak)':<{width}}{self.total_gb:>8.2f}")
        if self.input.card_gb:
            verdict = "fits" if self.total_gb <= self.input.card_gb else "does NOT fit"
            lines.append(f"card {self.input.card_gb:g} GiB: {verdict}")
        return "\n".join(lines + [f"note: {n}" for n in self.notes])


def _layer_act_bytes_per_token(s: ModelShape, unsloth: bool, dtype_bytes: int) -> float:
    """Activations autograd saves for one layer, per token (flash/SDPA attention: no seq^2 term).

    Plain PyTorch saves 5 h-wide tensors (two norms' input and output, attention output), q, k, v and 4
    I-wide MLP tensors (gate, up, act, product). Unsloth's fused SwiGLU/LoRA kernels keep gate and up only.
    """
    h, q, kv, i = s.hidden_size, s.num_heads * s.head_dim, s.num_kv_heads * s.head_dim, s.intermediate_size
    return (5 * h + q + 2 * kv + (2 if unsloth else 4) * i) * dtype_bytes


def estimate(p: PlanInput) -> MemoryPlan:
    """Peak GPU bytes = resident (weights, trainable state, vLLM, context) + max(generation, training)."""
    s, wb = p.shape, _DTYPE_BYTES[p.dtype]
    plan = MemoryPlan(p)
    c = plan.components
    # --- resident ---------------------------------------------------------------------------------------
    if p.load_in_4bit:
        weights = (s.n_params - s.embedding_params) * NF4_BYTES_PER_PARAM + s.embedding_params * 2
    else:
        weights = s.n_params * wb
    c["weights"] = weights
    if p.beta > 0 and not p.lora:
        c["reference model"] = s.n_params * wb
        plan.notes.append("beta > 0 with full fine-tuning keeps a reference copy of the weights")
    state_bytes = 2 if "8bit" in p.optim else None
    if p.lora:
        n = p.lora_params()
        c["lora + grads + optimizer"] = n * (4 + 4 + (state_bytes or 8))  # PEFT keeps adapters in fp32
    else:
        c["gradients"] = s.n_params * wb
        c["optimizer states"] = s.n_params * (state_bytes or 2 * wb)  # torch AdamW states follow param dtype
    # --- generation phase -------------------------------------------------------------------------------
    gen_seqs = p.generation_batch
    kv = gen_seqs * p.seq_len * s.kv_bytes_per_token
    if p.use_vllm and p.vllm_mode == "server":
        gen = 0.0
        plan.notes.append("vLLM server mode: generation memory lives on another GPU")
    elif p.use_vllm:
        shared = p.unsloth  # Unsloth's fast_inference shares the training weights with vLLM
        if p.card_gb:
            share = p.vllm_gpu_memory_utilization * p.card_gb * GIB - (weights if shared else 0.0)
        else:
            share = (0 if shared else s.n_params * 2) + kv + VLLM_MIN_EXTRA_GB * GIB
            plan.notes.append("no card given: vLLM share sized from its need (weights + KV of one batch)")
        c["vLLM (colocated)"] = max(share, 0.0)
        gen = 0.0
    else:
        prefill = gen_seqs * p.max_prompt_tokens * (4 * s.hidden_size + 4 * s.intermediate_size)
        gen = kv + prefill + gen_seqs * s.vocab_size * 4
    # --- training phase -----------------------------------------------------------------------------------
    tokens = p.per_device_train_batch_size * p.seq_len
    layer = tokens * _layer_act_bytes_per_token(s, p.unsloth, wb)
    if p.gradient_checkpointing:
        stash = 0.0 if p.unsloth else tokens * s.hidden_size * wb * s.num_layers
        acts = stash + layer
        if p.unsloth:
            plan.notes.append("Unsloth offloads checkpointed layer inputs to CPU RAM")
    else:
        acts = layer * s.num_layers
    if p.unsloth:
        logits = UNSLOTH_LOGIT_SEQUENCES * p.max_completion_length * s.vocab_size * 4.0
    else:
        logits = p.per_device_train_batch_size * p.max_completion_length * s.vocab_size * LOGIT_BYTES_16BIT
        logits *= wb / 2
    train = acts + logits
    if gen >= train:
        c["KV cache + generation"] = gen
    else:
        c["activations"] = acts
        c["logits"] = logits
    c["allocator slack"] = FRAGMENTATION * max(gen, train)
    c["cuda context"] = CUDA_CONTEXT_GB * GIB
    return plan


def plan_input(cfg: RunConfig, model_path: str, card_gb: float | None, prompt_tokens: int | None = None) -> PlanInput:
    """The planner's view of a RunConfig, from the model config alone (no weights)."""
    args = cfg.args
    dtype = "bf16" if args.bf16 else ("fp16" if args.fp16 else "fp32")
    optim = str(getattr(args.optim, "value", args.optim))
    optim = optim if optim in _OPTIMS else ("adamw_8bit" if "8bit" in optim else "adamw_torch")
    return PlanInput(
        shape=ModelShape.resolve(model_path), load_in_4bit=cfg.load_in_4bit, lora=cfg.lora, lora_r=cfg.lora_r,
        full_finetune=not cfg.lora, optim=optim, gradient_checkpointing=bool(args.gradient_checkpointing),
        num_generations=args.num_generations, per_device_train_batch_size=args.per_device_train_batch_size,
        max_prompt_tokens=min(prompt_tokens or cfg.max_prompt_tokens, cfg.max_prompt_tokens),
        max_completion_length=args.max_completion_length, dtype=dtype, use_vllm=bool(args.use_vllm),
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization, beta=args.beta,
        unsloth=select_backend(cfg.backend, cuda=card_gb is not None).name == "unsloth", card_gb=card_gb,
    )


def profile_for(card_gb: float | None) -> str:
    """"cpu" without a GPU; "memory" below 40 GiB (T4, 24 GB consumer cards); "performance" from 40 GiB."""
    if card_gb is None:
        return "cpu"
    return "memory" if card_gb < 40 else "performance"


def _fits(p: PlanInput, card_gb: float) -> bool:
    return estimate(p).total_gb <= card_gb - max(1.0, SAFETY_MARGIN * card_gb)


def _halvings(start: int, floor: int) -> list[int]:
    out = [start]
    while out[-1] // 2 >= floor:
        out.append(out[-1] // 2)
    return out


def _size_vllm(p: PlanInput, card_gb: float) -> PlanInput:
    """Colocated vLLM gets what it needs for this group (rounded up to 0.05), not a blanket fraction."""
    if not (p.use_vllm and p.vllm_mode == "colocate"):
        return p
    probe = estimate(replace(p, card_gb=None))
    need = probe.components["vLLM (colocated)"] + (probe.components["weights"] if p.unsloth else 0.0)
    return replace(p, vllm_gpu_memory_utilization=min(0.9, max(0.1, math.ceil(need / GIB / card_gb * 20) / 20)))


def propose(shape: ModelShape, card_gb: float, base: PlanInput) -> PlanInput:
    """Settings derived from ``base`` that fit ``card_gb`` with a safety margin.

    Cheapest changes first: checkpointing/8-bit optimizer/vLLM share (memory profile also 4-bit), then smaller
    micro-batches (speed only), then 4-bit, then fewer generations (16 -> 8 -> 4: weaker group signal), and
    shorter completions last (they change the task). Raises UserError when even the smallest setting fails.
    """
    profile = profile_for(card_gb)
    p = replace(base, shape=shape, card_gb=card_gb, gradient_checkpointing=True)
    if profile == "memory":
        p = replace(p, optim="adamw_8bit" if p.optim == "adamw_torch" else p.optim,
                    load_in_4bit=p.lora or p.load_in_4bit)
        gens = [g for g in (8, 4) if g <= max(8, base.num_generations)]
    else:
        p = replace(p, dtype="bf16" if p.dtype == "fp32" else p.dtype, use_vllm=True)
        gens = [16, 8, 4]
    four_bit = [p.load_in_4bit] + ([True] if p.lora and not p.load_in_4bit else [])
    for completion in _halvings(p.max_completion_length, min(256, p.max_completion_length)):
        for g in gens:
            for four in four_bit:
                for b in _halvings(g, 1):
                    cand = _size_vllm(replace(p, max_completion_length=completion, load_in_4bit=four,
                                              num_generations=g, per_device_train_batch_size=b), card_gb)
                    if _fits(cand, card_gb):
                        return cand
    smallest = replace(p, max_completion_length=min(256, p.max_completion_length), load_in_4bit=p.lora,
                       num_generations=4, per_device_train_batch_size=1)
    need = estimate(_size_vllm(smallest, card_gb)).total_gb
    raise UserError(
        f"even the smallest GRPO setting needs ~{need:.1f} GiB, more than the {card_gb:g} GiB card allows "
        f"with a {SAFETY_MARGIN:.0%} margin",
        f"model with {shape.n_params / 1e9:.2f}B parameters",
        "use a smaller model, LoRA with 4-bit loading (load_in_4bit), shorter prompts/completions, or a larger GPU",
    )


def measured_peak_gb() -> float | None:
    """Peak memory torch allocated on the current CUDA device so far, in GiB; None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return torch.cuda.max_memory_allocated() / GIB


def compare(plan: MemoryPlan, measured_gb: float) -> float:
    """Relative error (estimate - measured) / measured against ``max_memory_allocated``; > 0 = overestimate.

    Uses ``plan.allocated_gb`` because the allocator counter excludes the CUDA context.
    """
    if measured_gb <= 0:
        raise ValueError("measured peak must be positive")
    return (plan.allocated_gb - measured_gb) / measured_gb
