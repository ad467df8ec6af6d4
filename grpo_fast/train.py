"""Train: the pipeline, top to bottom.

resolve the config -> prepare data and rewards (and plan memory) -> load the model -> train each stage with
TRL's GRPOTrainer -> save the adapter and the run's files -> evaluate base vs trained -> write the report.
Each step is a function in the module that owns its concept; this module only puts them in order.
"""

from __future__ import annotations

import errno
import math
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetensors import SafetensorError

from grpo_fast import models, rundir, scale
from grpo_fast.config import RunConfig
from grpo_fast.entry import make_callable, quiet_libraries
from grpo_fast.errors import UserError
from grpo_fast.evaluate import evaluate_run, format_table
from grpo_fast.files import read_jsonl, read_yaml, write_json, write_jsonl, write_yaml
from grpo_fast.models.completions import generate
from grpo_fast.models.thinking import for_run
from grpo_fast.rewards import score_rows
from grpo_fast.run.prepare import Prepared, prepare
from grpo_fast.run.resolve import resolve_config
from grpo_fast.run.stages import run_stage
from grpo_fast.tools.chat import use_tool_template
from grpo_fast.watch import trackers
from grpo_fast.watch.plots import plot_rewards
from grpo_fast.watch.report import write_report

if TYPE_CHECKING:  # run.checkpoints imports transformers: it loads after resolve_config has imported Unsloth
    from grpo_fast.run.checkpoints import ResumePoint

# Keys a checkpoint depends on: resuming with another value would train a different model.
RESUME_KEYS = ("recipe", "model", "lora", "lora_r", "lora_alpha", "lora_target_modules", "num_generations",
               "per_device_train_batch_size", "gradient_accumulation_steps", "seed", "stages")


def train(config: str | RunConfig | None = None, *, force: bool = False, resume: str | Path | None = None,
          verbose: bool = False, **overrides: Any) -> rundir.Run:
    """Train a recipe name, a YAML file or a RunConfig, with ``overrides`` of any key; evaluate; report.

        run = grpo_fast.train("demo", max_steps=30)
        run = grpo_fast.train("recipes/math.yaml", model="Qwen/Qwen2.5-1.5B-Instruct", learning_rate=5e-6)
        run = grpo_fast.train(resume="runs/demo-20261203-101500")

    Returns the run (``run.summary``, ``run.evaluation``, ``run.report``, ``run.adapter``, ``run.describe()``).
    ``force``: train even if the reward gold self-test fails. ``resume``: a run directory (its newest complete
    checkpoint, stage by stage) or a checkpoint folder; optimizer, scheduler, RNG and data position come back.
    The run directory is created only after every check passed; nothing in a resumed one changes before its
    checkpoint has loaded. Bad input raises ``UserError`` (what, where, how to fix).
    """
    quiet_libraries(verbose)
    if resume is not None and config is None:
        config = str(run_of(Path(resume)) / rundir.CONFIG)
    cfg = config if isinstance(config, RunConfig) and not overrides else resolve_config(config, overrides)
    from grpo_fast.run import checkpoints
    stages = cfg.stage_list
    staged = cfg.stages is not None
    point = checkpoints.resume_point(resume, [s.name for s in stages] if staged else None) if resume else None
    if point is not None:
        cfg.run_dir = str(point.run_dir)
    preps = [prepare(stage.cfg, force=force) for stage in stages]  # every stage checked before any weights
    if staged:  # config.yaml records the thinking mode the stages found (chat and generate read it)

        for_run(cfg, preps[0].tokenizer)
    main = rundir.is_main_process()
    if main:
        print("\n".join(preps[0].report), flush=True)
    loaded = models.load_model(cfg, announce=False)  # the report above named the backend
    if preps[0].tools is not None:
        use_tool_template(loaded.tokenizer, cfg.model)  # as prepare did on its own tokenizer (and said so)
    if cfg.difficulty_filter:
        difficulty_filter(preps, loaded, cfg.difficulty_filter)
    try:
        run_dir = open_run_dir(cfg, preps[0], point)
    except WRITE_ERRORS as err:  # the run's first files: nothing to resume yet
        raise write_error(err, Path(cfg.run_dir)) from None
    start, steps, done, results = time.time(), 0, 0, []
    try:
        for index, (stage, prep) in enumerate(zip(stages, preps)):
            if point and index < point.stage:
                continue
            resuming = point is not None and index == point.stage
            if resuming and point.weights is not None:
                models.load_weights(loaded.model, point.weights)
            if staged and main:
                print(f"stage {stage.name}: {'SFT warm-up' if stage.sft else 'GRPO'}", flush=True)
            offset = point.offset if resuming else steps
            result = run_stage(stage, prep, loaded, run_dir, staged=staged, offset=offset,
                               checkpoint=point.checkpoint if resuming else None,
                               resume_step=point.step if resuming else None)
            steps = offset + result.steps
            done += result.steps - (checkpoints.step_of(point.checkpoint) if resuming and point.checkpoint else 0)
            results.append(result)
            if staged and main:
                checkpoints.mark_stage_done(run_dir, stage.name, result.steps, loaded.model)
            if result.stopped and cfg.on_alarm == "stop":
                break
    except WRITE_ERRORS as err:
        raise write_error(err, run_dir) from None
    scale.release_workers()
    wall = time.time() - start
    first, last = reward_span(run_dir)
    summary = {"run_dir": str(run_dir), "steps": steps, "reward_first": first, "reward_last": last,
               "reward_max": preps[-1].rewards.max_total, "wall_s": wall, "s_per_step": wall / max(1, done),
               "backend": loaded.backend.name, "trackers": trackers.where(cfg, run_dir),
               "health": [r.monitor.summary() for r in results if r.monitor],
               "cpu_choices": next((r.cpu_choices for r in results if r.cpu_choices), None),
               "sandbox": preps[0].sandbox,
               "judges": {f.__name__: f.stats() for p in preps for f in p.rewards.funcs if hasattr(f, "take_failures")}}
    if main:
        try:
            save_run(run_dir, cfg, loaded, summary)
            if cfg.evaluate:
                finish_with_evaluation(run_dir)
        except WRITE_ERRORS as err:
            raise write_error(err, run_dir) from None
        finally:
            scale.leave_group()
    return rundir.Run.open(run_dir)


