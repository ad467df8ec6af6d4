"""Before/after evaluation on held-out rows: did training make the model better at the task, not just the reward?

Scored with the run's own rewards: accuracy (greedy answer at full correctness), mean correctness score,
format compliance, completion length, and pass@k from ``n`` sampled completions with the unbiased estimator
of Chen et al. (2021). ``evaluate_run`` reads what the run directory holds (its config and the held-out rows
training set aside), evaluates the base model and the adapter side by side and writes eval.json.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_fast import rundir
from grpo_fast.config import RunConfig
from grpo_fast.entry import make_callable, quiet_libraries
from grpo_fast.errors import UserError
from grpo_fast.files import read_json, write_json
from grpo_fast.models import bf16_supported, cache_dir, resolve_model_path, use_chat_template, weight_files
from grpo_fast.models.completions import generate
from grpo_fast.models.cpu_speed import merged_lora_generation, set_cpu_threads
from grpo_fast.models.thinking import for_run
from grpo_fast.recipes import get_recipe
from grpo_fast.rewards import RewardSet, score_rows
from grpo_fast.rewards.base import transcript
from grpo_fast.rewards.thinking import folded
from grpo_fast.run.prepare import run_rewards
from grpo_fast.run.resolve import resolve_config
from grpo_fast.tools import run_tools
from grpo_fast.tools.chat import use_tool_template
from grpo_fast.tools.loop import converse

EVAL_FILE = rundir.EVAL_FILE
# Metrics ``compare`` puts side by side, in table order; ``pass@k`` keys are added by name.
METRICS = ("accuracy", "score", "format", "mean_length", "clipped", "pass@1", "tool_use", "tool_calls", "tool_errors")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def evaluate(model: Any, tokenizer: Any, rows: Sequence[dict], rewards: RewardSet, *, k: int = 4,
             n: int | None = None, max_new_tokens: int = 256, temperature: float = 1.0, seed: int = 0,
             batch_size: int = 16, examples: int = 8, environment: Any = None,
             max_tool_calls: int = 4, chat_template_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Metrics of one model on mapped rows (``prompt`` + gold columns), scored by ``rewards``.

    accuracy: share of greedy completions at the judge's full score. score: mean greedy judge score as a
    share of full (for graded judges such as ROUGE). format: share of greedy completions at the format
    reward's maximum (None without one). mean_length: greedy tokens. clipped: share of greedy completions cut
    at ``max_new_tokens``. pass@1 / pass@k: from ``n`` (default k) samples at ``temperature`` per row.
    per_row: each held-out row's greedy score (a share of full), whether it was correct, and its pass@1 / pass@k,
    in row order, so an interval over rows (bootstrap, binomial) can be drawn from eval.json alone.
    ``environment``: run the tool loop as training did (one environment per conversation, at most
    ``max_tool_calls`` rounds of calls); adds tool_use (share of greedy completions that called a tool),
    tool_calls (calls per greedy completion) and tool_errors (share of calls that failed).
    ``chat_template_kwargs``: the run's chat template arguments (its thinking mode), as training used them.
    """
    import torch
    from transformers import set_seed

    if not rows:
        raise UserError("no held-out rows to evaluate", "config key 'eval_rows'", "set eval_rows to 8 or more")
    n = n or k
    correct_fn, format_fn = rewards.judge, rewards.get(rewards.format)
    full = rewards.correctness_max
    best = full - 1e-9
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        set_seed(seed)
        def with_tools(rows: Sequence[dict], **sampling: Any) -> list[Any]:
            """The tool loop over ``rows``, generating as ``generate`` does with ``sampling``."""
            return converse(lambda texts, budget: [g[0] for g in generate(
                model, tokenizer, texts, max_new_tokens=budget, batch_size=batch_size, **sampling)], tokenizer,
                rows, environment, max_new_tokens=max_new_tokens, max_iterations=max_tool_calls,
                chat_template_kwargs=chat_template_kwargs)

        episodes = None
        if environment is not None:
            episodes = with_tools(rows)
            greedy = [(e.messages, e.tokens) for e in episodes]
        else:
            greedy = [g[0] for g in generate(model, tokenizer, [r["prompt"] for r in rows],
                                             max_new_tokens=max_new_tokens, batch_size=batch_size,
                                             chat_template_kwargs=chat_template_kwargs)]
        texts = [t for t, _ in greedy]
        judged = score_rows(correct_fn, rows, texts)
        by_reward = reward_means(rewards, rows, texts, judged)
        correct = [s is not None and s >= best for s in judged]
        fmt = None
        if format_fn is not None:
            top = getattr(format_fn, "reward_range", (0.0, 1.0))[1] - 1e-9
            fmt = sum(s is not None and s >= top for s in score_rows(format_fn, rows, texts)) / len(rows)
        set_seed(seed)
        flat_rows = [r for r in rows for _ in range(n)]
        if environment is not None:
            flat_texts: list[Any] = [e.messages for e in with_tools(flat_rows, greedy=False, temperature=temperature)]
        else:
            sampled = generate(model, tokenizer, [r["prompt"] for r in rows], n=n, greedy=False,
                               max_new_tokens=max_new_tokens, temperature=temperature,
                               batch_size=max(1, batch_size // n), chat_template_kwargs=chat_template_kwargs)
            flat_texts = [t for group in sampled for t, _ in group]
        flat_scores = score_rows(correct_fn, flat_rows, flat_texts)
        counts = [sum(s is not None and s >= best for s in flat_scores[i * n:(i + 1) * n]) for i in range(len(rows))]
    finally:
        if was_training:
            model.train()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    tools = {}
    if episodes is not None:
        calls = sum(e.tool_calls for e in episodes)
        tools = {"tool_use": sum(e.tool_calls > 0 for e in episodes) / len(rows), "tool_calls": calls / len(rows),
                 "tool_errors": sum(e.tool_errors for e in episodes) / calls if calls else 0.0}
        texts = [transcript(t) for t in texts]
    return {
        "rows": len(rows),
        **tools,
        "accuracy": sum(correct) / len(rows),
        "score": sum((s or 0.0) for s in judged) / len(rows) / (full or 1.0),
        "format": fmt,
        "mean_length": sum(length for _, length in greedy) / len(rows),
        "clipped": (sum(e.clipped for e in episodes) if episodes is not None
                    else sum(length >= max_new_tokens for _, length in greedy)) / len(rows),
        "pass@1": sum(pass_at_k(n, c, 1) for c in counts) / len(rows),
        f"pass@{k}": sum(pass_at_k(n, c, k) for c in counts) / len(rows),
        "k": k,
        "n": n,
        "rewards": by_reward,
        "per_row": {"score": [(s or 0.0) / (full or 1.0) for s in judged], "correct": correct,
                    "pass@1": [pass_at_k(n, c, 1) for c in counts], f"pass@{k}": [pass_at_k(n, c, k) for c in counts]},
        "examples": [{"prompt": _last_content(r["prompt"]), "completion": t, "correct": ok}
                     for r, t, ok in list(zip(rows, texts, correct))[:examples]],
        "system_prompt": next((m["content"] for m in rows[0]["prompt"] if m.get("role") == "system"), None)
        if isinstance(rows[0]["prompt"], list) else None,
    }


def reward_means(rewards: RewardSet, rows: Sequence[dict], texts: Sequence[Any],
                 judged: list[float | None]) -> dict[str, float | None]:
    """Each reward's mean over the greedy completions (rows it judged not applicable, None, left out; None where
    it judged none): a recipe's own metrics side by side (citation, faithfulness, length, code block, ...)."""
    out: dict[str, float | None] = {}
    for name, fn in zip(rewards.names, rewards.funcs):
        kept = [s for s in (judged if fn is rewards.judge else score_rows(fn, rows, texts)) if s is not None]
        out[name] = sum(kept) / len(kept) if kept else None  # the judge's scores are reused, not run again
    return out


def _last_content(prompt: Any) -> str:
    return prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)


def compare(base: dict[str, Any], trained: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows ``{metric, base, trained, delta}`` for every metric both evaluations have, then each reward's
    mean (``reward <name>``) where both have it."""
    keys = [m for m in METRICS if m != "pass@1"] + ["pass@1"] + sorted(
        k for k in trained if k.startswith("pass@") and k != "pass@1")
    table = []
    for key in keys:
        b, t = base.get(key), trained.get(key)
        if b is None or t is None:
            continue
        table.append({"metric": key, "base": b, "trained": t, "delta": t - b})
    for name, t in (trained.get("rewards") or {}).items():
        b = (base.get("rewards") or {}).get(name)
        if b is not None and t is not None:
            table.append({"metric": f"reward {name}", "base": b, "trained": t, "delta": t - b})
    return table


def format_table(table: list[dict[str, Any]]) -> str:
    """The comparison as aligned text, for the terminal."""
    width = max([12, *(len(row["metric"]) for row in table)])
    return "\n".join([f"{'metric':<{width}} {'base':>9} {'trained':>9} {'delta':>9}"] + [
        f"{row['metric']:<{width}} {row['base']:>9.3f} {row['trained']:>9.3f} {row['delta']:>+9.3f}" for row in table])


# --------------------------------------------------------------------------- a run directory


def load_for_eval(run: rundir.Run) -> tuple[Any, Any, Any]:
    """(model, tokenizer, base) where ``base`` is a context manager factory giving the base model's view.

    LoRA runs load the base once and disable the adapter for the base side; full fine-tunes load the base model
    only when its view is entered (not at all when its evaluation is reused) and free it after.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    adapter = run.adapter
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = (torch.bfloat16 if bf16_supported() else torch.float16) if device == "cuda" else None
    kwargs = {"dtype": dtype} if dtype else {}
    base_path = resolve_model_path(run.base_model)
    tokenizer = AutoTokenizer.from_pretrained(str(adapter) if (adapter / "tokenizer_config.json").exists()
                                              else base_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if (adapter / "adapter_config.json").is_file():
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(base_path, **kwargs)
        model = PeftModel.from_pretrained(base, str(adapter)).to(device)
        return model, tokenizer, model.disable_adapter
    trained = AutoModelForCausalLM.from_pretrained(str(adapter), **kwargs).to(device)

    @contextlib.contextmanager
    def base_view() -> Any:
        yield AutoModelForCausalLM.from_pretrained(base_path, **kwargs).to(device)

    return trained, tokenizer, base_view


def evaluate_run(run_dir: str | Path | rundir.Run, *, k: int | None = None, n: int | None = None,
                 max_new_tokens: int | None = None, temperature: float | None = None, seed: int | None = None,
                 limit: int | None = None, batch_size: int | None = None, reuse_base: bool = True) -> dict[str, Any]:
    """Evaluate the base model and the run's adapter on the run's held-out rows; write ``eval.json``.

        grpo_fast.evaluate("runs/demo-20261203-101500")          # or a Run from grpo_fast.train / load
        grpo_fast.evaluate(run, k=8, limit=50)["comparison"]     # metric, base, trained, delta rows

    The run directory holds what this needs: config.yaml (rewards, settings) and heldout.jsonl (the rows
    training never saw). Unset options default to the run's own settings (eval_k, max_completion_length,
    temperature, seed, cpu_threads). ``batch_size``: prompts generated together (default 64 on CPU, where bigger
    batches amortise each decoding step's overhead, 16 on a GPU). On CPU the adapter is merged for generation
    when the run's ``merged_generation`` is on, as in training. The base model's evaluation is kept in the kit's
    cache (``base_evaluation_file``) and reused by runs whose base, rows, rewards and settings are the same
    (``reuse_base=False``: evaluate it again); eval.json then names the run it came from.
    """
    import torch

    quiet_libraries()
    run = rundir.Run.open(rundir.path_of(run_dir), adapter=True)
    cfg = resolve_config(str(run.path / rundir.CONFIG))
    set_cpu_threads(cfg)  # as training ran: on cores busy with other jobs fewer threads generate faster
    recipe = get_recipe(cfg.recipe)
    rewards = run_rewards(cfg, recipe)
    rows = run.heldout_rows()
    rows = rows[:limit] if limit else rows
    k = k or cfg.eval_k
    settings = {
        "k": k, "n": n or k,
        "max_new_tokens": max_new_tokens or int(cfg.args.max_completion_length),
        "temperature": temperature if temperature is not None else float(cfg.args.temperature),
        "seed": cfg.seed if seed is None else seed,
        "batch_size": batch_size or (16 if torch.cuda.is_available() else 64),
    }
    environment, rounds = run_tools(cfg, recipe)
    if environment is not None:
        settings.update(environment=environment, max_tool_calls=rounds)
    model, tokenizer, base_view = load_for_eval(run)
    use_chat_template(tokenizer, cfg.chat_template, cfg.where("chat_template"))  # as training rendered prompts
    if environment is not None:
        use_tool_template(tokenizer, cfg.model)  # the run saved its template; the parser is set again
    thinking = for_run(cfg, tokenizer)  # the mode training used (config.yaml records it)
    rewards = thinking.rewards(rewards)
    if thinking.kwargs:
        settings["chat_template_kwargs"] = thinking.kwargs
    kept = base_evaluation_file(run, cfg, rows, settings, tokenizer, cfg.environment or recipe.environment)
    reused = read_json(kept) if reuse_base and kept else None
    if reused and isinstance(reused.get("base"), dict) and "per_row" in reused["base"]:  # older ones lack per_row
        base = reused["base"]
        print(f"base model: the evaluation made for {reused['run']} is reused (same weights, rows, rewards and "
              "settings)", flush=True)
    else:
        reused = None
        with base_view() as base_model:
            base = evaluate(base_model if base_model is not None else model, tokenizer, rows, rewards, **settings)
        try:
            if kept:
                write_json(kept, {"run": str(run.path), "base": base})
        except OSError:  # e.g. a read-only cache: nothing kept, nothing lost
            pass
    # after the base's pass, which runs with the adapter off
    merged = bool(cfg.merged_generation) and not torch.cuda.is_available() and merged_lora_generation(model)
    trained = evaluate(model, tokenizer, rows, rewards, **settings)
    settings["merged_generation"] = merged
    if environment is not None:
        settings["environment"] = cfg.environment or recipe.environment
    if thinking.active:  # the thinking folded apart from the answer the judge read

        for side in (base, trained):
            side["examples"] = [folded(e, str(e.get("completion") or ""), thinking.tags, thinking.opened)
                                for e in side.get("examples") or []]
    result = {
        "run_dir": str(run.path), "recipe": recipe.name, "metric": recipe.metric, "model": cfg.model,
        "settings": settings, "thinking": thinking.describe(), "base": base, "trained": trained,
        "comparison": compare(base, trained), **({"base_from": reused["run"]} if reused else {}),
    }
    write_json(run.path / EVAL_FILE, result)
    return result


def base_evaluation_file(run: rundir.Run, cfg: RunConfig, rows: list[dict], settings: dict[str, Any], tokenizer: Any,
                         environment: Any) -> Path | None:
    """Where the base model's evaluation under exactly these conditions is kept: in the kit's cache
    (``base_evals/``), named by a hash of everything the base's scores depend on and of nothing about training, so
    runs that differ only in how they train share one base evaluation. In the hash: the base's weight files, the
    rows, the recipe and rewards with the source of every module they name (the kit's own included), the generation
    settings, the tokenizer, the device and the library versions. None (nothing kept) where the weights cannot be
    fingerprinted, e.g. a hub model not in the local cache."""
    import peft
    import torch
    import transformers

    flat = cfg.to_dict()
    try:
        weights = weight_files(str(run.base_model))
        sources = _sources([flat.get("rewards"), flat.get("environment"), str(environment)])
    except Exception:  # noqa: BLE001 - a key that cannot be made only means the base is evaluated
        return None
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    parts = {
        "weights": weights, "sources": sources, "rows": rows,
        "settings": {k: v for k, v in settings.items() if k != "environment"}, "environment": str(environment),
        "rewards": [flat.get(k) for k in ("recipe", "rewards", "reward_weights")],
        "tokenizer": [tokenizer.chat_template, len(tokenizer), tokenizer.special_tokens_map,
                      sorted(tokenizer.get_added_vocab().items()), tokenizer.padding_side],
        "versions": [torch.__version__, transformers.__version__, peft.__version__, device],
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]

    return cache_dir() / "base_evals" / f"{digest}.json"


def _sources(references: list[Any]) -> list[tuple[str, str]]:
    """A content hash of every Python file the references name (``file.py:name`` or ``module:name``), and of the
    kit's own source, so an edited reward or environment is never scored with another one's base results."""
    files = sorted(Path(__file__).resolve().parent.rglob("*.py"))
    for text in re.findall(r"([\w./-]+?)(\.py)?:\w+", " ".join(map(str, references))):
        name, is_file = text
        if is_file:
            files.append(Path(name + ".py").resolve())
        elif "." in name or name.isidentifier():
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin and spec.origin.endswith(".py"):
                files.append(Path(spec.origin))
    return [(str(f), hashlib.sha256(f.read_bytes()).hexdigest()) for f in dict.fromkeys(files) if f.is_file()]


make_callable(__name__, evaluate_run)
