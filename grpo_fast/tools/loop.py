"""The tool loop outside training: generate, run the calls the model made, show it their output, generate again.

Evaluation, ``chat`` and ``generate`` need the same loop TRL's trainer runs while training, so that a model is
judged the way it was trained: one environment per conversation (``reset(**row)`` first), calls parsed by the
tokenizer's response template (``chat.use_tool_template``), a tool's exception returned as ``{"error": ...}``,
at most ``max_iterations`` rounds of calls, and a budget of generated tokens for the whole conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_fast.tools.chat import environment_tools, tool_schemas

Generate = Callable[[list[str], int], list[tuple[str, int]]]
"""(rendered prompts, max new tokens) -> (text, generated tokens) per prompt."""


@dataclass
class Episode:
    """One conversation's completion: the assistant and tool messages after the prompt, and what it cost."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    clipped: bool = False


def parse_reply(tokenizer: Any, text: str) -> dict[str, Any]:
    """The assistant message in ``text``: content and well-formed tool calls; a malformed call stays plain text
    (as in TRL's loop: the model sees no tool output and the conversation ends)."""
    try:
        parsed = tokenizer.parse_response(text, prefix="")
    except Exception:  # malformed JSON in a <tool_call>: not a call
        parsed = None
    if not isinstance(parsed, dict):
        return {"role": "assistant", "content": text}
    calls = [c for c in parsed.get("tool_calls") or [] if isinstance(c, dict)
             and isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str)
             and isinstance(c["function"].get("arguments"), dict)]
    message: dict[str, Any] = {"role": "assistant", "content": parsed.get("content") or ""}
    if calls:
        message["tool_calls"] = [{"type": "function", "function": c["function"]} for c in calls]
    return message


def call_tool(tools: dict[str, Callable[..., Any]], call: dict[str, Any]) -> tuple[str, bool]:
    """(the tool message's content, whether it failed): TRL's convention, ``str(result)`` or ``{"error": ...}``."""
    function = call["function"]
    name = function["name"]
    try:
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        return str(tools[name](**function["arguments"])), False
    except Exception as err:
        return str({"error": str(err)}), True


def converse(generate: Generate, tokenizer: Any, rows: Sequence[dict[str, Any]], make_env: Callable[[], Any], *,
             max_new_tokens: int, max_iterations: int = 4, envs: Sequence[Any] | None = None,
             chat_template_kwargs: dict[str, Any] | None = None) -> list[Episode]:
    """Run every row's prompt through the tool loop, batched across rows; one fresh environment per row, reset
    with the row's columns, unless ``envs`` gives one per row to use as they are (a chat's, kept across turns).

    The budget is TRL's: ``max_new_tokens`` counts every token after the prompt, the tools' replies included; a
    reply that would not fit is dropped and the conversation ends on its call, as in training.
    ``chat_template_kwargs``: the run's (its thinking mode), as TRL renders the prompts in training."""
    extra = dict(chat_template_kwargs or {})
    if envs is None:
        envs = [make_env() for _ in rows]
        for env, row in zip(envs, rows):
            env.reset(**{k: v for k, v in row.items() if k != "prompt"})
    tools = [{t.__name__: t for t in environment_tools(env)} for env in envs]
    schemas = tool_schemas(list(tools[0].values())) if tools else []

    def tokens(messages: list[dict[str, Any]]) -> int:
        return len(tokenizer.apply_chat_template(messages, tools=schemas, add_generation_prompt=True, tokenize=True,
                                                 return_dict=True, **extra)["input_ids"])

    prompt_tokens: dict[int, int] = {}  # per row, counted once: only rows whose tools ran need it

    episodes = [Episode() for _ in rows]
    used = [0] * len(rows)  # tokens after the prompt so far: generated and tool replies
    active = list(range(len(rows)))
    for round_ in range(max_iterations + 1):
        texts = [tokenizer.apply_chat_template([*rows[i]["prompt"], *episodes[i].messages], tools=schemas,
                                               add_generation_prompt=True, tokenize=False, **extra) for i in active]
        budget = max(max_new_tokens - used[i] for i in active)
        replies = generate(texts, max(1, budget))
        calling = []
        for i, (text, length) in zip(active, replies):
            episode = episodes[i]
            room = max_new_tokens - used[i]
            if length > room:  # a batch shares the largest budget: cut this reply to its own, as TRL does
                text, length = cut(tokenizer, text, room), room
            episode.tokens += length
            used[i] += length
            message = parse_reply(tokenizer, text)
            episode.messages.append(message)
            if used[i] >= max_new_tokens:
                episode.clipped = "tool_calls" not in message
                continue
            if "tool_calls" not in message or round_ == max_iterations:  # TRL's limit: the last call is not run
                continue
            replies_of_tools = []
            for call in message["tool_calls"]:
                content, failed = call_tool(tools[i], call)
                episode.tool_calls += 1
                episode.tool_errors += failed
                replies_of_tools.append({"role": "tool", "name": call["function"]["name"], "content": content})
            if i not in prompt_tokens:
                prompt_tokens[i] = tokens(rows[i]["prompt"])
            after = tokens([*rows[i]["prompt"], *episode.messages, *replies_of_tools]) - prompt_tokens[i]
            if after > max_new_tokens:  # the replies do not fit: dropped, the conversation ends (TRL's rule)
                continue
            episode.messages += replies_of_tools
            used[i] = after
            calling.append(i)
        active = calling
        if not active:
            break
    return episodes


def cut(tokenizer: Any, text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` tokens."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return text if len(ids) <= limit else tokenizer.decode(ids[:limit])
