"""Thinking models: what the chat template does about thinking, and the one mode a run uses everywhere.

Templates differ: Qwen3 and SmolLM3 take ``enable_thinking`` (the model writes ``<think>`` itself, or, off, the
template writes an empty think block); DeepSeek-R1 distills open ``<think>`` in every prompt. The mode is found by
rendering a probe conversation, never by the model's name, and is then used by training (TRL's
``chat_template_kwargs``), the held-out evaluation, ``chat`` and ``generate`` alike (``config.yaml`` records it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.rewards import RewardSet
from grpo_fast.rewards.base import THINK_TAGS
from grpo_fast.rewards.thinking import thinking_view

logger = logging.getLogger(__name__)

# A thinking model reasons before it answers: the completion length a run gets when the user has not chosen one.
THINKING_ROOM = 1024
_PROBE = [{"role": "user", "content": "What is 2 + 2?"}]


@dataclass(frozen=True)
class ThinkingMode:
    """The run's thinking mode: on or off (``active``), whether the template opens the tag in the prompt
    (``opened``), the chat template arguments that select it, the tags, and why it was chosen."""

    active: bool
    opened: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, str] = THINK_TAGS
    why: str = ""

    def rewards(self, rewards: RewardSet, max_length: int | None = None) -> RewardSet:
        """The run's rewards as this mode's completions need them judged (``rewards.thinking``)."""
        return thinking_view(rewards, self.tags, self.opened, max_length) if self.active else rewards

    def gold(self, gold: Callable[[dict], str | None]) -> Callable[[dict], str | None]:
        """A recipe's gold completion as a thinking model writes it: a short closed thinking block, then the
        answer (the gold self-test scores it after the thinking; the SFT warm-up teaches closing it)."""
        if not self.active:
            return gold
        start, close = self.tags
        head = "" if self.opened else start

        def thought_gold(row: dict) -> str | None:
            answer = gold(row)
            return None if answer is None else f"{head}\nLet me work it out, then answer.\n{close}\n\n{answer}"

        return thought_gold

    def describe(self) -> str:
        state = "on" if self.active else "off"
        opened = f", the template opens {self.tags[0]} in the prompt" if self.opened else ""
        return f"thinking: {state} ({self.why}{opened})"


def render(tokenizer: Any, messages: Any, generation: bool = True, **kwargs: Any) -> str:
    return tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False, **kwargs)


def prompt_tail(tokenizer: Any, **kwargs: Any) -> str:
    """What the template adds for the assistant's turn (the generation prompt) under ``kwargs``."""
    full, bare = render(tokenizer, _PROBE, True, **kwargs), render(tokenizer, _PROBE, False, **kwargs)
    return full[len(bare):] if full.startswith(bare) else full[-200:]


def opens(tail: str, tags: tuple[str, str]) -> bool:
    """The generation prompt leaves a think block open: the completion starts inside the thinking."""
    at = tail.rfind(tags[0])
    return at >= 0 and tags[1] not in tail[at:]


def _tail_or_error(tokenizer: Any, **kwargs: Any) -> tuple[str | None, str | None]:
    """The generation prompt under ``kwargs``, or None and why the template could not render the probe."""
    try:
        return prompt_tail(tokenizer, **kwargs), None
    except Exception as err:  # noqa: BLE001 - any template's failure is reported with its own words
        return None, f"{type(err).__name__}: {err}"


def probe_failure(tokenizer: Any, model: str) -> tuple[str | None, bool, bool]:
    """Render the probe plain and with ``enable_thinking`` on and off: (what failed, in words, or None; whether
    the template's thinking switch changes the prompt; the plain generation prompt's tail or "")."""
    plain, plain_error = _tail_or_error(tokenizer)
    on, on_error = _tail_or_error(tokenizer, enable_thinking=True)
    off, off_error = _tail_or_error(tokenizer, enable_thinking=False)
    switch = on is not None and off is not None and on != off
    if not getattr(tokenizer, "chat_template", None) and plain is None:
        return None, False, ""  # no chat template at all: plain-text prompts, nothing failed
    if plain_error:
        failed = f"the chat template of {model} fails to render a one-message conversation ({plain_error})"
    elif on_error or off_error:
        flag = "True" if on_error else "False"
        failed = (f"the chat template of {model} fails to render with enable_thinking={flag} "
                  f"({on_error or off_error})")
    else:
        failed = None
    return failed, switch, plain or ""


