"""A thinking chat template for the embedded tokenizer (SmolLM2's ChatML), written for the tests.

Like a DeepSeek-R1 distill it opens ``<think>`` in the generation prompt, so every completion starts inside the
thinking; like Qwen3 it takes ``enable_thinking`` and, off, writes an empty closed think block instead. An
assistant turn in the history is rendered as the generation prompt would have started it, so a supervised
completion continues the rendered prompt exactly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['role'] == 'assistant' %}"
    "{% if '</think>' in m['content'] %}<think>\n{% else %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{% endif %}"
)


def thinking_model_dir(target: Path) -> Path:
    """A copy of the embedded model whose tokenizer has the thinking template (the weights are linked)."""
    from grpo_fast import models

    source = Path(models.embedded_model_dir())
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name == "model.safetensors":
            (target / item.name).symlink_to(item)
        elif item.name != "chat_template.jinja":
            shutil.copy(item, target / item.name)
    (target / "chat_template.jinja").write_text(THINKING_TEMPLATE)
    return target
