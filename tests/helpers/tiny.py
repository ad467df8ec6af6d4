"""Tiny tokenizer and model for fast CPU tests of real GRPO steps (< 2 s to build, no downloads).

    tok = tiny_tokenizer(); model = tiny_model(tok)

The tokenizer is a byte-level BPE trained in-process on a few strings, so it can encode and decode any text
(random generations decode to arbitrary strings, which is what reward functions must survive). It has a chat
template, pad/eos/bos tokens and left padding (what TRL's generation expects).
"""

from __future__ import annotations

from functools import lru_cache

_CORPUS = [
    "<reasoning>\nStep 1: add the numbers.\n</reasoning>\n<answer>\n42\n</answer>",
    "What is 6 times 7? Answer with a number. The answer is 42.",
    "```python\ndef add(a, b):\n    return a + b\n```",
    "Summarize the document. The council met on Monday to discuss the park.",
    "According to the context, Paris is the capital of France.",
]
_SPECIAL = ["<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|eos|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@lru_cache(maxsize=1)
def _tokenizer_json() -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    return tok.to_str()


def tiny_tokenizer():
    """A ``PreTrainedTokenizerFast`` (byte-level BPE, ~400 tokens) with chat template and pad token."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json()),
        pad_token="<|pad|>",
        bos_token="<|bos|>",
        eos_token="<|eos|>",
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    tok.model_max_length = 512
    return tok


def tiny_model(tokenizer, seed: int = 0):
    """A random 2-layer ``LlamaForCausalLM`` (hidden 32) sized to ``tokenizer``; deterministic per seed."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return model


def save_tiny_model(path):
    """The tiny model and its tokenizer saved in ``path``, a normal HF folder (as ``model: <path>`` expects)."""
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_grpo_trainer(tokenizer, reward_funcs, reward_weights, rows, output_dir, max_steps: int = 1):
    """TRL's real GRPOTrainer on a fresh tiny model: 4 completions per step, 8 new tokens, CPU."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(
        output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, use_cpu=True, bf16=False, report_to="none", save_strategy="no",
        logging_steps=1, reward_weights=list(reward_weights),
    )
    return GRPOTrainer(model=tiny_model(tokenizer), processing_class=tokenizer, reward_funcs=list(reward_funcs),
                       args=config, train_dataset=Dataset.from_list(rows))


# A random tiny model never answers an addition, so the demo's rewards are all 0 and LoRA would not move.
# Word count varies between its samples: this override gives every group reward variance.
VARIED_REWARDS = "rewards=[{name: ideal_length, target: 4}, {name: numeric_match, weight: 2.0}]"
