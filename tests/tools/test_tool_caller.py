"""The in-process tool caller (tests/helpers/tool_caller.py): saved and loaded as a run loads it; it calls python."""

from __future__ import annotations

from pathlib import Path

import pytest
from tool_caller import CHATML_TEMPLATE, save_tool_caller, tool_list

from grpo_fast.recipes.tool_math import make_rows
from grpo_fast.tools.chat import use_tool_template
from grpo_fast.tools.python import PythonSession

CALL = {"type": "function", "function": {"name": "python", "arguments": {"code": "print(6 * 7)"}}}


@pytest.mark.slow
def test_tool_caller_from_its_folder_emits_a_call_trl_parses_and_the_sandbox_runs(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.chat_template_utils import parse_response

    figures = save_tool_caller(tmp_path, "cpu")
    assert figures["check"]["calls"] == figures["check"]["rows"] == 8, figures
    assert figures["check_bf16"]["calls"] == 8, figures  # a GPU run loads it in bf16
    assert figures["check"]["p_call"] > 0.5, figures  # GRPO samples at temperature 1: most samples must call
    tok = AutoTokenizer.from_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    assert tok.chat_template == CHATML_TEMPLATE and model.config.model_type == "qwen2"
    assert use_tool_template(tok).startswith("a compact ChatML tool template")  # what train() does with it
    row = make_rows(1, seed=12345)[0]  # a question it was not trained on
    prompt = tok.apply_chat_template(row["prompt"], tools=tool_list(), add_generation_prompt=True, tokenize=True,
                                     return_dict=False)
    with torch.no_grad():
        ids = model.generate(torch.tensor([prompt]), max_new_tokens=48, do_sample=False)[0, len(prompt):].tolist()
    assert ids[-1] == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    reply = parse_response(tok, ids, prefix=prompt)  # as TRL's _generate reads a completion
    assert reply["tool_calls"] == [CALL], tok.decode(ids)
    assert PythonSession().python(**CALL["function"]["arguments"]) == "42\n"
