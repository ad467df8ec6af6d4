"""A tiny model that calls the ``python`` tool, trained in-process (no downloads), for runs of TRL's tool loop.

    tok, model, figures = tool_caller()   # seconds on a GPU, ~20 s on one CPU core
    save_tool_caller(folder)              # the same, saved as a local model folder for `model: <folder>`

A random model never writes a ``<tool_call>``, so a GRPO run with tools on one leaves the tool loop unexercised.
This one is a 2-layer Qwen2 (hidden 128, 2 heads of 64) trained from scratch, all weights, on tool_math
conversations rendered by the kit's own tool template (``use_tool_template``: the system prompt, the ``python``
tool's schema, ``What is A * B?``). After the generation prompt it writes one fixed call,
``<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call><|im_end|>``, and after the tool's
reply ``42<|im_end|>``: it does not copy the operands, so its final answers are wrong; its calls are well formed and
run. ``tool_caller`` checks greedy generation parses to that call (TRL's ``parse_response``) before returning, and
raises if training did not get there.

The tokenizer is a byte-level BPE with ChatML special tokens and a plain ChatML template (no tool support, like the
embedded SmolLM2's), so a run swaps in the kit's template exactly as it does for that model. Digits are single
tokens, so unseen operands bring no unseen tokens. Sizes avoid what Unsloth cannot tell apart or rescales: the
vocab (384, a multiple of 64) differs from the hidden size (128), since Unsloth's GRPO path tells hidden states
from logits by their width, and ``max_position_embeddings`` (1024) is at least the kit's ``max_seq_length``, or
Unsloth applies linear RoPE scaling on load and the trained positions shift.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

SPECIAL = ["<|pad|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 384  # a multiple of 64 (no odd-width paths in fused kernels), and not the hidden size
MAX_POSITIONS = 1024
CHATML_TEMPLATE = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Plain ChatML, no tools: ``use_tool_template`` replaces it with the kit's tool template."""
CALL_QUESTION = "What is 6 * 7?"  # the demonstration of this question is the fixed completion
TRAIN_ROWS = 8  # the completion is fixed and digits are single tokens: 8 conversations generalise to unseen ones
TRAIN_SEED = 7
MAX_STEPS = 600  # ~200 are needed
CHECK_ROWS = 8
TARGET_LOSS = 0.005  # mean loss per completion token: a sampled (T=1) first reply is the exact call ~80% of the time


def fixed_completion() -> list[dict[str, Any]]:
    """The completion taught for every question: the kit's tool_math demonstration of 6 * 7."""
    from grpo_fast.recipes.tool_math import demonstration

    return demonstration({"prompt": [{"role": "user", "content": CALL_QUESTION}]})


def tool_list() -> list[Any]:
    """The tools as TRL's trainer passes them to the chat template: an environment's bound methods."""
    from grpo_fast.tools.chat import environment_tools
    from grpo_fast.tools.python import PythonSession

    return environment_tools(PythonSession())


def _fast_tokenizer(tokenizer_json: str) -> Any:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(tokenizer_json), pad_token="<|pad|>",
                                  eos_token="<|im_end|>", padding_side="left")
    tok.chat_template = CHATML_TEMPLATE
    tok.model_max_length = MAX_POSITIONS
    return tok


@lru_cache(maxsize=2)
def _bpe_json(corpus: tuple[str, ...], vocab_size: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok.to_str()


def tool_rows(n: int, seed: int) -> list[dict[str, Any]]:
    from grpo_fast.recipes.tool_math import make_rows

    return make_rows(n, seed=seed)


def tool_tokenizer_for_rendering(tok: Any) -> Any:
    """A copy of ``tok`` with the kit's tool template, as a run sets it (the saved tokenizer keeps plain ChatML)."""
    from grpo_fast.tools.chat import use_tool_template

    rendering = copy.deepcopy(tok)
    use_tool_template(rendering)
    return rendering


def caller_tokenizer() -> Any:
    """The byte-level BPE (384 tokens, ChatML specials) trained on rendered tool_math conversations."""
    base = _fast_tokenizer(_bpe_json((), 0))  # bytes and specials only: enough to render text
    render = tool_tokenizer_for_rendering(base)
    tools, completion = tool_list(), fixed_completion()
    texts = tuple(render.apply_chat_template([*r["prompt"], *completion], tools=tools, tokenize=False)
                  for r in tool_rows(32, TRAIN_SEED))
    return _fast_tokenizer(_bpe_json(texts, VOCAB))


def encode_conversations(render: Any, rows: list[dict[str, Any]]) -> list[tuple[list[int], int]]:
    """(token ids of prompt + fixed completion, where the completion starts) per row, rendered as TRL renders."""
    tools, completion = tool_list(), fixed_completion()
    out = []
    for row in rows:
        prompt = render.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=False)
        full = render.apply_chat_template([*row["prompt"], *completion], tools=tools, tokenize=False)
        assert full.startswith(prompt), "the tool template must extend the prompt with the completion"
        ids = render(full, add_special_tokens=False)["input_ids"]
        start = len(render(prompt, add_special_tokens=False)["input_ids"])
        assert ids[:start] == render(prompt, add_special_tokens=False)["input_ids"]
        out.append((ids, start))
    return out


