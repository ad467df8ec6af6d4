"""Talk to a trained run: ``grpo-fast chat RUN_DIR`` (interactive, streamed) and ``grpo-fast generate``.

The recipe's system prompt is applied, as in training, so the model sees the format it was rewarded for; a run
that trained with tools talks with them (the same tool loop as training and evaluation, calls run in the sandbox).
On a CUDA machine with vLLM the adapter is served by vLLM (through Unsloth's ``fast_generate`` when Unsloth
is there too); otherwise transformers + peft generate, which works everywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from grpo_fast import rundir
from grpo_fast.errors import UserError
from grpo_fast.files import atomic_write
from grpo_fast.models import cuda_available
from grpo_fast.models.completions import generate
from grpo_fast.models.gpu import vllm_engine_kwargs
from grpo_fast.models.serving import Engine, adapter_rank, lora_request, select_engine
from grpo_fast.models.vllm_colocate import vllm_cpu_environment
from grpo_fast.recipes import get_recipe
from grpo_fast.rewards.base import transcript
from grpo_fast.run.resolve import resolve_config
from grpo_fast.rundir import Run
from grpo_fast.tools import run_tools
from grpo_fast.tools.chat import use_tool_template
from grpo_fast.tools.loop import Episode, converse

EXIT_WORDS = ("/exit", "/quit")


def unsloth_infer_kwargs(info: Run) -> dict[str, Any]:
    """``FastLanguageModel.from_pretrained`` arguments for serving the base model with vLLM."""
    cfg = info.config
    share = cfg.get("vllm_gpu_memory_utilization", cfg.get("gpu_memory_utilization"))
    return {"model_name": info.base_model_path(), "max_seq_length": int(cfg.get("max_seq_length") or 1024),
            "load_in_4bit": bool(cfg.get("load_in_4bit")), "fast_inference": True,
            "max_lora_rank": adapter_rank(info.adapter), "gpu_memory_utilization": float(share or 0.3)}


def system_prompt(info: Run) -> str | None:
    """The system prompt the run trained with: its config's ``system_prompt``, else its recipe's (None for an
    unknown recipe)."""
    if isinstance(info.config.get("system_prompt"), str):
        return info.config["system_prompt"]
    try:
        return get_recipe(info.recipe).system_prompt
    except UserError:
        return None


def run_environment(info: Run) -> tuple[Any, int]:
    """The environment class a run trained with (None without tools) and its limit of tool-call rounds."""
    try:
        recipe = get_recipe(info.recipe)
    except UserError:
        return None, 0
    ref = info.config.get("environment") or recipe.environment
    if not ref or ref == "none":
        return None, 0

    return run_tools(resolve_config(str(info.path / rundir.CONFIG)), recipe)


def as_messages(prompt: Any, system: str | None) -> list[dict[str, str]]:
    """A prompt (text or chat list) as chat messages, with the system prompt unless one is there."""
    messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
    if system and not any(m.get("role") == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system})
    return messages


class Generator:
    """Base model + the run's LoRA adapter behind one ``generate(list of chats) -> list of str``; with the run's
    tools, ``converse`` runs the tool loop instead."""

    def __init__(self, info: Run, engine: Engine, *, max_new_tokens: int = 256, temperature: float = 0.0,
                 top_p: float = 1.0):
        if engine.name == "unsloth":
            import unsloth  # noqa: F401  (before the recipe or the tokenizer imports transformers: Unsloth patches it)
        self.info, self.engine = info, engine
        self.max_new_tokens, self.temperature, self.top_p = max_new_tokens, temperature, top_p
        self.system = system_prompt(info)
        self.environment, self.max_tool_calls = run_environment(info)
        if engine.name == "transformers":
            self._load_transformers()
        elif engine.name == "unsloth":
            self._load_unsloth()
        else:
            self._load_vllm()
        if self.environment is not None:
            use_tool_template(self.tokenizer, str(info.config.get("model") or "the model"))

    # -- loading
    def _load_transformers(self) -> None:
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoTokenizer

        kwargs: dict[str, Any] = {}
        if cuda_available():
            kwargs.update(dtype=torch.bfloat16 if torch.cuda.get_device_capability(0)[0] >= 8 else torch.float16,
                          device_map="cuda")
        base = AutoModelForCausalLM.from_pretrained(self.info.base_model_path(), **kwargs)
        self.model = PeftModel.from_pretrained(base, str(self.info.adapter)).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.info.adapter))
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    def _load_unsloth(self) -> None:
        from unsloth import FastLanguageModel

        self.model, self.tokenizer = FastLanguageModel.from_pretrained(**unsloth_infer_kwargs(self.info))
        self.lora_request = lora_request(self.info.adapter)

    def _load_vllm(self) -> None:
        from transformers import AutoTokenizer

        cpu = not cuda_available()
        if cpu:
            vllm_cpu_environment()
        from vllm import LLM

        cfg = {**self.info.config, "lora_r": adapter_rank(self.info.adapter)}
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.info.adapter))
        self.llm = LLM(model=self.info.base_model_path(), **vllm_engine_kwargs(cfg, cpu=cpu))
        self.lora_request = lora_request(self.info.adapter)

    # -- generating
    def chat_kwargs(self) -> dict[str, Any]:
        """The run's chat template arguments (its thinking mode, recorded in config.yaml), as training used them."""
        kwargs = self.info.config.get("chat_template_kwargs")
        return dict(kwargs) if isinstance(kwargs, dict) else {}

    def render(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                                  **self.chat_kwargs())

    def _sampling_kwargs(self) -> dict[str, Any]:
        if self.temperature <= 0:
            return {"do_sample": False}
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": 0}  # as generate

    def generate(self, chats: list[list[dict[str, str]]], batch_size: int = 8) -> list[str]:
        return [text for text, _ in self.complete([self.render(c) for c in chats], batch_size=batch_size)]

    def complete(self, texts: list[str], max_new_tokens: int | None = None,
                 batch_size: int = 8) -> list[tuple[str, int]]:
        """Rendered prompts -> (reply, generated tokens), each reply cut at the end of its turn."""
        budget = max_new_tokens or self.max_new_tokens
        if self.engine.name == "transformers":
            return [group[0] for group in generate(self.model, self.tokenizer, texts, greedy=self.temperature <= 0,
                                                   temperature=self.temperature, top_p=self.top_p,
                                                   max_new_tokens=budget, batch_size=batch_size)]
        from vllm import SamplingParams

        params = SamplingParams(temperature=max(self.temperature, 0.0), top_p=self.top_p, max_tokens=budget)
        if self.engine.name == "unsloth":
            outputs = self.model.fast_generate(texts, sampling_params=params, lora_request=self.lora_request)
        else:
            outputs = self.llm.generate(texts, params, lora_request=self.lora_request)
        return [(o.outputs[0].text, len(o.outputs[0].token_ids)) for o in outputs]

    def converse(self, chats: list[list[dict[str, Any]]], envs: list[Any] | None = None) -> list[Episode]:
        """The tool loop over ``chats`` (system prompt already in them): one environment per chat, fresh unless
        ``envs`` gives them (a chat keeps its own across turns, as one episode keeps its interpreter)."""
        return converse(lambda texts, budget: self.complete(texts, budget), self.tokenizer,
                        [{"prompt": c} for c in chats], self.environment, max_new_tokens=self.max_new_tokens,
                        max_iterations=self.max_tool_calls, envs=envs, chat_template_kwargs=self.chat_kwargs())

    def stream(self, messages: list[dict[str, str]], out: TextIO) -> str:
        """Generate one reply, printing tokens as they come (transformers); vLLM prints the whole reply."""
        if self.engine.name != "transformers":
            text = self.generate([messages])[0]
            out.write(text + "\n")
            out.flush()
            return text

        from transformers import TextIteratorStreamer

        enc = self.tokenizer([self.render(messages)], return_tensors="pt", add_special_tokens=False)
        enc = enc.to(self.model.device)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs = dict(**enc, streamer=streamer, max_new_tokens=self.max_new_tokens,
                      pad_token_id=self.tokenizer.pad_token_id, **self._sampling_kwargs())
        worker = threading.Thread(target=self.model.generate, kwargs=kwargs, daemon=True)
        worker.start()
        pieces = []
        for piece in streamer:
            pieces.append(piece)
            out.write(piece)
            out.flush()
        worker.join()
        out.write("\n")
        out.flush()
        return "".join(pieces)


