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
             max_new_tokens: int, max_iterations: int = 4) -> list[Episode]:
    """Run every row's prompt through the tool loop, batched across rows; one fresh environment per row."""
    envs = [make_env() for _ in rows]
    for env, row in zip(envs, rows):
        env.reset(**{k: v for k, v in row.items() if k != "prompt"})
    tools = [{t.__name__: t for t in environment_tools(env)} for env in envs]
    schemas = tool_schemas(list(tools[0].values())) if tools else []
    episodes = [Episode() for _ in rows]
    active = list(range(len(rows)))
    for round_ in range(max_iterations + 1):
        texts = [tokenizer.apply_chat_template([*rows[i]["prompt"], *episodes[i].messages], tools=schemas,
                                               add_generation_prompt=True, tokenize=False) for i in active]
        budget = min(max_new_tokens - episodes[i].tokens for i in active)
        replies = generate(texts, max(1, budget))
        calling = []
        for i, (text, length) in zip(active, replies):
            episode = episodes[i]
            episode.tokens += length
            message = parse_reply(tokenizer, text)
            episode.messages.append(message)
            if episode.tokens >= max_new_tokens:
                episode.clipped = "tool_calls" not in message and length >= budget
                continue
            if "tool_calls" not in message or round_ == max_iterations:  # TRL's limit: the last call is not run
                continue
            for call in message["tool_calls"]:
                content, failed = call_tool(tools[i], call)
                episode.tool_calls += 1
                episode.tool_errors += failed
                episode.messages.append({"role": "tool", "name": call["function"]["name"], "content": content})
            calling.append(i)
        active = calling
        if not active:
            break
    return episodes


def conversation_text(messages: Sequence[dict[str, Any]]) -> str:
    """A completion's messages as readable lines for samples and the report."""
    lines = []
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call["function"]
            args = ", ".join(f"{k}={v!r}" for k, v in fn["arguments"].items())
            lines.append(f"[call {fn['name']}({args})]")
        if m.get("role") == "tool":
            lines.append(f"[{m.get('name', 'tool')} -> {str(m.get('content', '')).strip()[:300]}]")
        elif m.get("content"):
            lines.append(str(m["content"]))
    return "\n".join(lines)
