"""Prepare a run without loading weights: data, rewards, the gold self-test and the memory plan.

This is the whole of ``--dry-run``: every check that can fail runs here, in seconds, before a model loads.
The tokenizer alone is enough (prompt lengths), so a dry run never converts or loads model weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from grpo_fast import data, models
from grpo_fast.config import RunConfig
from grpo_fast.errors import UserError
from grpo_fast.models import generation, gpu
from grpo_fast.models.plan import estimate, plan_input
from grpo_fast.models.thinking import ThinkingMode, for_run
from grpo_fast.recipes import Recipe, get_recipe
from grpo_fast.rewards import RewardSet, resolve_rewards
from grpo_fast.rewards.check import GoldAudit, audit_gold
from grpo_fast.rewards.judge_checks import run_self_tests
from grpo_fast.run.vllm_measure import probe_cached, probe_for
from grpo_fast.sandbox import default_sandbox, weaker_than
from grpo_fast.tools import environment_class
from grpo_fast.tools.chat import environment_tools, tool_schemas, use_tool_template
from grpo_fast.watch import trackers


@dataclass
class Prepared:
    """The outcome of the pre-training checks: data ready to train on, the reward set, and what was found."""

    cfg: RunConfig
    recipe: Recipe
    rewards: RewardSet
    train_rows: list[dict]
    eval_rows: list[dict]
    tokenizer: Any
    report: list[str] = field(default_factory=list)
    tools: list[dict] | None = None
    """JSON schemas of the environment's tools, as the chat template shows them in every prompt (None: no tools)."""
    gold: GoldAudit | None = None
    """The gold self-test: every row's reference (or a stated sample) scored, what failed and why."""
    thinking: ThinkingMode = field(default_factory=lambda: ThinkingMode(False))
    """The run's thinking mode (models.thinking): the same in training, evaluation, chat and generate."""
    sandbox: dict[str, Any] | None = None
    """A run that scores code: the sandbox's level and what a program can still reach (summary.json, report)."""
    gold_unchecked: str | None = None
    """Why the gold self-test could not check the judge where the rows have references (a bare reference the judge
    never gives full marks): ``grpo-fast rewards check`` says the same."""


def run_rewards(cfg: RunConfig, recipe: Recipe | None = None) -> RewardSet:
    """The reward set a config trains with: its ``rewards:`` (or the recipe's preset) and reward_weights."""
    recipe = recipe or get_recipe(cfg.recipe)
    return resolve_rewards(cfg.rewards, recipe.rewards, cfg.grpo.get("reward_weights"), cfg.where)


