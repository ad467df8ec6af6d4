"""Before/after evaluation on held-out rows: did training make the model better at the task, not just the reward?

Scored with the recipe's own rewards: accuracy (greedy answer at full correctness), format compliance,
completion length, and pass@k from ``n`` sampled completions with the unbiased estimator of Chen et al.
(2021). ``evaluate_run`` evaluates the base model and the run's adapter side by side and writes eval.json.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_fast import rundir
from grpo_fast.errors import UserError
from grpo_fast.recipes import Recipe

EVAL_FILE = "eval.json"
# Metrics ``compare`` puts side by side, in table order; ``pass@k`` keys are added by name.
METRICS = ("accuracy", "format", "mean_length", "clipped", "pass@1")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples of which ``c`` are correct: 1 - C(n-c, k) / C(n, k)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _score(fn: Any, rows: Sequence[dict], texts: Sequence[str]) -> list[float | None]:
    """Call a TRL-style reward on completions in the same shape training gave it (chat or plain)."""
    chat = isinstance(rows[0]["prompt"], list)
    completions = [[{"role": "assistant", "content": t}] if chat else t for t in texts]
    columns = {k: [r.get(k) for r in rows] for k in rows[0] if k != "prompt"}
    return list(fn(prompts=[r["prompt"] for r in rows], completions=completions, **columns))


def _prompt_text(tokenizer: Any, prompt: Any) -> str:
    if isinstance(prompt, list):
        return tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    return prompt


def generate(model: Any, tokenizer: Any, prompts: Sequence[Any], *, n: int = 1, greedy: bool = True,
             max_new_tokens: int = 256, temperature: float = 1.0, batch_size: int = 16) -> list[list[tuple[str, int]]]:
    """``n`` completions per prompt as (text, token count), batched with left padding and the chat template."""
    import torch
    from transformers import GenerationConfig

    model_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos = model_eos if model_eos is not None else tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sampling = {} if greedy else {"temperature": temperature, "top_p": 1.0, "top_k": 0}
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=not greedy, num_return_sequences=n,
                              pad_token_id=pad, eos_token_id=eos, **sampling)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    stops = set(eos if isinstance(eos, list) else [eos]) | {pad, tokenizer.eos_token_id}
    out: list[list[tuple[str, int]]] = []
    try:
        for start in range(0, len(prompts), batch_size):
            texts = [_prompt_text(tokenizer, p) for p in prompts[start:start + batch_size]]
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
            with torch.no_grad():
                ids = model.generate(**batch, generation_config=config)
            new = ids[:, batch["input_ids"].shape[1]:].tolist()
            for i in range(len(texts)):
                group = []
                for seq in new[i * n:(i + 1) * n]:
                    length = next((j for j, t in enumerate(seq) if t in stops), len(seq))
                    group.append((tokenizer.decode(seq[:length], skip_special_tokens=True), length))
                out.append(group)
    finally:
        tokenizer.padding_side = side
    return out


def _judges(recipe: Recipe, rewards: Any | None) -> tuple[Any, float, Any | None]:
    """(correctness reward, its full score, format reward or None): the run's rewards if given, else the recipe's."""
    funcs = list(rewards.funcs) if rewards is not None else recipe.reward_funcs()
    by_name = {getattr(f, "__name__", ""): f for f in funcs}
    name = rewards.correctness if rewards is not None else recipe.correctness
    best = rewards.correctness_max if rewards is not None else recipe.correctness_max
    fmt = by_name.get(recipe.format_reward or "") or next(
        (f for f in funcs if getattr(f, "reward_kind", None) == "format"), None)
    return by_name[name], best, fmt


def evaluate(model: Any, tokenizer: Any, rows: Sequence[dict], recipe: Recipe, *, k: int = 4, n: int | None = None,
             max_new_tokens: int = 256, temperature: float = 1.0, seed: int = 0, batch_size: int = 16,
             examples: int = 3, rewards: Any | None = None) -> dict[str, Any]:
    """Metrics of one model on mapped rows (``prompt`` + gold columns), scored by the recipe's rewards.

    accuracy: greedy completion's correctness score >= ``recipe.correctness_max``. format: share of greedy
    completions at the format reward's maximum (None without a format reward). mean_length: greedy tokens.
    clipped: share of greedy completions cut at ``max_new_tokens``. pass@1 / pass@k: from ``n`` (default k)
    samples at ``temperature`` per row, unbiased estimator. ``rewards``: the run's ``train.Rewards`` when the
    config chose other rewards than the recipe's (its ``correctness`` names the judge).
    """
    import torch
    from transformers import set_seed

    if not rows:
        raise UserError("no held-out rows to evaluate", "config key 'eval_rows'", "set eval_rows to 8 or more")
    n = n or k
    correct_fn, best, format_fn = _judges(recipe, rewards)
    best -= 1e-9
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        set_seed(seed)
        greedy = [g[0] for g in generate(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens=max_new_tokens,
                                         batch_size=batch_size)]
        texts = [t for t, _ in greedy]
        correct = [s is not None and s >= best for s in _score(correct_fn, rows, texts)]
        fmt = None
        if format_fn is not None:
            top = getattr(format_fn, "reward_range", (0.0, 1.0))[1] - 1e-9
            fmt = sum(s is not None and s >= top for s in _score(format_fn, rows, texts)) / len(rows)
        set_seed(seed)
        sampled = generate(model, tokenizer, [r["prompt"] for r in rows], n=n, greedy=False,
                           max_new_tokens=max_new_tokens, temperature=temperature, batch_size=max(1, batch_size // n))
        flat_rows = [r for r in rows for _ in range(n)]
        flat_scores = _score(correct_fn, flat_rows, [t for group in sampled for t, _ in group])
        counts = [sum(s is not None and s >= best for s in flat_scores[i * n:(i + 1) * n]) for i in range(len(rows))]
    finally:
        if was_training:
            model.train()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return {
        "rows": len(rows),
        "accuracy": sum(correct) / len(rows),
        "format": fmt,
        "mean_length": sum(length for _, length in greedy) / len(rows),
        "clipped": sum(length >= max_new_tokens for _, length in greedy) / len(rows),
        "pass@1": sum(pass_at_k(n, c, 1) for c in counts) / len(rows),
        f"pass@{k}": sum(pass_at_k(n, c, k) for c in counts) / len(rows),
        "k": k,
        "n": n,
        "examples": [{"prompt": _last_content(r["prompt"]), "completion": t, "correct": ok}
                     for r, t, ok in list(zip(rows, texts, correct))[:examples]],
    }


def _last_content(prompt: Any) -> str:
    return prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)


def compare(base: dict[str, Any], trained: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows ``{metric, base, trained, delta}`` for every metric both evaluations have."""
    keys = [m for m in METRICS if m != "pass@1"] + ["pass@1"] + sorted(
        k for k in trained if k.startswith("pass@") and k != "pass@1")
    table = []
    for key in keys:
        b, t = base.get(key), trained.get(key)
        if b is None or t is None:
            continue
        table.append({"metric": key, "base": b, "trained": t, "delta": t - b})
    return table


