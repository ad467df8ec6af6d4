"""Reward names: the registry a config's ``rewards:`` reads, custom rewards by reference, and the run's set.

A config names a reward by registry name (``fuzzy_match``), by the recipe's own function name (``sum_correct``),
by dotted import path (``my_pkg.rewards.brevity`` or ``my_pkg.rewards:brevity``) or by file
(``my_rewards.py:brevity``, relative to the config file). Factories (``is_reward_factory``) get the entry's
other keys as parameters.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import grpo_fast.rewards.code as code
import grpo_fast.rewards.correctness as correctness
import grpo_fast.rewards.format as fmt
import grpo_fast.rewards.judged as judged
import grpo_fast.rewards.length as length
import grpo_fast.rewards.mathverify as mathverify
import grpo_fast.rewards.reasoning as reasoning
import grpo_fast.rewards.style as style
from grpo_fast.config.references import is_reference, load_object
from grpo_fast.errors import UserError
from grpo_fast.rewards.base import RewardFunc
from grpo_fast.rewards.presets import RewardSet, get_preset
from grpo_fast.rewards.reward_model import make_reward_model

# name -> reward function, or factory (``is_reward_factory``) called by ``get_reward`` with the YAML params.
REWARDS: dict[str, Callable[..., Any]] = {
    # correctness
    "exact_match": correctness.make_exact_match_reward,
    "fuzzy_match": correctness.make_fuzzy_match_reward,
    "numeric_match": correctness.make_numeric_match_reward,
    "math_accuracy": mathverify.math_accuracy_reward,
    "multiple_choice": correctness.make_multiple_choice_reward,
    "json_field_match": correctness.make_json_field_match_reward,
    "code_execution": code.make_code_execution_reward,
    "rouge": correctness.make_rouge_reward,
    "reasoning_accuracy": reasoning.make_reasoning_accuracy_reward,
    # format
    "strict_xml_format": fmt.strict_xml_format_reward,
    "soft_xml_format": fmt.soft_xml_format_reward,
    "xml_count": fmt.xml_count_reward,
    "think_answer_format": fmt.think_answer_format_reward,
    "think_format": fmt.think_format_reward,
    "json_valid": fmt.json_valid_reward,
    "json_schema": fmt.make_json_schema_reward,
    "code_block": fmt.make_code_block_reward,
    "python_syntax": fmt.python_syntax_reward,
    # length
    "ideal_length": length.make_ideal_length_reward,
    "relative_length": length.make_relative_length_reward,
    "min_length": length.make_min_length_reward,
    "max_length_penalty": length.make_max_length_penalty,
    "soft_overlong_punishment": length.make_soft_overlong_punishment,
    "cosine_scaled": reasoning.make_cosine_scaled_reward,
    "kimi_length": reasoning.make_kimi_length_reward,
    # style
    "reasoning_steps": style.reasoning_steps_reward,
    "citation": style.make_citation_reward,
    "repetition_penalty": style.make_repetition_penalty,
    "language_consistency": style.language_consistency_reward,
    "faithfulness": style.make_faithfulness_reward,
    # judged (docs/rewards.md "Judged rewards"); a reward model is {model: ...}, not a name
    "llm_judge": judged.make_llm_judge_reward,
}


def register_reward(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Make your own reward (or factory, marked ``is_reward_factory``) nameable in configs: ``rewards: [name]``."""
    REWARDS[name] = fn
    return fn


def is_factory(obj: Any) -> bool:
    return bool(getattr(obj, "is_reward_factory", False))


def get_reward(name: str, own: Sequence[RewardFunc] = (), **params: Any) -> RewardFunc:
    """A reward by registry name, by the name of one of ``own`` (a recipe's rewards), or by reference.

    ``name`` may carry a ``_reward`` suffix (``math_accuracy_reward``) as TRL logs it.
    """
    key = name.strip()
    mine = {getattr(f, "__name__", ""): f for f in own}
    if key in mine or f"{key}_reward" in mine:
        entry = mine.get(key) or mine[f"{key}_reward"]
    elif key in REWARDS or key.removesuffix("_reward") in REWARDS:
        entry = REWARDS[key if key in REWARDS else key.removesuffix("_reward")]
    elif is_reference(key):
        entry = load_reward(key)
    else:
        close = difflib.get_close_matches(key, [*REWARDS, *mine], n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known rewards: {', '.join(sorted(REWARDS))}"
        raise UserError(f"unknown reward {name!r}",
                        fix=f"{hint} (or give my_rewards.py:function / pkg.module.function)")
    if is_factory(entry):
        try:
            return entry(**params)
        except TypeError as err:
            raise UserError(f"bad parameters for reward {key!r}: {err}", fix="see docs/rewards.md") from None
    if params:
        raise UserError(f"reward {key!r} takes no parameters (got {', '.join(params)})",
                        fix="remove the parameters, or pick a factory reward")
    return entry


def load_reward(ref: str) -> RewardFunc:
    """Import ``file.py:function``, ``pkg.module:function`` or ``pkg.module.function``; check it is a reward."""
    fn = load_object(ref, "reward")
    check_signature(fn, ref)
    return fn


def check_signature(fn: Any, ref: str) -> None:
    """TRL calls ``fn(prompts=..., completions=..., completion_ids=..., **columns)``: the function must take them."""
    if not callable(fn):
        raise UserError(f"{ref!r} is not a function", fix="point at a function fn(completions, **kwargs)")
    if is_factory(fn):
        return
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return  # builtins and some callables hide their signature: TRL will find out
    names = {p.name for p in params}
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params)
    if "completions" not in names or not takes_kwargs:
        raise UserError(f"reward {ref!r} has the wrong signature {inspect.signature(fn)}",
                        fix="define it as def name(completions, **kwargs) -> list[float] (TRL also passes prompts, "
                        "completion_ids and every dataset column as keyword arguments)")


