"""Model shapes: the few numbers of a decoder-only transformer that decide its memory, from a config.json or a
table of published configs (so the planner works offline, before any download).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError


@dataclass(frozen=True)
class ModelShape:
    """The few numbers of a decoder-only transformer that decide its memory."""

    n_params: int
    """Total parameter count (embeddings, layers, norms, lm_head unless tied)."""
    hidden_size: int
    """Residual stream width ``h``."""
    num_layers: int
    """Number of decoder layers."""
    num_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads (GQA); equals ``num_heads`` for plain multi-head attention."""
    head_dim: int
    """Per-head width; usually ``h / num_heads`` but decoupled in Qwen3/Gemma."""
    intermediate_size: int
    """Gated-MLP width ``I`` (gate/up project h -> I, down projects I -> h)."""
    vocab_size: int
    """Vocabulary size ``V``: sets the embedding, lm_head and logits size."""
    tie_embeddings: bool
    """Whether lm_head shares the embedding matrix (no separate lm_head parameters)."""

    @property
    def embedding_params(self) -> int:
        """Embedding + lm_head parameters; bitsandbytes keeps these in 16-bit when loading in 4-bit."""
        return self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)

    @property
    def kv_bytes_per_token(self) -> int:
        """16-bit K and V for all layers, per token of context."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * 2

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each projection in one layer, keyed by short module name."""
        h, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "gate": (h, i), "up": (h, i), "down": (i, h)}

    @classmethod
    def from_config(cls, cfg: Any) -> ModelShape:
        """Shape from a transformers ``PretrainedConfig`` or a config.json dict (llama/qwen2/qwen3/mistral/gemma)."""
        d: dict[str, Any] = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg)
        if isinstance(d.get("text_config"), Mapping):  # multimodal wrappers keep the LM under text_config
            d = {**d, **d["text_config"]}
        mtype = str(d.get("model_type", "")).lower()
        try:
            h, layers = int(d["hidden_size"]), int(d["num_hidden_layers"])
            heads, inter, vocab = int(d["num_attention_heads"]), int(d["intermediate_size"]), int(d["vocab_size"])
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(
                f"model config lacks {exc} needed to plan memory",
                "config.json",
                "use a llama/qwen2/mistral/gemma-style decoder config, or plan with a known model name",
            ) from None
        kv_heads = int(d.get("num_key_value_heads") or heads)
        head_dim = int(d.get("head_dim") or h // heads)
        tied = bool(d.get("tie_word_embeddings", mtype.startswith("gemma")))
        bias = bool(d.get("attention_bias", mtype == "qwen2"))
        q, kv = heads * head_dim, kv_heads * head_dim
        attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if bias else 0)
        mlp = 3 * h * inter + ((2 * inter + h) if d.get("mlp_bias") else 0)
        norms = (4 if mtype.startswith(("gemma2", "gemma3")) else 2) * h
        if mtype.startswith(("qwen3", "gemma3")):
            norms += 2 * head_dim  # per-head q_norm / k_norm
        n = vocab * h * (1 if tied else 2) + layers * (attn + mlp + norms) + h
        return cls(n, h, layers, heads, kv_heads, head_dim, inter, vocab, tied)

    @classmethod
    def resolve(cls, name_or_path: str) -> ModelShape:
        """A local dir with config.json, else a known hub name (no network), else a UserError."""
        path = Path(name_or_path).expanduser()
        if (path / "config.json").is_file():
            try:
                return cls.from_config(json.loads((path / "config.json").read_text()))
            except json.JSONDecodeError as exc:
                raise UserError(f"config.json is not valid JSON: {exc}", str(path / "config.json"), None) from None
        key = _table_key(name_or_path)
        if key in _KNOWN:
            return cls.from_config(_KNOWN[key])
        raise UserError(
            f"cannot plan memory for unknown model {name_or_path!r}",
            "model name",
            "pass a local directory containing config.json, or one of: " + ", ".join(KNOWN_MODELS),
        )


def _cfg(mtype: str, h: int, layers: int, heads: int, kv: int, inter: int, vocab: int, tied: bool,
         head_dim: int | None = None) -> dict[str, Any]:
    d = {"model_type": mtype, "hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
         "num_key_value_heads": kv, "intermediate_size": inter, "vocab_size": vocab, "tie_word_embeddings": tied}
    return d | ({"head_dim": head_dim} if head_dim else {})


# Fields typed in from the published config.json files; totals are checked in tests/models/test_memory_plan.py.
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen2.5-0.5B-Instruct": _cfg("qwen2", 896, 24, 14, 2, 4864, 151936, True),
    "Qwen/Qwen2.5-1.5B-Instruct": _cfg("qwen2", 1536, 28, 12, 2, 8960, 151936, True),
    "Qwen/Qwen2.5-3B-Instruct": _cfg("qwen2", 2048, 36, 16, 2, 11008, 151936, True),
    "Qwen/Qwen2.5-7B-Instruct": _cfg("qwen2", 3584, 28, 28, 4, 18944, 152064, False),
    "Qwen/Qwen3-0.6B": _cfg("qwen3", 1024, 28, 16, 8, 3072, 151936, True, 128),
    "Qwen/Qwen3-1.7B": _cfg("qwen3", 2048, 28, 16, 8, 6144, 151936, True, 128),
    "Qwen/Qwen3-4B": _cfg("qwen3", 2560, 36, 32, 8, 9728, 151936, True, 128),
    "Qwen/Qwen3-8B": _cfg("qwen3", 4096, 36, 32, 8, 12288, 151936, False, 128),
    "meta-llama/Llama-3.2-1B-Instruct": _cfg("llama", 2048, 16, 32, 8, 8192, 128256, True, 64),
    "meta-llama/Llama-3.2-3B-Instruct": _cfg("llama", 3072, 28, 24, 8, 8192, 128256, True, 128),
    "meta-llama/Llama-3.1-8B-Instruct": _cfg("llama", 4096, 32, 32, 8, 14336, 128256, False),
    "HuggingFaceTB/SmolLM2-135M-Instruct": _cfg("llama", 576, 30, 9, 3, 1536, 49152, True),
    "HuggingFaceTB/SmolLM2-360M-Instruct": _cfg("llama", 960, 32, 15, 5, 2560, 49152, True),
    "HuggingFaceTB/SmolLM2-1.7B-Instruct": _cfg("llama", 2048, 24, 32, 32, 8192, 49152, True),
}


def _table_key(name: str) -> str:
    """Normalise hub names so unsloth/ mirrors, -bnb-4bit quants, base/Instruct and 'Meta-' aliases match."""
    base = name.strip().rstrip("/").split("/")[-1].lower()
    for suffix in ("-unsloth-bnb-4bit", "-bnb-4bit", "-instruct"):
        base = base.removesuffix(suffix)
    return base.removeprefix("meta-")


_KNOWN: dict[str, dict[str, Any]] = {_table_key(k): v for k, v in KNOWN_MODELS.items()}
