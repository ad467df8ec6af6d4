"""Judge backends: an OpenAI-compatible HTTP endpoint, or a causal LM loaded in-process with transformers.

Both answer ``complete_many(conversations, timeout)`` with one reply text per conversation, or a ``CallFailed``
for a call that timed out or failed: the judged reward turns those into None and counts them, so a judge that
fails mid-run is never silent and never scores 0. The HTTP client is the standard library's (no new dependency);
the API key is read from the environment variable the config names, never written in the config.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from grpo_fast.embedded import resolve_model_path
from grpo_fast.errors import UserError

Messages = list[dict[str, str]]
Where = Callable[[str], str]
MAX_REPLY_BYTES = 1 << 20  # a judge's reply is a few lines: anything bigger is an error, not read into memory


class CallFailed:
    """One judge call that gave no reply: ``kind`` is ``timeout`` or ``error``; ``message`` says why."""

    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message[:300]

    def __repr__(self) -> str:
        return f"CallFailed({self.kind}: {self.message})"


class Backend(Protocol):
    label: str

    def complete_many(self, batch: Sequence[Messages], timeout: float, scale: tuple[int, int] | None = None,
                      max_tokens: int | None = None) -> list[str | CallFailed]:
        """One reply per conversation. ``scale``: the reply is an integer on it (a backend that can constrain
        decoding does; others ignore it). ``max_tokens``: this batch's reply length, else the backend's."""
        ...


# ------------------------------------------------------------------------------------------------- HTTP


class HttpJudge:
    """An OpenAI-compatible ``/chat/completions`` endpoint (vLLM, llama.cpp, an API): ``concurrency`` calls at a
    time, each given ``timeout`` seconds per socket operation, temperature 0.

    A vLLM server (its ``/models`` says ``owned_by: vllm``) is used as the in-process judge is: the reward starts
    the reply (``starts_reply``; vLLM's ``continue_final_message``) and a pointwise verdict is held to the scale's
    integers (vLLM's ``structured_outputs`` regex). Any other server gets the portable request."""

    def __init__(self, base_url: str, model: str, api_key_env: str | None = None, concurrency: int = 4,
                 max_tokens: int = 64, where: Where = lambda key: key, check: bool = True):
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"judge endpoint {base_url!r} is not an http(s) URL", where("endpoint"),
                            "give the server's base URL, e.g. http://127.0.0.1:8000/v1")
        self.model, self.max_tokens = model, max_tokens
        self.concurrency = max(1, int(concurrency))
        self.label = f"{self.base_url} ({model})"
        self.api_key_env = api_key_env
        self.starts_reply = False  # True once the endpoint is known to be vLLM (ping)
        if api_key_env and not os.environ.get(api_key_env):
            raise UserError(f"environment variable {api_key_env} (the judge's API key) is not set",
                            where("api_key_env"), f"export {api_key_env}=<key> before the run")
        if check:
            self.ping(where)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def ping(self, where: Where, timeout: float = 5.0) -> None:
        """Refuse an endpoint that does not answer at all (any HTTP status counts as an answer); note whether it
        is vLLM's server."""
        request = urllib.request.Request(f"{self.base_url}/models", headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                raw = reply.read(MAX_REPLY_BYTES)
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, OSError) as err:
            raise UserError(f"judge endpoint {self.base_url} does not answer ({_reason(err)})", where("endpoint"),
                            "start the server first (e.g. python -m vllm.entrypoints.openai.api_server --model "
                            "<judge>, llama.cpp's llama-server), or fix the URL") from None
        self.starts_reply = served_by_vllm(raw)

    def request_body(self, messages: Messages, max_tokens: int | None = None,
                     scale: tuple[int, int] | None = None) -> dict[str, Any]:
        """The chat completion request; for vLLM a started reply is continued and a verdict held to ``scale``."""
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0,
                                "max_tokens": max_tokens or self.max_tokens}
        if self.starts_reply and _started(messages):
            body.update(continue_final_message=True, add_generation_prompt=False)
            if scale:
                body["structured_outputs"] = {"regex": on_scale(scale)}
        return body

    def complete(self, messages: Messages, timeout: float, max_tokens: int | None = None,
                 scale: tuple[int, int] | None = None) -> str | CallFailed:
        body = json.dumps(self.request_body(messages, max_tokens, scale)).encode()
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, headers=self._headers())
        try:
            with urllib.request.urlopen(request, timeout=timeout) as reply:
                raw = reply.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as err:
            return CallFailed("error", f"HTTP {err.code} {err.reason}")
        except TimeoutError as err:
            return CallFailed("timeout", f"no reply within {timeout:g} s ({err})")
        except (urllib.error.URLError, OSError) as err:
            kind = "timeout" if isinstance(getattr(err, "reason", None), TimeoutError) else "error"
            return CallFailed(kind, _reason(err))
        if len(raw) > MAX_REPLY_BYTES:
            return CallFailed("error", "reply larger than 1 MiB")
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as err:
            return CallFailed("error", f"not an OpenAI chat completion: {type(err).__name__} {str(raw[:120])}")
        if not isinstance(content, str):
            return CallFailed("error", "reply content is not text")
        return _started(messages) + content if self.starts_reply else content  # vLLM sends the continuation only

    def complete_many(self, batch: Sequence[Messages], timeout: float, scale: tuple[int, int] | None = None,
                      max_tokens: int | None = None) -> list[str | CallFailed]:
        if len(batch) <= 1 or self.concurrency == 1:
            return [self.complete(m, timeout, max_tokens, scale) for m in batch]
        with ThreadPoolExecutor(min(self.concurrency, len(batch)), thread_name_prefix="judge") as pool:
            return list(pool.map(lambda m: self.complete(m, timeout, max_tokens, scale), batch))


