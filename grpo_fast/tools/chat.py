"""A chat template that can carry tool calls, and the parser that reads them back, for a model's tokenizer.

TRL's tool loop renders tool schemas, the model's calls and the tools' replies through the chat template, and reads
the calls back with ``tokenizer.parse_response``, whose response template TRL only sets for its own templates
(matched by identity). A model whose template drops tool calls (the embedded SmolLM2's does) but that speaks ChatML
(``<|im_start|>``/``<|im_end|>``) gets ``CHATML_TOOLS``: TRL's Qwen2.5 template with a compact tool list instead of
its 170-token preamble of JSON schemas (on a CPU every prompt token costs: this prompt is 3.5x shorter), the same
``<tool_call>`` JSON convention and replies, and TRL's parser for that convention. Any other model must bring a
tool-aware template TRL knows.
"""

from __future__ import annotations

import inspect
from typing import Any

from grpo_fast.errors import UserError

CHATML = ("<|im_start|>", "<|im_end|>")
CHATML_TOOLS = (
    "{%- if messages[0]['role'] == 'system' or tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- endif %}"
    "{%- if tools %}{{- '\\nTools (call one as <tool_call>\\n{\"name\": <tool>, \"arguments\": {<argument>: <value>}}"
    "\\n</tool_call>):' }}"
    "{%- for tool in tools %}{%- set f = tool.function if tool.function is defined else tool %}"
    "{{- '\\n- ' + f.name + '(' + (f.parameters.properties | list | join(', ')) + '): ' + f.description }}"
    "{%- endfor %}{%- endif %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first)"
    " or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for call in message.tool_calls %}{%- set call = call.function if call.function is defined else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + call.name + '\", \"arguments\": ' + (call.arguments | tojson) + '}"
    "\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
"""ChatML with tools: Qwen2.5's turns, calls (``<tool_call>`` JSON) and ``<tool_response>`` replies; tools listed
as ``- name(arguments): description``."""


def chatml(tokenizer: Any) -> bool:
    vocab = tokenizer.get_vocab()
    return all(token in vocab for token in CHATML)


def use_tool_template(tokenizer: Any, model: str = "the model") -> str:
    """Make ``tokenizer`` render and parse tool calls; returns what was done, in words (the run's log says it)."""
    from trl.chat_template_utils import (
        add_response_schema,
        qwen3_template,
        supports_tool_calling,
    )

    if tokenizer.chat_template and supports_tool_calling(tokenizer):
        try:
            add_response_schema(tokenizer)
            return "the model's own chat template (tool calls supported)"
        except ValueError:
            pass  # renders tools, but TRL cannot parse its calls: fall through
    if not chatml(tokenizer):
        raise UserError(
            f"{model}'s chat template cannot do tool calls, and TRL has no tool-call parser for it",
            "config key 'model'",
            "pick a model with a tool-aware template TRL knows (Qwen2.5/Qwen3, Llama 3.1/3.2, GLM-4, GPT-OSS...), "
            "or set tokenizer.chat_template and tokenizer.response_template yourself (docs/tools.md)")
    tokenizer.chat_template = CHATML_TOOLS
    # ChatML ends a turn with <|im_end|>: TRL's tool loop cuts the tool reply's tokens at the EOS token, so it must
    # be that one (the embedded SmolLM2's converted tokenizer names <|im_start|> as EOS).
    tokenizer.eos_token = CHATML[1]
    tokenizer.response_template = qwen3_template  # TRL's parser of Qwen's <tool_call> JSON convention
    what = ("a compact ChatML tool template with TRL's Qwen <tool_call> convention and parser: the model's own "
            "template drops tool calls")
    return what


def tool_schemas(tools: list[Any]) -> list[dict[str, Any]]:
    """JSON schemas of tool functions or bound methods, as the chat template receives them."""
    from transformers.utils import get_json_schema

    return [get_json_schema(t) for t in tools]


def is_tool_name(name: str) -> bool:
    """TRL's rule for an environment's methods: public ones are tools, but ``reset`` and ``get_reward``."""
    return not name.startswith("_") and name not in ("reset", "get_reward")


def environment_tools(env: Any) -> list[Any]:
    """The tools an environment object offers (``is_tool_name``)."""
    return [member for name, member in inspect.getmembers(env, predicate=inspect.ismethod) if is_tool_name(name)]