# --------------------------------------------------------------------------- prompts files


def read_prompts(path: str | Path) -> list[Any]:
    """Prompts from .txt (one a line), .jsonl/.json (strings, or objects with prompt / messages / question)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"prompts file {p} does not exist", "--prompts", "pass a .txt, .jsonl or .json file")
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".txt":
        items: list[Any] = [line for line in text.splitlines() if line.strip()]
    else:
        try:
            items = json.loads(text) if p.suffix == ".json" else [json.loads(ln) for ln in text.splitlines()
                                                                   if ln.strip()]
        except json.JSONDecodeError as err:
            raise UserError(f"{p} is not valid JSON{'L' if p.suffix != '.json' else ''}: {err}", str(p),
                            "one JSON object per line, e.g. {\"prompt\": \"What is 2 + 3?\"}") from None
        if not isinstance(items, list):
            raise UserError(f"{p} must hold a list of prompts", str(p), "write a JSON list or a JSONL file")
    prompts = []
    for i, item in enumerate(items, 1):
        if isinstance(item, dict):
            item = item.get("prompt") or item.get("messages") or item.get("question")
        if not item or not isinstance(item, (str, list)):
            raise UserError(f"prompt {i} in {p} is empty or has no prompt/messages/question field", str(p),
                            "give each line a string or {\"prompt\": ...}")
        prompts.append(item)
    if not prompts:
        raise UserError(f"{p} holds no prompts", str(p), "write one prompt per line")
    return prompts


def generate_file(run_dir: str | Path, prompts_file: str | Path, out: str | Path | None = None, *,
                  engine: str = "auto", max_new_tokens: int = 256, temperature: float = 0.0,
                  batch_size: int = 8) -> list[dict[str, Any]]:
    """Batch generation: one JSONL record per prompt (prompt, completion), written atomically to ``out``."""
    info = Run.open(run_dir, lora=True)
    prompts = read_prompts(prompts_file)
    gen = Generator(info, select_engine(engine), max_new_tokens=max_new_tokens, temperature=temperature)
    chats = [as_messages(p, gen.system) for p in prompts]
    if gen.environment is not None:  # the completion as a transcript; its messages, tool calls included, beside it
        records = [{"prompt": p, "completion": transcript(e.messages), "messages": e.messages,
                    "tool_calls": e.tool_calls, "tool_errors": e.tool_errors}
                   for p, e in zip(prompts, gen.converse(chats))]
    else:
        records = [{"prompt": p, "completion": c} for p, c in zip(prompts, gen.generate(chats, batch_size=batch_size))]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    if out:
        atomic_write(Path(out).expanduser(), text)
    else:
        sys.stdout.write(text)
    return records


def chat_loop(gen: Generator, lines: Iterable[str], out: TextIO) -> int:
    """Read user lines until EOF or /exit; keep the conversation; /reset clears it. Returns turns answered.
    With the run's tools, each reply runs the tool loop and shows its calls and their output; the conversation
    keeps one tool environment until /reset."""
    history: list[dict[str, Any]] = []
    turns = 0
    env = fresh_environment(gen)
    tools = f", tools from {gen.environment.__name__}" if env is not None else ""
    out.write(f"chatting with {gen.info.path} ({gen.engine.name}{tools}); /reset clears, /exit or Ctrl-D quits\n")
    out.write("> ")
    out.flush()
    for raw in lines:
        line = raw.strip()
        if line in EXIT_WORDS:
            break
        if line == "/reset":
            history = []
            env = fresh_environment(gen)
            out.write("(conversation cleared)\n> ")
            out.flush()
            continue
        if line:
            history.append({"role": "user", "content": line})
            if env is not None:
                episode = gen.converse([as_messages(history, gen.system)], envs=[env])[0]
                out.write(transcript(episode.messages) + "\n")
                out.flush()
                history += episode.messages
            else:
                reply = gen.stream(as_messages(history, gen.system), out)
                history.append({"role": "assistant", "content": reply})
            turns += 1
        out.write("> ")
        out.flush()
    out.write("\n")
    return turns


def fresh_environment(gen: Generator) -> Any:
    """A new tool environment for a conversation (None when the run has no tools)."""
    if gen.environment is None:
        return None
    env = gen.environment()
    env.reset()
    return env


def _stdin_lines() -> Iterable[str]:
    while True:
        try:
            yield input() if sys.stdin.isatty() else next(sys.stdin)
        except (EOFError, StopIteration):
            return


# --------------------------------------------------------------------------- command line


def _chat_cmd(args: argparse.Namespace) -> int:
    info = Run.open(args.run_dir, lora=True)
    gen = Generator(info, select_engine(args.engine), max_new_tokens=args.max_new_tokens,
                    temperature=args.temperature)
    chat_loop(gen, _stdin_lines(), sys.stdout)
    return 0


def _generate_cmd(args: argparse.Namespace) -> int:
    records = generate_file(args.run_dir, args.prompts, args.out, engine=args.engine,
                            max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                            batch_size=args.batch_size)
    if args.out:
        print(f"wrote {len(records)} completions to {args.out}", file=sys.stderr)
    return 0


def _common(p: argparse.ArgumentParser, temperature: float) -> None:
    p.add_argument("run_dir", help="a run directory with adapter/ (runs/<recipe>-<time>)")
    p.add_argument("--engine", default="auto", help="auto | transformers | vllm | unsloth")
    p.add_argument("--max-new-tokens", type=int, default=256, help="longest reply, in tokens")
    p.add_argument("--temperature", type=float, default=temperature, help="0 = greedy")


def add_parser(sub: Any) -> None:
    """Register ``grpo-fast chat`` and ``grpo-fast generate``."""
    chat = sub.add_parser("chat", help="chat with a trained run (streamed, recipe system prompt applied)")
    _common(chat, 0.7)
    chat.set_defaults(func=_chat_cmd)
    gen = sub.add_parser("generate", help="complete every prompt of a file; JSONL out")
    _common(gen, 0.0)
    gen.add_argument("--prompts", required=True, help=".txt (one per line), .jsonl or .json")
    gen.add_argument("--out", default=None, help="JSONL output file (default: stdout)")
    gen.add_argument("--batch-size", type=int, default=8, help="prompts generated together")
    gen.set_defaults(func=_generate_cmd)
