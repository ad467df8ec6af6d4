"""Reward models: ``rewards: [{model: <hub id | folder | embedded>, weight: 1}]`` scored on TRL's own path.

In training the trainer gets the model's location (``trl_entry``) and TRL loads it as
``AutoModelForSequenceClassification(num_labels=1)`` with its tokenizer, places it with the run's accelerator and
scores prompt + completion in the run's batches (TRL scores a step's completions in one batch). With ``dtype`` or
``load_in_4bit`` the kit makes that same call with those settings (TRL 1.14.2 would take them only from
``model_init_kwargs``, which its reference model shares) and hands TRL the model: TRL still loads its tokenizer,
places it and scores. Outside training (``rewards check``, the evaluation) the same object scores the same text
the same way, loading the weights on first use.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError
from grpo_fast.rewards.base import completion_text
from grpo_fast.rewards.judge_client import check_model

DTYPES = ("auto", "float32", "bfloat16", "float16")


class RewardModel:
    """A sequence-classification reward model: one logit per completion. ``__name__`` is what TRL logs it as
    (the last part of the model's id or folder), so the kit's logs and TRL's agree."""

    reward_kind = "preference"

    def __init__(self, path: str, dtype: str | None = None, load_in_4bit: bool = False):
        self.path, self.dtype, self.load_in_4bit = path, dtype, load_in_4bit
        self.__name__ = self.__qualname__ = path.rstrip("/").split("/")[-1]
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("path", "dtype", "load_in_4bit", "__name__", "__qualname__")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _loaded=None)

    def __repr__(self) -> str:
        return f"<reward model {self.path}>"

    def init_kwargs(self) -> dict[str, Any]:
        """``from_pretrained`` keywords for the configured dtype and 4-bit loading (none by default)."""
        import torch

        kwargs: dict[str, Any] = {}
        if self.dtype:
            kwargs["dtype"] = self.dtype if self.dtype == "auto" else getattr(torch, self.dtype)
        if self.load_in_4bit:
            from transformers import BitsAndBytesConfig

            compute = getattr(torch, self.dtype) if self.dtype in ("bfloat16", "float16") else torch.bfloat16
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=compute)
            kwargs["device_map"] = {"": torch.cuda.current_device()}  # this process's GPU, as TRL's run uses
        return kwargs

    def trl_entry(self) -> Any:
        """What ``GRPOTrainer(reward_funcs=...)`` takes for this reward: the model's id or folder, or, with dtype or
        4-bit settings, the model loaded by TRL's own call with them."""
        if not self.init_kwargs():
            return self.path
        from transformers import AutoModelForSequenceClassification

        return AutoModelForSequenceClassification.from_pretrained(self.path, num_labels=1, **self.init_kwargs())

    def load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                from transformers import AutoModelForSequenceClassification, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(self.path)
                if tokenizer.pad_token is None:
                    tokenizer.pad_token = tokenizer.eos_token
                model = AutoModelForSequenceClassification.from_pretrained(self.path, num_labels=1,
                                                                           **self.init_kwargs()).eval()
                model.config.pad_token_id = tokenizer.pad_token_id
                self._loaded = (model, tokenizer)
        return self._loaded

    def __call__(self, prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None,
                 **_: Any) -> list[float | None]:
        """Score as TRL does: the chat (prompt + completion) through the chat template, else the two texts."""
        import torch

        model, tokenizer = self.load()
        prompts = list(prompts or [""] * len(completions or []))
        texts = []
        for prompt, completion in zip(prompts, completions or []):
            if isinstance(prompt, list):
                reply = completion if isinstance(completion, list) else [
                    {"role": "assistant", "content": completion_text(completion)}]
                texts.append(tokenizer.apply_chat_template(prompt + reply, tokenize=False))
            else:
                texts.append(str(prompt) + completion_text(completion))
        if not texts:
            return []
        enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False,
                        truncation=True, max_length=min(int(tokenizer.model_max_length or 4096), 4096))
        with torch.inference_mode():
            return [float(v) for v in model(**enc.to(model.device)).logits[:, 0]]


def make_reward_model(model: str, dtype: str | None = None, load_in_4bit: bool = False) -> RewardModel:
    """A reward model by hub id, folder or ``embedded``; an unknown one is refused naming ``model``, a dtype
    torch does not know naming ``dtype``, 4-bit without a CUDA GPU and bitsandbytes naming ``load_in_4bit``."""
    if dtype is not None and dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r} for a reward model", "dtype", f"use one of: {', '.join(DTYPES)}")
    if load_in_4bit:
        import torch

        missing = [what for what, ok in (("a CUDA GPU", torch.cuda.is_available()),
                                         ("bitsandbytes", importlib.util.find_spec("bitsandbytes") is not None))
                   if not ok]
        if missing:
            raise UserError(f"a 4-bit reward model needs {' and '.join(missing)}, not available on this host",
                            "load_in_4bit", "set load_in_4bit: false (dtype: float32 on a CPU), or run on a GPU "
                            "with bitsandbytes (pip install -r requirements-gpu.txt)")
    path = check_model(model, "model")
    return RewardModel(str(Path(path)) if Path(path).exists() else path, dtype, bool(load_in_4bit))


def trl_reward_funcs(funcs: Sequence[Any]) -> list[Any]:
    """The run's rewards as TRL takes them: reward models by location, everything else as is."""
    return [f.trl_entry() if isinstance(f, RewardModel) else f for f in funcs]
