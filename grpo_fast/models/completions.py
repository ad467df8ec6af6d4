"""Completions from a loaded model, batched: the held-out evaluation, the difficulty filter and ``grpo-fast
generate`` sample with the same function, so each sees what the others see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def prompt_text(tokenizer: Any, prompt: Any, chat_template_kwargs: dict[str, Any] | None = None) -> str:
    """A chat prompt through the chat template, ready to generate from; a plain string as it is."""
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False,
                                             **(chat_template_kwargs or {}))
    return prompt


def generate(model: Any, tokenizer: Any, prompts: Sequence[Any], *, n: int = 1, greedy: bool = True,
             max_new_tokens: int = 256, temperature: float = 1.0, top_p: float = 1.0,
             batch_size: int = 16, chat_template_kwargs: dict[str, Any] | None = None) -> list[list[tuple[str, int]]]:
    """``n`` completions per prompt as (text, token count), batched with left padding and the chat template
    (``chat_template_kwargs``: the run's, e.g. its thinking mode)."""
    import torch
    from transformers import GenerationConfig

    model_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = model_eos if model_eos is not None else tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": 0}  # as TRL samples
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=not greedy, num_return_sequences=n,
                              pad_token_id=pad, eos_token_id=eos, **sampling)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    stops = set(eos if isinstance(eos, list) else [eos]) | {pad, tokenizer.eos_token_id}
    out: list[list[tuple[str, int]]] = []
    try:
        for start in range(0, len(prompts), batch_size):
            texts = [prompt_text(tokenizer, p, chat_template_kwargs) for p in prompts[start:start + batch_size]]
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            with torch.no_grad():
                ids = model.generate(**batch, generation_config=config)
            new = ids[:, batch["input_ids"].shape[1]:].tolist()
            for i in range(len(texts)):
                group = []
                for seq in new[i * n:(i + 1) * n]:
                    length = next((j for j, t in enumerate(seq) if t in stops), len(seq))
                    group.append((tokenizer.decode(seq[:length], skip_special_tokens=True), length))
                out.append(group)
    finally:
        tokenizer.padding_side = side
    return out
