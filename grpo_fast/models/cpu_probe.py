"""The bf16 probe: does bf16 autocast make *this run's training pass* faster on this CPU?

It times what the training pass does, fp32 vs bf16 autocast, on one thread: a decoder layer of the run's model
(frozen base weights with LoRA adapters, attention, norms) and its LM head with the log-softmax over the
vocabulary, at the micro-batch's token count, with the group's shared prompt computed once as the kit's
shared-prompt training forward does (two model calls per pass). The estimate for the whole pass is
``layers x layer + head``.

Why not a few matmuls: a trainable 576->1536->576 block at 256 tokens found bf16 2.1x faster on a Sapphire Rapids
core while the demo's real training pass ran 0.97x of fp32 (benchmarks/bench_autocast.py). Autocast keeps its
casts only for leaf tensors that require grad, so every frozen base weight is re-cast on every model call (twice
per pass with the shared prompt); frozen weights need no weight-gradient matmul, a third of the matmul work
where bf16 gains most; and the demo's pass has only 8 x 16 completion tokens plus one 50-token prompt, too few
for the matmul saving to pay for the casts, the LoRA branches, attention and the loss.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.embedded import EMBEDDED, EMBEDDED_NAME, model_source

# SmolLM2-135M, the embedded model
EMBEDDED_DIMS = {"hidden": 576, "intermediate": 1536, "heads": 9, "kv_heads": 3, "head_dim": 64, "layers": 30,
                 "vocab": 49152}
PROMPT_TOKENS = 64  # a short chat prompt (the demo's are about 50 tokens); the real length is not known before data
MAX_TOKENS = 512  # completion tokens a probe pass runs at most (fewer rows beyond): keeps it near a second
HEAD_VOCAB = 8192  # vocabulary columns the head is timed on; its cost is linear in the vocabulary, so it is scaled
BUDGET_S = 1.2  # stop starting rounds after this long (at least two rounds where bf16 is native)


@dataclass(frozen=True)
class ProbeShape:
    """The training pass's shapes: the model's layers and the micro-batch (``lora_r`` None: full fine-tuning)."""

    hidden: int = 576
    intermediate: int = 1536
    heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    layers: int = 30
    vocab: int = 49152
    lora_r: int | None = 16
    rows: int = 8  # completions in a micro-batch
    prompts: int = 1  # distinct prompts among them (each computed once where the prompt is shared)
    prompt_tokens: int = PROMPT_TOKENS
    completion_tokens: int = 16
    shared: bool = True  # the shared-prompt training forward (shared_prefill on, gradient checkpointing off)

    def key(self) -> str:
        """What distinguishes one probe answer from another, for the cache."""
        lora = f"lora r{self.lora_r}" if self.lora_r else "full"
        prompt = f"{self.prompts}x{self.prompt_tokens} shared" if self.shared else f"{self.prompt_tokens} per row"
        return (f"{self.hidden}/{self.intermediate} h{self.heads}/{self.kv_heads}x{self.head_dim} L{self.layers} "
                f"V{self.vocab} {lora} | {self.rows}x{self.completion_tokens} + prompt {prompt}")

    def capped(self, max_tokens: int = MAX_TOKENS) -> ProbeShape:
        """The same pass with fewer rows where it has more than ``max_tokens`` completion tokens: bf16's
        advantage grows with the token count, so a capped probe errs towards fp32."""
        rows = max(1, min(self.rows, max_tokens // max(1, self.completion_tokens)))
        return replace(self, rows=rows, prompts=min(self.prompts, rows))


def model_dims(model: str | None) -> dict[str, int]:
    """The run model's layer shapes, from its config where it is readable offline; else the embedded model's."""
    if model in (None, "", EMBEDDED, EMBEDDED_NAME):
        return EMBEDDED_DIMS
    try:
        from transformers import AutoConfig

        c = AutoConfig.from_pretrained(model_source(model), local_files_only=True).get_text_config()
        heads = c.num_attention_heads
        return {"hidden": c.hidden_size, "intermediate": c.intermediate_size, "heads": heads,
                "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
                "head_dim": getattr(c, "head_dim", None) or c.hidden_size // heads, "layers": c.num_hidden_layers,
                "vocab": c.vocab_size}
    except Exception:  # a hub id not downloaded yet, an architecture without these fields: the embedded shapes
        return EMBEDDED_DIMS


def shape_for(cfg: RunConfig) -> ProbeShape:
    """The probe shape of a run config: its model, LoRA, micro-batch and whether the prompt is shared (keys it
    lacks take the demo's values: ``grpo-fast doctor`` passes the ``cpu`` profile alone)."""
    args = getattr(cfg, "args", None)

    def setting(key: str, default: Any) -> Any:
        value = getattr(args, key, None) if args is not None else getattr(cfg, key, None)
        return default if value is None else value

    rows = int(setting("per_device_train_batch_size", 8))
    group = max(1, int(setting("num_generations", 8)))
    shared = getattr(cfg, "shared_prefill", "auto") not in (False, None) and not setting("gradient_checkpointing",
                                                                                          False)
    lora = getattr(cfg, "lora", True)
    return ProbeShape(**model_dims(getattr(cfg, "model", None)), lora_r=int(getattr(cfg, "lora_r", 16)) if lora
                      else None, rows=rows, prompts=max(1, -(-rows // group)),
                      completion_tokens=int(setting("max_completion_length", 16)), shared=shared)


class _Pass:
    """One decoder layer and the LM head of ``shape`` with random weights, and their timed forward+backward."""

    def __init__(self, shape: ProbeShape, seed: int = 0, head_vocab: int = HEAD_VOCAB) -> None:
        import torch

        self.s, self.torch = shape, torch
        gen = torch.Generator().manual_seed(seed)
        head_dim = shape.head_dim
        sizes = {"q": (shape.heads * head_dim, shape.hidden), "k": (shape.kv_heads * head_dim, shape.hidden),
                 "v": (shape.kv_heads * head_dim, shape.hidden), "o": (shape.hidden, shape.heads * head_dim),
                 "gate": (shape.intermediate, shape.hidden), "up": (shape.intermediate, shape.hidden),
                 "down": (shape.hidden, shape.intermediate)}
        full = shape.lora_r is None

        def param(*size: int, grad: bool, scale: float = 0.02) -> Any:
            return (torch.randn(*size, generator=gen) * scale).requires_grad_(grad)

        self.w = {n: param(*size, grad=full) for n, size in sizes.items()}
        self.lora = {} if full else {n: (param(shape.lora_r, size[1], grad=True), param(size[0], shape.lora_r,
                                                                                           grad=True))
                                     for n, size in sizes.items()}
        self.norm = param(shape.hidden, grad=False, scale=1.0)
        self.head = param(min(shape.vocab, head_vocab), shape.hidden, grad=False)  # tied to the frozen embedding
        rows = shape.rows
        if shape.shared:
            self.x = [param(shape.prompts, shape.prompt_tokens, shape.hidden, grad=True, scale=1.0),
                      param(rows, shape.completion_tokens, shape.hidden, grad=True, scale=1.0)]
        else:
            self.x = [param(rows, shape.prompt_tokens + shape.completion_tokens, shape.hidden, grad=True, scale=1.0)]
        self.h = param(rows * shape.completion_tokens, shape.hidden, grad=True, scale=1.0)
        self.labels = torch.randint(0, self.head.shape[0], (rows * shape.completion_tokens, 1), generator=gen)
        positions = torch.arange(shape.prompt_tokens + shape.completion_tokens, dtype=torch.float32)
        freqs = positions[:, None] / 10000 ** (torch.arange(0, head_dim, 2) / head_dim)
        angles = torch.cat([freqs, freqs], dim=-1)
        self.cos, self.sin = angles.cos(), angles.sin()

    def _rms(self, x: Any) -> Any:
        f = x.float()
        return self.norm * (f * self.torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    def _linear(self, x: Any, name: str) -> Any:
        out = self.torch.nn.functional.linear(x, self.w[name])
        if name in self.lora:
            a, b = self.lora[name]
            out = out + self.torch.nn.functional.linear(self.torch.nn.functional.linear(x, a), b) * 2.0
        return out

    def _rope(self, x: Any, start: int) -> Any:
        cos, sin = self.cos[start:start + x.shape[2]], self.sin[start:start + x.shape[2]]
        half = x.shape[-1] // 2
        rotated = self.torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin  # fp32 tables promote bf16 q/k to fp32, as transformers' Llama does

    def _layer(self, x: Any, start: int = 0, prefix: tuple[Any, Any] | None = None) -> tuple[Any, tuple[Any, Any]]:
        torch, s = self.torch, self.s
        b, t, _ = x.shape
        h = self._rms(x)
        q = self._rope(self._linear(h, "q").view(b, t, s.heads, -1).transpose(1, 2), start)
        k = self._rope(self._linear(h, "k").view(b, t, s.kv_heads, -1).transpose(1, 2), start)
        v = self._linear(h, "v").view(b, t, s.kv_heads, -1).transpose(1, 2)
        keys, values, mask = k, v, None
        if prefix is not None:  # the completions attend to their prompt's keys and values, computed once
            pk, pv = (p.repeat_interleave(b // p.shape[0], dim=0) for p in prefix)
            keys, values = torch.cat([pk, k], dim=2), torch.cat([pv, v], dim=2)
            mask = torch.ones(t, keys.shape[2], dtype=torch.bool).tril(keys.shape[2] - t)
        group = s.heads // s.kv_heads
        keys, values = (z[:, :, None].expand(-1, -1, group, -1, -1).reshape(b, s.heads, z.shape[2], -1)
                        for z in (keys, values))
        attn = torch.nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=mask,
                                                                is_causal=mask is None)
        x = x + self._linear(attn.transpose(1, 2).reshape(b, t, -1), "o")
        h = self._rms(x)
        x = x + self._linear(torch.nn.functional.silu(self._linear(h, "gate")) * self._linear(h, "up"), "down")
        return x, (k, v)

    def layer(self, bf16: bool) -> float:
        """One decoder layer's forward+backward in seconds: the prompt call and the completions' call."""
        torch = self.torch
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            if self.s.shared:
                prompt, kv = self._layer(self.x[0])
                out, _ = self._layer(self.x[1], start=self.s.prompt_tokens, prefix=kv)
                loss = out.float().square().mean() + prompt.float().square().mean()
            else:
                out, _ = self._layer(self.x[0])
                loss = out.float().square().mean()
        loss.backward()
        elapsed = time.perf_counter() - start
        self._clear()
        return elapsed

    def head_pass(self, bf16: bool) -> float:
        """The LM head, the log-softmax of the chosen tokens and the entropy, forward+backward, in seconds."""
        torch = self.torch
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logps = torch.nn.functional.linear(self._rms(self.h), self.head).float().log_softmax(-1)
            loss = -logps.gather(-1, self.labels).mean()
            with torch.no_grad():
                (logps.exp() * logps).sum(-1)
        loss.backward()
        elapsed = time.perf_counter() - start
        self._clear()
        return elapsed

    def _clear(self) -> None:
        for t in (*self.w.values(), *(p for pair in self.lora.values() for p in pair), *self.x, self.h):
            t.grad = None


def run_probe(shape: ProbeShape | None = None, rounds: int = 6, budget_s: float = BUDGET_S) -> dict[str, Any]:
    """Fastest of alternating fp32 / bf16 forward+backward passes of one layer and of the head, on one thread
    (other jobs on shared cores make multi-threaded timings swing 3x; one thread's fastest pass holds still),
    combined as ``layers x layer + head``. Stops once ``budget_s`` is spent after two rounds: about a second
    where bf16 is native. ``rounds=1`` (no bf16 warm-up, a quarter of the head) only reports how slow emulated
    bf16 is."""
    import torch

    shape = (shape or ProbeShape()).capped()
    head_vocab = HEAD_VOCAB if rounds > 1 else HEAD_VOCAB // 4
    vocab_scale = shape.vocab / min(shape.vocab, head_vocab)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    began = time.perf_counter()
    try:
        probe = _Pass(shape, head_vocab=head_vocab)
        probe.layer(False), probe.head_pass(False)  # warm-up: kernel selection, oneDNN primitive caches
        if rounds > 1:  # (one round only reports a slow, emulated bf16: its first call's set-up hardly counts)
            probe.layer(True), probe.head_pass(True)
        times: dict[str, list[float]] = {"layer32": [], "layer16": [], "head32": [], "head16": []}
        for done in range(rounds):
            if done >= min(2, rounds) and time.perf_counter() - began > budget_s:
                break
            times["layer32"].append(probe.layer(False))
            times["layer16"].append(probe.layer(True))
            times["head32"].append(probe.head_pass(False))
            times["head16"].append(probe.head_pass(True))
    finally:
        torch.set_num_threads(threads)
    best = {k: min(v) for k, v in times.items()}
    fp32 = shape.layers * best["layer32"] + vocab_scale * best["head32"]
    bf16 = shape.layers * best["layer16"] + vocab_scale * best["head16"]
    return {"fp32_s": fp32, "bf16_s": bf16, "bf16_speed": fp32 / bf16,
            "layer_speed": best["layer32"] / best["layer16"], "head_speed": best["head32"] / best["head16"],
            "rounds": len(times["layer32"]), "probe_s": round(time.perf_counter() - began, 2),
            "shape": asdict(shape)}