def caller_model(tok: Any, seed: int = 0) -> Any:
    """A random 2-layer Qwen2 sized to ``tok``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS,
                         tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         bos_token_id=None)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                                               bos_token_id=None)
    return model


def train_caller(model: Any, data: list[tuple[list[int], int]], pad_id: int, device: str, seed: int = 0,
                 max_steps: int = MAX_STEPS, lr: float = 3e-3) -> dict[str, Any]:
    """Full-parameter AdamW on the completions' tokens (the prompt is context only); stops at ``TARGET_LOSS``."""
    import torch

    length = max(len(ids) for ids, _ in data)
    input_ids = torch.full((len(data), length), pad_id, dtype=torch.long)
    labels = torch.full((len(data), length), -100, dtype=torch.long)
    mask = torch.zeros((len(data), length), dtype=torch.long)
    for i, (ids, start) in enumerate(data):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        labels[i, start: len(ids)] = torch.tensor(ids[start:])
        mask[i, : len(ids)] = 1
    input_ids, labels, mask = input_ids.to(device), labels.to(device), mask.to(device)
    model.to(device).train()
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    loss_value, steps = float("inf"), 0
    while steps < max_steps and loss_value >= TARGET_LOSS:
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        loss_value, steps = loss.item(), steps + 1
    model.eval()
    return {"steps": steps, "loss": round(loss_value, 4), "tokens": int(mask.sum())}


def greedy_turns(model: Any, tok: Any, row: dict[str, Any], max_new_tokens: int = 48) -> tuple[dict, str]:
    """(the first reply parsed as TRL's tool loop parses it, the reply after the tool's output as text)."""
    import torch
    from trl.chat_template_utils import parse_response

    render, tools, completion = tool_tokenizer_for_rendering(tok), tool_list(), fixed_completion()
    device = next(model.parameters()).device

    def generate(messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        text = render.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
        prompt = render(text, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([prompt], device=device), max_new_tokens=max_new_tokens,
                                 do_sample=False)
        return prompt, out[0, len(prompt):].tolist()

    prompt, ids = generate(row["prompt"])
    call = parse_response(render, ids, prefix=prompt)
    _, ids = generate([*row["prompt"], *completion[:2]])
    return call, render.decode(ids)


def call_probability(model: Any, data: list[tuple[list[int], int]], eos_id: int) -> float:
    """Mean over ``data`` of the probability that a sampled first reply (temperature 1, as GRPO samples) is
    exactly the call, ``<|im_end|>`` included."""
    import math

    import torch

    device = next(model.parameters()).device
    total = 0.0
    for ids, start in data:
        end = ids.index(eos_id, start) + 1
        with torch.no_grad():
            logps = model(torch.tensor([ids[:end]], device=device)).logits[0, :-1].float().log_softmax(-1)
        targets = torch.tensor(ids[1:end], device=device)
        total += math.exp(float(logps.gather(1, targets[:, None])[start - 1:].sum()))
    return round(total / len(data), 3)


def check_caller(model: Any, tok: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Greedy on ``rows`` (not trained on): first replies that are the python call, then ``42<|im_end|>``; and
    how likely a sampled first reply is the call."""
    expected_call = fixed_completion()[0]["tool_calls"][0]["function"]
    answer = fixed_completion()[2]["content"] + "<|im_end|>"
    calls = answers = 0
    for row in rows:
        call, reply = greedy_turns(model, tok, row)
        calls += [c.get("function") for c in call.get("tool_calls") or []] == [expected_call]
        answers += reply == answer
    data = encode_conversations(tool_tokenizer_for_rendering(tok), rows)
    return {"rows": len(rows), "calls": calls, "answers": answers,
            "p_call": call_probability(model, data, tok.eos_token_id)}


def tool_caller(device: str | None = None, seed: int = 0) -> tuple[Any, Any, dict[str, Any]]:
    """(tokenizer, trained model on CPU, figures); raises if greedy output on unseen questions is not the call.
    ``figures["check_bf16"]``: the same check in bfloat16, the dtype a GPU run loads it in."""
    import time

    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    start, threads = time.time(), torch.get_num_threads()
    if device == "cpu":  # matrices this small gain little from a second thread, and on cores other jobs keep
        torch.set_num_threads(1)  # busy, OpenMP threads waiting on each other made training 10x slower (measured)
    try:
        tok = caller_tokenizer()
        model = caller_model(tok, seed)
        data = encode_conversations(tool_tokenizer_for_rendering(tok), tool_rows(TRAIN_ROWS, TRAIN_SEED))
        figures = train_caller(model, data, tok.pad_token_id, device, seed)
        unseen = tool_rows(CHECK_ROWS, TRAIN_SEED + 1)
        check = check_caller(model, tok, unseen)
        bf16 = check_caller(copy.deepcopy(model).to(torch.bfloat16), tok, unseen)
    finally:
        torch.set_num_threads(threads)
    figures.update(check=check, check_bf16=bf16, device=device, seconds=round(time.time() - start, 1),
                   prompt_tokens=data[0][1], completion_tokens=len(data[0][0]) - data[0][1])
    if check["calls"] < check["rows"]:
        raise RuntimeError(f"the tool caller did not learn its call: {figures}")
    return tok, model.to("cpu"), figures


def save_tool_caller(folder: Any, device: str | None = None) -> dict[str, Any]:
    """Train the tool caller and save model and tokenizer to ``folder`` (a local model path for the kit)."""
    tok, model, figures = tool_caller(device)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return figures