def resolve_rewards(spec: Any, default: RewardSet, weights: list[float] | None = None,
                    where: Callable[[str], str] = lambda key: f"key '{key}'") -> RewardSet:
    """The run's reward set: ``spec`` (a list of RewardSpec, a preset name, or None = ``default``), with
    ``weights`` (GRPOConfig.reward_weights) when given. The judge is the default's correctness reward when
    listed, else the first reward marked ``reward_kind == "correctness"``."""
    if spec is None:
        chosen = default
    elif isinstance(spec, str):
        try:
            chosen = get_preset(spec)
        except UserError as err:
            raise UserError(err.what, where("rewards"), err.fix) from None
    else:
        funcs, ws = [], []
        for i, item in enumerate(spec):
            try:
                funcs.append(marked(spec_reward(item, default.funcs), item.kind, item.range))
            except UserError as err:  # a factory names its parameter (``where="rubric"``); else the entry's name
                key = err.where if err.where and err.where.isidentifier() else "name"
                raise UserError(err.what, where(f"rewards[{i}].{key}"), err.fix) from None
            ws.append(item.weight)
        named = [f.__name__ for f, item in zip(funcs, spec) if item.kind == "correctness"]
        chosen = _judged(funcs, ws, default, where, named[0] if named else None)
    if weights:
        if len(weights) != len(chosen.funcs):
            raise UserError(f"{len(weights)} reward_weights for {len(chosen.funcs)} rewards", where("reward_weights"),
                            "give one weight per reward, in order")
        chosen = chosen.with_weights(list(weights))
    return chosen


def spec_reward(item: Any, own: Sequence[RewardFunc] = ()) -> RewardFunc:
    """One ``rewards:`` entry: ``{model: ...}`` a reward model TRL scores with, else a reward by name."""
    loading = {k: v for k in ("dtype", "load_in_4bit") if (v := getattr(item, k, None)) is not None}
    if getattr(item, "model", None) is not None:
        if item.name is not None:
            raise UserError(f"a rewards entry has both name {item.name!r} and model {item.model!r}", "model",
                            "one entry per reward: a name, or a model")
        if item.params:
            raise UserError(f"a reward model takes no parameters (got {', '.join(item.params)})", "model",
                            "give model, weight, and optionally dtype and load_in_4bit")
        return make_reward_model(item.model, **loading)
    if loading:
        key = next(iter(loading))
        raise UserError(f"{key} applies to a reward model (an entry with model:), not to {item.name!r}", key,
                        f"remove {key} from this entry")
    if item.name is None:
        raise UserError("a rewards entry needs a name (or a model)", "name", "e.g. - {name: fuzzy_match, weight: 2}")
    return get_reward(item.name, own, **item.params)


def marked(fn: RewardFunc, kind: str | None, span: tuple[float, float] | None) -> RewardFunc:
    """The reward with the kind and range its config entry gives (``{name: my.py:fn, kind: correctness,
    range: [-4.5, 5]}``), as a wrapper: the user's function object is never changed."""
    if kind is None and span is None:
        return fn

    @functools.wraps(fn)
    def reward(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    if kind is not None:
        reward.reward_kind = kind  # type: ignore[attr-defined]
    if span is not None:
        reward.reward_range = (float(span[0]), float(span[1]))  # type: ignore[attr-defined]
    return reward


def _judged(funcs: list, weights: list[float], default: RewardSet, where: Callable[[str], str],
            named: str | None = None) -> RewardSet:
    """The judge: the reward the config marks ``kind: correctness``, else the default's judge when listed, else
    the first reward declaring ``reward_kind = 'correctness'``."""
    names = [f.__name__ for f in funcs]
    judges = [f.__name__ for f in funcs if getattr(f, "reward_kind", None) == "correctness"]
    if named is not None:
        judge = named
    elif default.correctness in names:
        judge = default.correctness
    elif judges:
        judge = judges[0]
    else:
        raise UserError("no correctness reward among the configured rewards", where("rewards"),
                        f"mark the reward that checks the answer: {{name: my_rewards.py:check_answer, kind: "
                        f"correctness}} (or add {default.correctness}), so answers can be checked and evaluated")
    fmt = default.format if default.format in names else next(
        (f.__name__ for f in funcs if getattr(f, "reward_kind", None) == "format"), None)
    return RewardSet("custom", tuple(zip(funcs, weights)), judge, fmt)
