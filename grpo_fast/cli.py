"""The ``grpo-fast`` command: a thin shell over the Python API of the same names.

Each subcommand imports its module when it runs (the imports marked "CLI dispatch"), so `grpo-fast --help` and
a mistyped command answer at once instead of after the whole kit has loaded.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from grpo_fast.entry import quiet_libraries
from grpo_fast.errors import UserError


def describe_keys(include_grpo: bool = True) -> str:
    """Every key with its type, default and help: the text of ``grpo-fast train --help-config``."""
    from pydantic import BaseModel

    from grpo_fast.config import HealthSettings, RewardSpec, RunConfig, grpo_args

    lines = []
    for title, model, prefix in (("grpo_fast keys (YAML top level)", RunConfig, ""),
                                 ("health: keys", HealthSettings, "health."),
                                 ("keys of each rewards: entry", RewardSpec, "rewards[]. ")):
        lines.append(("\n" if lines else "") + title + ":")
        for name, info in model.model_fields.items():
            if name == "grpo":
                continue
            default = info.get_default(call_default_factory=True)
            shown = "required" if info.is_required() else \
                f"default {'{...}' if isinstance(default, BaseModel) else repr(default)}"
            lines.append(f"  {prefix.strip()}{name}: {grpo_args.type_name(info.annotation)}, {shown}")
            lines.append(f"      {' '.join((info.description or '').split())}")
    if include_grpo:
        from trl import GRPOConfig

        lines.append("\nGRPOConfig fields (TRL's own, validated by TRL; written flat beside the keys above):")
        for f in fields(GRPOConfig):
            if not f.init or f.name in grpo_args.OWNED:
                continue
            default = f.default if f.default is not MISSING else "..."
            text = " ".join(str(f.metadata.get("help", "")).split())
            lines.append(f"  {f.name} = {default!r}: {text[:110] + ('...' if len(text) > 110 else '')}")
    return "\n".join(lines)


def _train(args: argparse.Namespace) -> int:
    from grpo_fast.run.prepare import prepare
    from grpo_fast.run.resolve import resolve_config
    from grpo_fast.train import run_of, train

    if args.help_config:
        print(describe_keys())
        return 0
    if (args.num_processes or 1) > 1 or args.accelerate_config:
        from grpo_fast.scale import launch

        rest = ([args.target] if args.target else []) + args.overrides
        rest += [flag for flag, on in (("--force", args.force), ("--dry-run", args.dry_run)) if on]
        return launch(rest, args.num_processes or 1, args.accelerate_config)
    target = args.target
    if args.resume and not target:
        target = str(run_of(Path(args.resume)) / "config.yaml")
    cfg = resolve_config(target, args.overrides)
    if args.dry_run:
        for stage in cfg.stage_list[1:]:
            prepare(stage.cfg, force=args.force, measure=False)
        prep = prepare(cfg.stage_list[0].cfg, force=args.force, measure=False)
        print("\n".join(prep.report))
        print("dry run: every check passed; no weights were loaded and nothing was written")
        return 0
    run = train(cfg, force=args.force, resume=args.resume, verbose=args.verbose)
    from grpo_fast.rundir import is_main_process

    if is_main_process():
        print(run.describe())
    return 0


def _plan(args: argparse.Namespace) -> int:
    from grpo_fast.models import gpu_memory_gb, model_source
    from grpo_fast.models.plan import estimate, plan_input, propose
    from grpo_fast.run.resolve import resolve_config

    cfg = resolve_config(args.target, args.overrides)
    card = args.card_gb or gpu_memory_gb()
    base = plan_input(cfg, model_source(cfg.model), card)
    print(f"model: {cfg.model} ({base.shape.n_params / 1e9:.2f} B parameters)")
    print(estimate(base).table())
    for size in [card] if card else [16, 24, 40, 80]:
        try:
            fit = propose(base.shape, size, base)
        except UserError as err:
            print(f"{size:>5g} GB: does not fit ({err.what})")
            continue
        print(f"{size:>5g} GB: num_generations={fit.num_generations} per_device_train_batch_size="
              f"{fit.per_device_train_batch_size} max_completion_length={fit.max_completion_length} "
              f"load_in_4bit={fit.load_in_4bit} -> {estimate(fit).total_gb:.1f} GiB")
    return 0


def _rewards_check(args: argparse.Namespace) -> int:
    from grpo_fast.recipes import NAMES, get_recipe, recipe_for_preset
    from grpo_fast.rewards.check import audit_gold, audit_line, run_check
    from grpo_fast.rewards.judge_checks import injection_check
    from grpo_fast.rewards.presets import PRESETS
    from grpo_fast.run.prepare import prepare, run_rewards
    from grpo_fast.run.programs import own_programs
    from grpo_fast.run.resolve import resolve_config

    key = args.target.lower().removesuffix("_rewards")
    if key in PRESETS and args.target not in NAMES:
        recipe = recipe_for_preset(PRESETS[key])
        if recipe is None:
            raise UserError(f"no built-in recipe uses preset {args.target!r}", "rewards check",
                            "check it through a recipe or a YAML file that names it")
        cfg, rewards = resolve_config(recipe.name), PRESETS[key]
        own = own_programs(recipe, cfg, rewards, args.programs)  # a bad programs file stops before the slow part
        rows = recipe.rows(cfg)
        audit, unchecked = audit_gold(rewards, rows, recipe.gold), None
    else:
        cfg = resolve_config(args.target, args.overrides)
        recipe = get_recipe(cfg.recipe)
        own = own_programs(recipe, cfg, run_rewards(cfg, recipe), args.programs)
        prep = prepare(cfg, force=True, measure=False)
        rewards, rows, audit, recipe = prep.rewards, prep.train_rows, prep.gold, prep.recipe
        unchecked = prep.gold_unchecked
    print(unchecked or audit.summary(dropped=bool(audit.failures) and recipe.drop_failed_gold
                                     and not audit.mostly_failing))  # the line the training run prints
    if audit.mostly_failing:
        raise UserError(f"{len(audit.failures)} of {len(audit.checked)} reference solutions do not get full "
                        f"'{audit.reward}': the reward or the data is broken", args.target,
                        "see the reasons above; fix the tests or references of those rows, or the reward")
    if own is not None:
        print(own.summary())
    report = run_check(rewards, rows, gold=recipe.gold, probes=recipe.probes,
                       checks=(*recipe.checks, *([own.check] if own else []), injection_check(rows, recipe.gold)),
                       threshold=args.threshold,
                       max_rows=args.rows, no_gold="the programs below stand in" if own and own.right else None,
                       unchecked=unchecked and unchecked.removeprefix("gold self-test: not checked: "))
    if audit.checked:
        report.lines.insert(0, audit_line(audit))
    report.print()
    return 0 if report.ok else 1


def _eval(args: argparse.Namespace) -> int:
    from grpo_fast.evaluate import evaluate_run, format_table

    print(format_table(evaluate_run(args.run_dir, k=args.k, reuse_base=not args.fresh_base)["comparison"]))
    return 0


def _report(args: argparse.Namespace) -> int:
    from grpo_fast.watch.report import write_report

    print(write_report(args.run_dir))
    return 0


def _health(args: argparse.Namespace) -> int:
    from grpo_fast.run.resolve import parse_overrides
    from grpo_fast.watch.health import health

    replay = health(args.run, on_alarm=args.on_alarm, **parse_overrides(args.thresholds))
    print(replay.text())
    return 1 if replay.warnings else 0


EXAMPLES = {
    "grpo-fast": """examples:
  grpo-fast train                                    the CPU demo: the embedded 135M model learns small sums
  grpo-fast train math model=Qwen/Qwen2.5-1.5B-Instruct max_steps=300
  grpo-fast recipes                                  what each recipe trains and with which rewards""",
    "train": """examples:
  grpo-fast train                                    the CPU demo on the embedded model (minutes)
  grpo-fast train math model=Qwen/Qwen2.5-1.5B-Instruct max_steps=300 learning_rate=5e-6
  grpo-fast train recipes/qa.yaml dataset=my_kb.csv --dry-run
  grpo-fast train --resume runs/demo-20261203-101500""",
    "plan": """examples:
  grpo-fast plan math model=Qwen/Qwen2.5-7B-Instruct           fits 16/24/40/80 GB cards?
  grpo-fast plan recipes/code.yaml --card-gb 24""",
    "eval": """examples:
  grpo-fast eval runs/demo-20261203-101500
  grpo-fast eval runs/math-20261203-101500 --k 8""",
    "report": """example:
  grpo-fast report runs/demo-20261203-101500         then open runs/demo-20261203-101500/report.html""",
    "health": """examples:
  grpo-fast health runs/demo-20261203-101500         the run's alarms, replayed with the current rules
  grpo-fast health tests/watch/health_corpus/clipped --on-alarm stop
  grpo-fast health outputs/checkpoint-500/trainer_state.json   any TRL GRPO run""",
    "check": """examples:
  grpo-fast rewards check math_reasoning             a preset on its recipe's sample rows
  grpo-fast rewards check recipes/qa.yaml dataset=my_kb.csv --rows 16
  grpo-fast rewards check code dataset=lcb.jsonl --programs my_solutions.jsonl   data without references""",
    "recipes": """example:
  grpo-fast recipes""",
    "export": """examples:
  grpo-fast export runs/demo-20261203-101500 --format adapter
  grpo-fast export runs/math-20261203-101500 --format merged --out my-model --push-to-hub me/my-model""",
    "chat": """example:
  grpo-fast chat runs/demo-20261203-101500 --temperature 0""",
    "generate": """example:
  grpo-fast generate runs/demo-20261203-101500 --prompts questions.txt --out answers.jsonl""",
    "doctor": """examples:
  grpo-fast doctor
  grpo-fast doctor --json --bf16""",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' layout and shows each option's default where it has a meaningful one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS, []) and "default" not in text \
                and action.option_strings:
            text += " (default: %(default)s)"
        return text


class KitParser(argparse.ArgumentParser):
    """Every command: the shared formatter, its examples, and -v/--verbose accepted anywhere on the line."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        if self.epilog is None:
            self.epilog = EXAMPLES.get(self.prog.split()[-1])
        self.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                          help="show library logs (transformers, TRL) and warnings")