def format_table(table: list[dict[str, Any]]) -> str:
    """The comparison as aligned text, for the terminal."""
    lines = [f"{'metric':<12} {'base':>9} {'trained':>9} {'delta':>9}"]
    for row in table:
        lines.append(f"{row['metric']:<12} {row['base']:>9.3f} {row['trained']:>9.3f} {row['delta']:>+9.3f}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- a run directory


def _check_run_dir(run_dir: Path) -> Path:
    if not (run_dir / "config.yaml").is_file():
        raise UserError(f"{run_dir} is not a grpo_fast run directory (no config.yaml)", str(run_dir),
                        "pass a folder under runs/ written by `grpo-fast train`")
    adapter = run_dir / "adapter"
    if not ((adapter / "adapter_config.json").is_file() or (adapter / "config.json").is_file()):
        raise UserError(f"{run_dir} has no trained adapter (adapter/ is missing or empty)", str(adapter),
                        "wait for the run to finish, or evaluate a run that completed (summary.json present)")
    return adapter


def load_for_eval(run_dir: Path, cfg: Any) -> tuple[Any, Any, Any]:
    """(model, tokenizer, base) where ``base`` is a context manager factory giving the base model's view.

    LoRA runs load the base once and disable the adapter for the base side; full fine-tunes load both.
    """
    import contextlib

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_fast.models import bf16_supported, resolve_model_path

    adapter = _check_run_dir(run_dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = (torch.bfloat16 if bf16_supported() else torch.float16) if device == "cuda" else None
    kwargs = {"dtype": dtype} if dtype else {}
    base_path = resolve_model_path(cfg.model)
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
    base_model = AutoModelForCausalLM.from_pretrained(base_path, **kwargs).to(device)
    return trained, tokenizer, lambda: contextlib.nullcontext(base_model)


def evaluate_run(run_dir: str | Path, *, k: int = 4, n: int | None = None, max_new_tokens: int | None = None,
                 temperature: float | None = None, seed: int | None = None, limit: int | None = None,
                 batch_size: int = 16) -> dict[str, Any]:
    """Evaluate the base model and the run's adapter on the run's held-out rows; write ``eval.json``.

    The held-out rows are rebuilt from the run's config.yaml by ``prepare``, whose split is deterministic
    in the seed. Unset options default to the run's own settings (max_completion_length, temperature, seed).
    """
    from grpo_fast.train import prepare, resolve_config

    run_dir = Path(run_dir)
    _check_run_dir(run_dir)
    cfg = resolve_config(str(run_dir / "config.yaml"))
    prep = prepare(cfg, force=True)
    rows = prep.eval_rows[:limit] if limit else prep.eval_rows
    settings = {
        "k": k, "n": n or k,
        "max_new_tokens": max_new_tokens or int(cfg.grpo.get("max_completion_length", 256)),
        "temperature": temperature if temperature is not None else float(cfg.grpo.get("temperature", 1.0)),
        "seed": cfg.seed if seed is None else seed,
        "batch_size": batch_size,
    }
    model, tokenizer, base_view = load_for_eval(run_dir, cfg)
    with base_view() as base_model:
        base = evaluate(base_model if base_model is not None else model, tokenizer, rows, prep.recipe,
                        rewards=prep.rewards, **settings)
    trained = evaluate(model, tokenizer, rows, prep.recipe, rewards=prep.rewards, **settings)
    result = {
        "run_dir": str(run_dir), "recipe": prep.recipe.name, "model": cfg.model, "settings": settings,
        "base": base, "trained": trained, "comparison": compare(base, trained),
    }
    rundir.write_json(run_dir / EVAL_FILE, result)
    return result