def run_of(path: Path) -> Path:
    """The run directory of a run directory or of one of its checkpoints."""
    return next((p for p in (path, *path.parents) if (p / rundir.CONFIG).is_file()), path)


def open_run_dir(cfg: RunConfig, prep: Prepared, point: ResumePoint | None) -> Path:
    """A new run directory with config.yaml, versions.json and the held-out rows; or the one being resumed,
    checked against the config (nothing in it changes until the checkpoint has loaded)."""
    if point is not None:
        check_resumable(cfg, point.run_dir)
        print(point.describe([s.name for s in cfg.stage_list]), flush=True)
        return point.run_dir
    run_dir = rundir.new_run_dir(cfg.run_dir, prep.recipe.name)
    if rundir.is_main_process():
        write_yaml(run_dir / rundir.CONFIG, cfg.to_dict())
        write_json(run_dir / "versions.json", rundir.versions())
        write_jsonl(run_dir / rundir.HELDOUT, prep.eval_rows)
    return run_dir


def check_resumable(cfg: RunConfig, run_dir: Path) -> None:
    """Refuse a checkpoint whose run used another model or training shape."""
    saved = read_yaml(run_dir / rundir.CONFIG)
    now = cfg.to_dict()
    diffs = [f"{k}: checkpoint {saved.get(k)!r}, now {now.get(k)!r}" for k in RESUME_KEYS if saved.get(k) != now.get(k)]
    if diffs:
        raise UserError("the checkpoint comes from a run with another model or config:\n  " + "\n  ".join(diffs),
                        str(run_dir / rundir.CONFIG), "resume with that run's config, or start a new run")


def difficulty_filter(preps: list[Prepared], loaded: models.LoadedModel, k: int) -> None:
    """Sample k completions per prompt with the base model; drop prompts solved always or never (no signal)."""
    prep = preps[0]
    rows, args, rewards = prep.train_rows, prep.cfg.args, prep.rewards
    groups = generate(loaded.model, loaded.tokenizer, [r["prompt"] for r in rows], n=k, greedy=False,
                      max_new_tokens=args.max_completion_length, temperature=args.temperature,
                      chat_template_kwargs=prep.thinking.kwargs)  # the prompts as training renders them
    kept, always, never = [], 0, 0
    for row, group in zip(rows, groups):
        scores = score_rows(rewards.judge, [row] * k, [text for text, _ in group])
        solved = sum(1 for x in scores if x is not None and x >= rewards.correctness_max - 1e-9)
        always += solved == k
        never += solved == 0
        if 0 < solved < k:
            kept.append(row)
    line = (f"difficulty filter (k={k}): kept {len(kept)} of {len(rows)} prompts; "
            f"{always} always solved, {never} never solved")
    print(line, flush=True)
    if not kept:
        raise UserError(line + ": nothing left to learn from", prep.cfg.where("difficulty_filter"),
                        "set difficulty_filter: 0, or use an easier/harder dataset or a larger k")
    for each in preps:
        each.train_rows = kept
        each.report.append(line)