def thinking_mode(setting: str, tokenizer: Any, tags: tuple[str, str] = THINK_TAGS, model: str = "the model",
                  where: str = "key 'thinking'") -> ThinkingMode:
    """The mode for ``setting`` (auto | on | off) on this tokenizer's chat template. A template that fails to
    render the probe is named with its error: refused under ``on``, thinking off (said why) otherwise."""
    tags = (str(tags[0]), str(tags[1]))
    failed, supported, plain = probe_failure(tokenizer, model)
    always = opens(plain, tags)
    if supported and setting in ("auto", "on"):
        kwargs = {"enable_thinking": True}
        why = f"{setting}: the chat template of {model} has a thinking mode (enable_thinking)"
    elif supported:
        return ThinkingMode(False, False, {"enable_thinking": False}, tags, "off: enable_thinking=False")
    elif always and setting == "off":
        raise UserError(f"thinking: off, but the chat template of {model} opens {tags[0]} in every prompt", where,
                        "set thinking: auto (or on), or use a chat template without thinking")
    elif always:
        kwargs, why = {}, f"{setting}: the chat template of {model} opens {tags[0]} in every prompt"
        why += f"; {failed.removeprefix(f'the chat template of {model} ')}, so it is not passed" if failed else ""
    elif setting == "on" and failed:
        raise UserError(f"thinking: on, but {failed}", where,
                        "fix the chat template (tokenizer_config.json's chat_template), or set thinking: off")
    elif setting == "on":
        raise UserError(f"thinking: on, but the chat template of {model} has no thinking mode (no enable_thinking, "
                        f"no {tags[0]} in its prompts)", where,
                        "use a thinking model (Qwen3, SmolLM3, a DeepSeek-R1 distill), or set thinking: auto or off")
    elif failed:
        logger.warning("thinking: %s, so thinking is off", failed)
        return ThinkingMode(False, why=f"{setting}: {failed}, so thinking is off", tags=tags)
    else:
        return ThinkingMode(False, why=f"{setting}: the chat template of {model} has no thinking mode", tags=tags)
    return ThinkingMode(True, opens(prompt_tail(tokenizer, **kwargs), tags), kwargs, tags, why)


def for_run(cfg: RunConfig, tokenizer: Any) -> ThinkingMode:
    """The config's mode on its tokenizer, put into its GRPO arguments (``chat_template_kwargs``, and room to
    think in ``max_completion_length`` unless the user chose one); each change said once in the run's report."""
    user = cfg.grpo.get("chat_template_kwargs")
    user = dict(user) if isinstance(user, dict) else {}
    setting = cfg.thinking
    if "enable_thinking" in user and cfg.set_by_user("chat_template_kwargs"):
        asked = "on" if user["enable_thinking"] else "off"
        if setting != "auto" and setting != asked:
            raise UserError(f"thinking: {setting} but chat_template_kwargs sets enable_thinking: "
                            f"{user['enable_thinking']}", cfg.where("thinking"),
                            "set one of them (thinking: on | off is enough)")
        setting = asked
    tags = tuple(cfg.thinking_tags)
    if tags[0] == tags[1] or tags[0].startswith("</") and not tags[1].startswith("</"):  # one tag twice; swapped
        raise UserError(f"thinking_tags {list(tags)}: the opening tag must differ from the closing one and come "
                        "first", cfg.where("thinking_tags"), "set thinking_tags: [<think>, </think>] (opening first)")
    mode = thinking_mode(setting, tokenizer, tags, cfg.model, cfg.where("thinking"))
    wanted = {**user, **mode.kwargs}
    if wanted != user:
        cfg.change("chat_template_kwargs", wanted, mode.describe())
    length = int(cfg.args.max_completion_length or 0)
    if mode.active and length < THINKING_ROOM and not cfg.set_by_user("max_completion_length"):
        cfg.change("max_completion_length", THINKING_ROOM, f"a thinking model reasons before it answers: room "
                   f"for both (was {length}; set max_completion_length to choose)")
    need = cfg.max_prompt_tokens + int(cfg.args.max_completion_length or 0)
    if mode.active and cfg.max_seq_length < need and not cfg.set_by_user("max_seq_length"):
        cfg.max_seq_length = need
        cfg.notes.append(f"max_seq_length={need}: the longest prompt (max_prompt_tokens) and room to think")
    return mode
