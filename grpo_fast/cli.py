"""The ``grpo-fast`` command: a thin shell over the Python API of the same names."""

from __future__ import annotations

import argparse
import sys

from grpo_fast import quiet_libraries
from grpo_fast.errors import UserError


def describe_keys(include_grpo: bool = True) -> str:
    """Every key with its type, default and help: the text of ``grpo-fast train --help-config``."""
    from dataclasses import MISSING, fields

    from pydantic import BaseModel

    from grpo_fast import grpo_args
    from grpo_fast.config import HealthSettings, RewardSpec, RunConfig

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
    from grpo_fast.prepare import prepare
    from grpo_fast.resolve import resolve_config
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
        from pathlib import Path

        target = str(run_of(Path(args.resume)) / "config.yaml")
    cfg = resolve_config(target, args.overrides)
    if args.dry_run:
        for stage in cfg.stage_list[1:]:
            prepare(stage.cfg, force=args.force)
        prep = prepare(cfg.stage_list[0].cfg, force=args.force)
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
    from grpo_fast.plan import estimate, plan_input, propose
    from grpo_fast.resolve import resolve_config

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
    from grpo_fast.recipes import NAMES, recipe_for_preset
    from grpo_fast.rewards.check import run_check
    from grpo_fast.rewards.presets import PRESETS

    key = args.target.lower().removesuffix("_rewards")
    if key in PRESETS and args.target not in NAMES:
        recipe = recipe_for_preset(PRESETS[key])
        if recipe is None:
            raise UserError(f"no built-in recipe uses preset {args.target!r}", "rewards check",
                            "check it through a recipe or a YAML file that names it")
        from grpo_fast.resolve import resolve_config

        rewards, rows = PRESETS[key], recipe.rows(resolve_config(recipe.name))
    else:
        from grpo_fast.prepare import prepare
        from grpo_fast.resolve import resolve_config

        prep = prepare(resolve_config(args.target, args.overrides), force=True)
        recipe, rewards, rows = prep.recipe, prep.rewards, prep.train_rows
    report = run_check(rewards, rows, gold=recipe.gold, probes=recipe.probes, threshold=args.threshold,
                       max_rows=args.rows)
    report.print()
    return 0 if report.ok else 1


def _eval(args: argparse.Namespace) -> int:
    from grpo_fast.evaluate import evaluate_run, format_table

    print(format_table(evaluate_run(args.run_dir, k=args.k)["comparison"]))
    return 0


def _report(args: argparse.Namespace) -> int:
    from grpo_fast.report import write_report

    print(write_report(args.run_dir))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-fast", description="Unsloth-first GRPO fine-tuning on TRL.")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library logs")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="train a recipe or a YAML config (no argument: the CPU demo)")
    train.add_argument("target", nargs="?", help="recipe name (demo, math, code, qa, summarization) or a YAML file")
    train.add_argument("overrides", nargs="*", help="key=value overrides of any config or GRPOConfig key")
    train.add_argument("--dry-run", action="store_true", help="check config, data, rewards and memory; load no weights")
    train.add_argument("--force", action="store_true", help="train even if the reward gold self-test fails")
    train.add_argument("--num-processes", type=int, default=None,
                       help="train on N processes (torchrun; GPUs, or gloo on CPU)")
    train.add_argument("--accelerate-config", default=None,
                       help="ddp | zero2 | zero3 | fsdp | a YAML file: launch with accelerate")
    train.add_argument("--resume", metavar="RUN_DIR|CHECKPOINT",
                       help="continue a run from its newest complete checkpoint (or the one named)")
    train.add_argument("--help-config", action="store_true",
                       help="list every config key (and TRL's GRPOConfig fields) with its default and help")
    train.set_defaults(func=_train)

    plan = sub.add_parser("plan", help="estimate peak GPU memory and propose settings per card size")
    plan.add_argument("target", nargs="?", help="recipe name or YAML file")
    plan.add_argument("overrides", nargs="*", help="key=value overrides")
    plan.add_argument("--card-gb", type=float, default=None, help="plan for this card only (GB)")
    plan.set_defaults(func=_plan)

    evaluate = sub.add_parser("eval", help="base vs trained on the run's held-out rows (writes eval.json)")
    evaluate.add_argument("run_dir")
    evaluate.add_argument("--k", type=int, default=None, help="k of pass@k (default: the run's eval_k)")
    evaluate.set_defaults(func=_eval)

    report = sub.add_parser("report", help="write the run's self-contained report.html")
    report.add_argument("run_dir")
    report.set_defaults(func=_report)

    rewards = sub.add_parser("rewards", help="reward tools")
    rewards_sub = rewards.add_subparsers(dest="rewards_command", required=True)
    check = rewards_sub.add_parser("check", help="gold self-test and reward-hacking probes; exit 1 on failure")
    check.add_argument("target", help="preset (math_reasoning, code_generation, qa, summarization), recipe or YAML")
    check.add_argument("overrides", nargs="*", help="key=value overrides (recipe/YAML targets)")
    check.add_argument("--threshold", type=float, default=0.5, help="flag probes above this share of the maximum")
    check.add_argument("--rows", type=int, default=8, help="dataset rows to build gold completions and probes from")
    check.set_defaults(func=_rewards_check)

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