def prepare(cfg: RunConfig, force: bool = False, measure: bool = True) -> Prepared:
    """Everything that needs no weights: backend choice, data, prompt lengths, gold self-test, memory plan.
    ``measure``: ``generation: auto`` may run its vLLM probe (a subprocess that loads the model; a dry run and
    ``check`` pass False and read its cache only)."""
    recipe = get_recipe(cfg.recipe)
    trackers.check(cfg)
    # generation: auto may turn colocated vLLM on (CPU, vLLM installed, measured faster on this machine)
    generation.pick_vllm(cfg, probe_for if measure else probe_cached)
    backend = models.select_backend(cfg.backend, load_in_4bit=cfg.load_in_4bit, use_vllm=bool(cfg.args.use_vllm))
    gpu.check_gpu_path(cfg, backend)
    report = [f"recipe {recipe.name}: {recipe.description}", f"backend: {backend.name} ({backend.reason})",
              *cfg.notes]
    rows = recipe.rows(cfg)
    if cfg.system_prompt is not None:  # the gold self-test below runs against it
        rows = data.with_system_prompt(rows, cfg.system_prompt)
        recipe = replace(recipe, system_prompt=cfg.system_prompt)
        report.append(f"system prompt: {cfg.system_prompt!r} ({cfg.where('system_prompt')})")
    origin = cfg.dataset or f"recipe {recipe.name} sample"
    data.validate_rows(rows, recipe.required, origin)
    rows, duplicates = data.dedupe(rows)
    tokenizer = models.load_tokenizer(cfg.model, cfg.chat_template, cfg.where("chat_template"))
    noted = len(cfg.notes)
    thinking = for_run(cfg, tokenizer)
    report.extend(cfg.notes[noted:] if len(cfg.notes) > noted else [thinking.describe()])
    recipe = replace(recipe, gold=thinking.gold(recipe.gold),  # the gold answers thinking, then answering
                     reference=thinking.gold(recipe.reference) if recipe.reference else None)
    tools = tool_list(cfg, recipe, tokenizer, report)
    rows, stats = data.filter_long_prompts(rows, tokenizer, cfg.max_prompt_tokens, tools, thinking.kwargs)
    if recipe.holdout is not None and cfg.dataset is None:
        train_rows = rows
        wanted = recipe.holdout(cfg, rows) if wants_holdout(cfg) else []
        wanted = data.with_system_prompt(wanted, cfg.system_prompt) if cfg.system_prompt is not None else wanted
        eval_rows, _ = data.filter_long_prompts(wanted, tokenizer, cfg.max_prompt_tokens, tools, thinking.kwargs)
        if len(eval_rows) < cfg.eval_rows:
            if cfg.set_by_user("eval_rows"):
                raise UserError(f"eval_rows={cfg.eval_rows} but recipe {recipe.name} has only {len(eval_rows)} "
                                "questions that training does not use", cfg.where("eval_rows"),
                                f"set eval_rows to {len(eval_rows)} or less")
            report.append(f"eval_rows {cfg.eval_rows} -> {len(eval_rows)}: all the questions training does not use")
    else:
        train_rows, eval_rows = data.split_holdout(rows, holdout_size(cfg, len(rows), report), cfg.seed)
    report.append(f"data: {len(train_rows)} train rows, {len(eval_rows)} held out, {duplicates} duplicates dropped")
    report.append(stats.line())
    rewards = thinking.rewards(run_rewards(cfg, recipe), int(cfg.args.max_completion_length or 0) or None)
    report.append("rewards: " + ", ".join(f"{n} x{w:g}" for n, w in zip(rewards.names, rewards.weights)))
    gated = [n for n, fn in zip(rewards.names, rewards.funcs) if getattr(fn, "needs_thinking", False)]
    if gated and not thinking.active:
        raise UserError(f"{', '.join(gated)} scores 0 unless the completion closes its thinking, and this run does "
                        f"not think ({thinking.describe()})", cfg.where("rewards"), "train a thinking model "
                        "(thinking: on), or judge direct answers with math_accuracy")
    sandbox = sandbox_check(cfg, rewards, tools, report)  # before the gold self-test runs any code
    report.extend(scale_lines(rewards))
    audit, said, unread = gold_audit(rewards, train_rows, recipe)
    if audit.total and not recipe.gold(train_rows[audit.checked[0]]) and recipe.reference:
        recipe = replace(recipe, gold=recipe.reference)  # the bare reference earns full marks: it is the gold
    if said:
        report.append(said)
    elif audit.failures and recipe.drop_failed_gold and not audit.mostly_failing:  # a few broken references
        dropped = {i for i, _ in audit.failures}
        train_rows = [row for i, row in enumerate(train_rows) if i not in dropped]
        report.append(audit.summary(dropped=True))
    elif audit.failures and not force:
        raise UserError("reward gold self-test failed: " + audit.summary(), origin,
                        "fix the reward or the gold column (run `grpo-fast rewards check`), or pass --force")
    else:
        report.append(audit.summary())
    report.extend(run_self_tests(rewards.funcs, train_rows, recipe.gold, cfg.where))  # LLM judges, before training
    report.append(memory_line(cfg, stats.max))
    return Prepared(cfg, recipe, rewards, train_rows, eval_rows, tokenizer, report, tools, audit, thinking, sandbox,
                    said if unread else None)


def gold_audit(rewards: RewardSet, rows: list[dict], recipe: Recipe) -> tuple[GoldAudit, str | None, bool]:
    """The gold self-test, a line when it could not check the judge (no row has a gold reply, or the bare
    reference, ``recipe.reference``, fails the judge on every row because the judge wants a layout around it), and
    whether it was the latter: references there, none the judge can read."""
    audit = audit_gold(rewards, rows, recipe.gold)
    if audit.total:
        return audit, None, False
    nothing = GoldAudit(0, [], [], rewards.correctness)
    if recipe.reference is not None:
        bare = audit_gold(rewards, rows, recipe.reference)
        if bare.total and not bare.failures:
            return bare, None, False
        if bare.total and len(bare.failures) < len(bare.checked):
            return bare, None, False  # some references pass: the judge reads them, the failing rows are real
        if bare.total:
            return nothing, (f"gold self-test: not checked: the bare reference gets full '{rewards.correctness}' on "
                             f"none of {len(bare.checked)} rows (the judge asks for a layout around it); add a "
                             "'gold' column holding a full reply to check the judge before training"), True
    return nothing, (f"gold self-test: not checked: no row has a gold reply (a 'gold' or 'completion' column) or a "
                     f"reference answer for '{rewards.correctness}' to score"), False