def reward_span(run_dir: Path) -> tuple[float, float]:
    """Mean total reward of the first 5 and the last 5 logged steps."""
    rewards = [m["reward"] for m in read_jsonl(run_dir / "metrics.jsonl")
               if m.get("reward") is not None and not math.isnan(m["reward"])]
    return sum(rewards[:5]) / max(1, len(rewards[:5])), sum(rewards[-5:]) / max(1, len(rewards[-5:]))


def save_run(run_dir: Path, cfg: RunConfig, loaded: models.LoadedModel, summary: dict[str, Any]) -> None:
    """The trained adapter (swapped in whole), the reward curve, then summary.json: the run is finished."""
    tmp, adapter = run_dir / ".adapter.tmp", run_dir / rundir.ADAPTER
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        loaded.model.save_pretrained(str(tmp))
        loaded.tokenizer.save_pretrained(str(tmp))
        if adapter.exists():
            shutil.rmtree(adapter)
        tmp.replace(adapter)
    except WRITE_ERRORS as err:
        raise write_error(err, run_dir) from None
    plot_rewards(read_jsonl(run_dir / "metrics.jsonl"), run_dir / "reward_curve.png",
                 f"grpo_fast {cfg.recipe}: reward per step", summary["reward_max"])
    write_json(run_dir / rundir.SUMMARY, summary)


# What a failed write raises: OSError; torch.save's RuntimeError; safetensors' SafetensorError (an Exception).
WRITE_ERRORS = (OSError, RuntimeError, SafetensorError)
# torch.save's words for a write the disk cut short: its zip writer says "unexpected pos N vs M" when the disk is
# full (torch 2.13, on a full tmpfs), its file writer "write failed" or "failed writing"
TORCH_SAVE_SHORT_WRITE = ("write failed", "failed writing", "unexpected pos")


def write_error(err: Exception, run_dir: Path) -> Exception:
    """A failed write (disk full, no permission) as one message: the path, what it needs, what is intact.
    Any other error is returned as it is (a bug, not the user's disk)."""
    code = getattr(err, "errno", None)
    if isinstance(err, SafetensorError):  # "I/O error: No space left on device (os error 28)"
        found = re.search(r"os error (\d+)|code: (\d+)", str(err))
        code = int(found.group(1) or found.group(2)) if found else None
    if isinstance(err, RuntimeError) and any(words in str(err) for words in TORCH_SAVE_SHORT_WRITE):
        code = errno.ENOSPC if shutil.disk_usage(run_dir).free < 64 * 2**20 else errno.EIO
    if code not in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO):
        return err
    from grpo_fast.run import checkpoints

    target = getattr(err, "filename", None) or run_dir
    free = shutil.disk_usage(run_dir if run_dir.exists() else Path.cwd()).free / 2**20
    newest = sorted((c for folder in [run_dir / checkpoints.CHECKPOINTS,
                                      *run_dir.glob(f"{checkpoints.STAGES}/*/{checkpoints.CHECKPOINTS}")]
                     for c in checkpoints.complete(folder)), key=lambda c: c.stat().st_mtime)
    kept = (f"; checkpoints up to {newest[-1].name} are intact and `grpo-fast train --resume {run_dir}` continues "
            "from there" if newest else "; no checkpoint was saved yet: start the run again")
    if code in (errno.ENOSPC, errno.EDQUOT):
        need = sum(p.stat().st_size for p in newest[-1].rglob("*") if p.is_file()) if newest else 0
        size = f" (a checkpoint takes about {need / 2**20:.1f} MiB)" if need else ""
        return UserError(f"the disk is full: cannot write {target} ({free:.1f} MiB free){size}", str(target),
                         f"free space or choose another run_dir{kept}")
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return UserError(f"no permission to write {target}: {getattr(err, 'strerror', err)}", str(target),
                         f"make the folder writable or choose another run_dir{kept}")
    if code == errno.EIO:
        return UserError(f"cannot write {target}: {err}", str(target), f"check the disk{kept}")
    return err


def finish_with_evaluation(run_dir: Path) -> None:
    """Base vs trained on the held-out rows (eval.json), then report.html; printed as a small table."""
    evaluation = evaluate_run(run_dir)
    print("held-out evaluation, base vs trained:\n" + format_table(evaluation["comparison"]), flush=True)
    print(f"report: {write_report(run_dir)}", flush=True)


make_callable(__name__, train)