def _recipes(args: argparse.Namespace) -> int:
    from grpo_fast.recipes import all_recipes

    for recipe in all_recipes():
        rewards = ", ".join(f"{n} x{w:g}" for n, w in zip(recipe.rewards.names, recipe.rewards.weights))
        print(f"{recipe.name:<14} {recipe.description}\n{'':<14} rewards: {rewards}; judge: "
              f"{recipe.rewards.correctness}; evaluated by {recipe.metric}")
    print("\ntrain one: grpo-fast train RECIPE [key=value ...]; its YAML to copy: recipes/RECIPE.yaml")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = KitParser(prog="grpo-fast", description="Unsloth-first GRPO fine-tuning on TRL.")
    parser.set_defaults(verbose=False)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=KitParser, metavar="COMMAND",
                                help="run `grpo-fast COMMAND --help` for its options and examples")
    train = sub.add_parser("train", help="train a recipe or a YAML config (no argument: the CPU demo)")
    train.add_argument("target", nargs="?",
                       help="recipe name (`grpo-fast recipes` lists them) or a YAML file; none: the demo")
    train.add_argument("overrides", nargs="*", help="key=value overrides of any config or GRPOConfig key")
    train.add_argument("--dry-run", action="store_true", help="check config, data, rewards and memory; load no weights")
    train.add_argument("--force", action="store_true", help="train even if the reward gold self-test fails")
    train.add_argument("--num-processes", type=int, default=None, metavar="N",
                       help="train on N processes (torchrun; GPUs, or gloo on CPU)")
    train.add_argument("--accelerate-config", default=None, metavar="NAME|FILE",
                       help="ddp | zero2 | zero3 | fsdp | a YAML file: launch with accelerate")
    train.add_argument("--resume", metavar="RUN_DIR|CHECKPOINT",
                       help="continue a run from its newest complete checkpoint (or the one named)")
    train.add_argument("--help-config", action="store_true",
                       help="list every config key (and TRL's GRPOConfig fields) with its default and help")
    train.set_defaults(func=_train)

    plan = sub.add_parser("plan", help="estimate peak GPU memory and propose settings per card size")
    plan.add_argument("target", nargs="?", help="recipe name or YAML file")
    plan.add_argument("overrides", nargs="*", help="key=value overrides")
    plan.add_argument("--card-gb", type=float, default=None,
                      help="plan for this card only, in GB (default: this GPU, or 16/24/40/80 without one)")
    plan.set_defaults(func=_plan)

    evaluate = sub.add_parser("eval", help="base vs trained on the run's held-out rows (writes eval.json)")
    evaluate.add_argument("run_dir", help="a run directory (runs/<recipe>-<time>) with a trained adapter")
    evaluate.add_argument("--k", type=int, default=None, help="k of pass@k (default: the run's eval_k)")
    evaluate.add_argument("--fresh-base", action="store_true",
                          help="evaluate the base model again, even where an identical evaluation is kept")
    evaluate.set_defaults(func=_eval)

    report = sub.add_parser("report", help="write the run's self-contained report.html")
    report.add_argument("run_dir", help="a run directory, finished or not")
    report.set_defaults(func=_report)

    replay = sub.add_parser("health", help="replay a run's logged metrics through the health monitor; exit 1 on a "
                                           "warning")
    replay.add_argument("run", help="a run directory, a metrics.jsonl, or a TRL trainer_state.json (or its folder)")
    replay.add_argument("thresholds", nargs="*", help="health threshold overrides, e.g. window=3 max_kl=1.0")
    replay.add_argument("--on-alarm", choices=["warn", "stop"], default="warn",
                        help="stop: also say at which step on_alarm: stop would have stopped the run")
    replay.set_defaults(func=_health)

    rewards = sub.add_parser("rewards", help="reward tools")
    rewards_sub = rewards.add_subparsers(dest="rewards_command", required=True, help="check: gold self-test and probes")
    check = rewards_sub.add_parser("check", help="gold self-test and reward-hacking probes; exit 1 on failure")
    check.add_argument("target", help="preset (math_reasoning, code_generation, qa, summarization), recipe or YAML")
    check.add_argument("overrides", nargs="*", help="key=value overrides (recipe/YAML targets)")
    check.add_argument("--threshold", type=float, default=0.5, help="flag probes above this share of the maximum")
    check.add_argument("--rows", type=int, default=8, help="dataset rows to build gold completions and probes from")
    check.add_argument("--programs", metavar="FILE", default=None,
                       help='JSONL of your own programs, one per line: {"row": N or "id": ID, "program": SOURCE, '
                            '"expect": SCORE (default full marks)}; each must get its expected score (data without '
                            'reference solutions). Default: <dataset>.programs.jsonl beside a local dataset file')
    check.set_defaults(func=_rewards_check)

    recipes = sub.add_parser("recipes", help="list the recipes: what each trains, its rewards and judge")
    recipes.set_defaults(func=_recipes)

    from grpo_fast import doctor, export, infer

    for module in (export, infer, doctor):
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "target", None) and "=" in args.target:  # `grpo-fast train max_steps=5`: no target, only overrides
        args.overrides.insert(0, args.target)
        args.target = None
    quiet_libraries(args.verbose)
    try:
        return args.func(args)
    except UserError as err:
        print(str(err), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