def served_by_vllm(models_reply: bytes) -> bool:
    """Whether a ``/models`` reply is vLLM's (each model ``owned_by: vllm``)."""
    try:
        data = json.loads(models_reply).get("data") or []
    except (ValueError, AttributeError):
        return False
    return bool(data) and all(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in data)


def on_scale(scale: tuple[int, int]) -> str:
    """A regex for one integer on the scale after an optional space: what a started ``Score:`` may continue with."""
    return " ?(?:" + "|".join(str(n) for n in range(scale[1], scale[0] - 1, -1)) + ")"


def _reason(err: BaseException) -> str:
    return str(getattr(err, "reason", None) or err)[:200]


# ------------------------------------------------------------------------------------------- in-process


class LocalJudge:
    """A causal LM loaded in-process (``embedded``, a folder, or a hub id), greedy, batched; loaded on first use
    so that resolving a config (dry run, health monitor) never loads weights. A batch that runs past
    ``timeout`` is stopped by transformers' ``max_time`` and its replies count as timeouts. ``starts_reply``: the
    reward may start the reply ("Score:") and the model continues it, so a small model gets the form right."""

    starts_reply = True

    def __init__(self, model: str, max_new_tokens: int = 32, batch_size: int = 8, max_prompt_tokens: int = 1024,
                 where: Where = lambda key: key):
        self.path = check_model(model, where("judge_model"))
        self.label = f"in-process {Path(self.path).name}"
        self.max_new_tokens, self.batch_size, self.max_prompt_tokens = max_new_tokens, batch_size, max_prompt_tokens
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:  # picklable settings; the weights load again where it lands
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_loaded")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock(), _loaded=None)

    def load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(self.path)
            tokenizer.padding_side = "left"
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            cuda = torch.cuda.is_available()  # beside the policy on its GPU (bf16), else fp32 on the CPU
            model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch.bfloat16 if cuda else torch.float32)
            self._loaded = (model.to("cuda" if cuda else "cpu").eval(), tokenizer)
        return self._loaded

    def complete_many(self, batch: Sequence[Messages], timeout: float, scale: tuple[int, int] | None = None,
                      max_tokens: int | None = None) -> list[str | CallFailed]:
        out: list[str | CallFailed] = []
        with self._lock:
            for start in range(0, len(batch), self.batch_size):
                out.extend(self._generate(batch[start:start + self.batch_size], timeout, scale, max_tokens))
        return out

    def _on_scale(self, tokenizer: Any, start: int, scale: tuple[int, int]) -> Callable[[int, Any], list[int]]:
        """Allowed next tokens: a digit that keeps the number on the scale, or the end once it is on it."""
        if not hasattr(self, "_digits"):
            self._digits = {i: tokenizer.decode([i]).strip() for i in range(len(tokenizer))
                            if tokenizer.decode([i]).strip() in tuple("0123456789")}
        low, high, stop = scale[0], scale[1], [tokenizer.eos_token_id]

        def allowed(_: int, ids: Any) -> list[int]:
            so_far = "".join(self._digits.get(int(i), "") for i in ids[start:])
            nxt = [i for i, d in self._digits.items() if so_far != "0" and int(so_far + d) <= high
                   and (int(so_far + d) >= low or (so_far + d != "0" and int(so_far + d) * 10 <= high))]
            return [*nxt, *stop] if so_far and low <= int(so_far) else nxt or stop

        return allowed

    def _generate(self, chunk: Sequence[Messages], timeout: float, scale: tuple[int, int] | None = None,
                  max_tokens: int | None = None) -> list[str | CallFailed]:
        import torch

        try:
            model, tokenizer = self.load()
            texts = [_render(tokenizer, m) for m in chunk]
            enc = tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                            max_length=self.max_prompt_tokens, add_special_tokens=False).to(model.device)
            start = enc["input_ids"].shape[1]
            # a scale: only digits that keep the number on it, then the end; a small judge cannot wander off
            allowed = self._on_scale(tokenizer, start, scale) if scale else None
            new_tokens = len(str(scale[1])) + 1 if scale else max_tokens or self.max_new_tokens
            began = time.perf_counter()
            with torch.inference_mode():
                ids = model.generate(**enc, max_new_tokens=new_tokens,
                                     do_sample=False, max_time=timeout, pad_token_id=tokenizer.pad_token_id,
                                     prefix_allowed_tokens_fn=allowed)
        except Exception as err:  # noqa: BLE001 - a judge that breaks is counted per sample, not a crash
            return [CallFailed("error", f"{type(err).__name__}: {err}")] * len(chunk)
        if time.perf_counter() - began >= timeout:
            return [CallFailed("timeout", f"generation ran past {timeout:g} s")] * len(chunk)
        new = ids[:, start:]
        return [_started(m) + " " + tokenizer.decode(row, skip_special_tokens=True) for m, row in zip(chunk, new)]


def _started(messages: Messages) -> str:
    """The reply's given start (a final assistant message, e.g. "Score:"): part of the judge's reply."""
    return messages[-1]["content"] if messages and messages[-1].get("role") == "assistant" else ""


def _render(tokenizer: Any, messages: Messages) -> str:
    """The chat as the model's template writes it; a final assistant message is continued, not closed."""
    if _started(messages):
        return tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True)
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def check_model(model: str, where: str) -> str:
    """The model's local folder (``embedded`` resolved), or a hub id whose config can be read; else one message
    naming the key."""
    try:
        path = resolve_model_path(model)
    except UserError as err:
        raise UserError(err.what, where, err.fix) from None
    if Path(path).exists():
        return path
    try:
        from transformers import AutoConfig

        AutoConfig.from_pretrained(path)
    except Exception as err:  # noqa: BLE001 - any failure to find it is the user's to fix
        raise UserError(f"unknown model {model!r}: {str(err).splitlines()[0][:160]}", where,
                        "give a folder saved with save_pretrained, `embedded`, or a hub id this machine can "
                        "download") from None
    return path