def scale_lines(rewards: RewardSet) -> list[str]:
    """What the health monitor weighs rewards against: a line for rewards that declare no range."""
    bare = [n for n, fn in zip(rewards.names, rewards.funcs) if getattr(fn, "reward_range", None) is None]
    if not bare:
        return []
    return [f"health: {', '.join(bare)} declare(s) no score range: the monitor learns the reward's span from the "
            "scores it observes (give range: [lo, hi] on the reward to fix it)"]


USERNS_FIX = ("run as root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; "
              "on Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0)")
SANDBOX_FIXES = {  # what lifts a host to the strongest levels, by where it stopped
    "landlock+own-uid": USERNS_FIX,
    "rlimits-only": USERNS_FIX,
    "uid-drop": "give the container namespaces (docker run --security-opt seccomp=unconfined --cap-add SYS_ADMIN, "
                "or --privileged)",
}


def sandbox_check(cfg: RunConfig, rewards: RewardSet, tools: list[dict] | None,
                  report: list[str]) -> dict[str, Any] | None:
    """A run that scores code (a code reward, the python tool): say the sandbox's level and what a generated program
    can still reach on this host; refuse (exit 2) below ``sandbox_min_level``. None: the run runs no code."""
    tool_names = {s["function"]["name"] for s in tools or []}
    if not any(n.startswith("code_execution") for n in rewards.names) and "python" not in tool_names:
        return None

    box = default_sandbox()
    level, threats = box.level(), box.threats()
    reach = "; ".join(threats) if threats else "nothing known"
    if cfg.sandbox_min_level and weaker_than(level, cfg.sandbox_min_level):
        fix = SANDBOX_FIXES.get(level, "run as root on a host with namespaces")
        raise UserError(f"the code sandbox isolates only at {level!r} here, below sandbox_min_level "
                        f"{cfg.sandbox_min_level!r} (a generated program can reach: {reach})",
                        cfg.where("sandbox_min_level"), f"{fix}; or lower sandbox_min_level")
    report.append(f"code sandbox: {level}; what a generated program can still reach: {reach}")
    return {"level": level, "threats": threats}


def tool_list(cfg: RunConfig, recipe: Recipe, tokenizer: Any, report: list[str]) -> list[dict] | None:
    """The tools' schemas when the run has an environment, with the tokenizer made to render and parse calls
    (a model whose template cannot is refused here, before any weights load)."""
    env = environment_class(cfg, recipe)
    if env is None:
        return None
    template = use_tool_template(tokenizer, cfg.model)
    schemas = tool_schemas(environment_tools(env()))
    names = ", ".join(s["function"]["name"] for s in schemas)
    report.append(f"tools: {names} from {cfg.environment or recipe.environment}; chat template: {template}")
    return schemas


def wants_holdout(cfg: RunConfig) -> bool:
    """Rows are held out unless evaluation is off and no ``eval_rows`` are asked for."""
    return cfg.evaluate or cfg.eval_rows > 0


def holdout_size(cfg: RunConfig, n_rows: int, report: list[str]) -> int:
    """``eval_rows``, checked against the data: a user's explicit ask that cannot be met is an error; the
    default shrinks to a quarter of a small dataset, and says so."""
    if not wants_holdout(cfg):
        return 0
    most = n_rows // 4
    if cfg.eval_rows <= most:
        return cfg.eval_rows
    if cfg.set_by_user("eval_rows"):
        raise UserError(f"eval_rows={cfg.eval_rows} but the data has {n_rows} usable rows: at most a quarter "
                        f"({most}) can be held out", cfg.where("eval_rows"),
                        f"set eval_rows to {most} or less, or use a larger dataset")
    report.append(f"eval_rows {cfg.eval_rows} -> {most}: at most a quarter of the {n_rows} rows is held out")
    return most


def memory_line(cfg: RunConfig, prompt_tokens: int) -> str:
    """One line for the pre-training report: the planner's peak estimate against this machine."""
    card = models.gpu_memory_gb()
    try:
        plan = estimate(plan_input(cfg, models.model_source(cfg.model), card, prompt_tokens))
    except UserError as err:
        return f"memory plan: skipped ({err.what})"
    where = f"of {card:.1f} GiB on this GPU" if card else "(no GPU: this is RAM, an upper bound)"
    verdict = "" if card is None or plan.total_gb <= card else "  WARNING: over the card; see `grpo-fast plan`"
    return f"memory plan: peak about {plan.total_gb:.1f} GiB {where}{verdict}"
