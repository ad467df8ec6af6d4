"""Reward models: ``rewards: [{model: <hub id | folder | embedded>, weight: 1}]`` scored on TRL's own path.

In training the trainer gets the model's location (``trl_entry``) and TRL loads it as
``AutoModelForSequenceClassification(num_labels=1)`` with its tokenizer, places it with the run's accelerator and
scores prompt + completion in the run's batches. Outside training (``rewards check``, the evaluation) the same
object scores the same text the same way, loading the weights on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_fast.rewards.base import completion_text
from grpo_fast.rewards.judge_client import check_model


class RewardModel:
    """A sequence-classification reward model: one logit per completion. ``__name__`` is what TRL logs it as
    (the last part of the model's id or folder), so the kit's logs and TRL's agree."""

    reward_kind = "preference"

    def __init__(self, path: str):
        self.path = path
        self.__name__ = self.__qualname__ = path.rstrip("/").split("/")[-1]
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "__name__": self.__name__, "__qualname__": self.__qualname__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _loaded=None)

    def __repr__(self) -> str:
        return f"<reward model {self.path}>"

    def trl_entry(self) -> str:
        """What ``GRPOTrainer(reward_funcs=...)`` takes for this reward: the model's id or folder."""
        return self.path

    def load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                from transformers import AutoModelForSequenceClassification, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(self.path)
                if tokenizer.pad_token is None:
                    tokenizer.pad_token = tokenizer.eos_token
                model = AutoModelForSequenceClassification.from_pretrained(self.path, num_labels=1).eval()
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
            return [float(v) for v in model(**enc).logits[:, 0]]


def make_reward_model(model: str) -> RewardModel:
    """A reward model by hub id, folder or ``embedded``; an unknown one is refused naming ``model``."""
    path = check_model(model, "model")
    return RewardModel(str(Path(path)) if Path(path).exists() else path)


def trl_reward_funcs(funcs: Sequence[Any]) -> list[Any]:
    """The run's rewards as TRL takes them: reward models by location, everything else as is."""
    return [f.trl_entry() if isinstance(f, RewardModel) else f for f in funcs]
