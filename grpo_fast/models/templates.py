"""The ``chat_template:`` key: a Jinja chat template of the user's (the text, or a file) put on the tokenizer, and
checked by rendering a conversation before any weights load, because a template that fails mid-run wastes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_fast.errors import UserError

_PROBE = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "What is 2 + 2?"}]
FIX = ("fix the Jinja: loop over messages ({% for m in messages %}{{ m['content'] }}{% endfor %}) and end with "
       "{% if add_generation_prompt %}...{% endif %}; or give a .jinja file")


def is_template_text(value: str) -> bool:
    """Jinja text, not a file name: it holds a tag or an expression."""
    return "{%" in value or "{{" in value


def template_text(value: str, where: str = "config key 'chat_template'") -> str:
    """The template itself: ``value`` when it is Jinja, else the file it names (read as UTF-8)."""
    if is_template_text(value):
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise UserError(f"chat_template {value!r} is neither a Jinja template nor a file that exists", where,
                        "give the template text ({% for m in messages %}...) or the path of a .jinja file "
                        "(relative to the config file)")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read chat_template file {path}: {err}", where, "save it as UTF-8 text") from None


def use_chat_template(tokenizer: Any, value: str | None, where: str = "config key 'chat_template'") -> Any:
    """Put the config's template on ``tokenizer`` (unchanged when ``value`` is None); one UserError, naming the
    key, when it cannot render a system and a user turn with the generation prompt."""
    if value is None:
        return tokenizer
    text = template_text(value, where)
    tokenizer.chat_template = text
    try:
        rendered = tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, tokenize=False)
    except Exception as err:  # noqa: BLE001 - any Jinja failure is the user's template, reported in its own words
        raise UserError(f"chat_template does not render a conversation: {type(err).__name__}: "
                        f"{str(err).splitlines()[0][:200] if str(err) else ''}", where, FIX) from None
    if not isinstance(rendered, str) or "What is 2 + 2?" not in rendered:
        raise UserError("chat_template renders a conversation without its messages' content", where, FIX)
    return tokenizer
