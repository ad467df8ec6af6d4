"""Checkpoints a resume can trust, and where a resume continues (single- and multi-stage runs).

A checkpoint counts as complete only when its manifest (file sizes and checksums, written by
``ManifestWriter`` after the Trainer saved it) matches the files on disk, so a checkpoint torn by kill -9,
a full disk or a bad copy is skipped with a message naming it, and the one before it is used.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback  # noqa: TID253  # subclassed here: this module loads after Unsloth

from grpo_fast import rundir
from grpo_fast.errors import UserError
from grpo_fast.files import read_json, read_jsonl, write_json, write_jsonl

CHECKPOINTS = "checkpoints"
STAGES = "stages"
MANIFEST = "grpo_fast_manifest.json"
STAGE_DONE = "stage_done.json"
STEP_LOGS = ("metrics.jsonl", "samples.jsonl", "health.jsonl", "reward_failures.jsonl")
HASH_LIMIT = 512 * 2**20  # files above this are checked by size and header, not hashed (multi-GB optimizer states)


def step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.rsplit("-", 1)[1])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(checkpoint: Path) -> None:
    """Record every file's size (and checksum, when small enough) once the checkpoint is fully written."""
    files = {}
    for path in sorted(p for p in checkpoint.rglob("*") if p.is_file() and p.name != MANIFEST):
        size = path.stat().st_size
        files[str(path.relative_to(checkpoint))] = {"size": size,
                                                    "sha256": _sha256(path) if size <= HASH_LIMIT else None}
    write_json(checkpoint / MANIFEST, {"step": step_of(checkpoint), "files": files})


def problem(checkpoint: Path) -> str | None:
    """Why ``checkpoint`` cannot be resumed from, or None when every recorded file is whole."""
    manifest = read_json(checkpoint / MANIFEST)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return f"no {MANIFEST} (the save did not finish)"
    for name, meta in manifest["files"].items():
        path = checkpoint / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != meta.get("size"):
            return f"{name} has {path.stat().st_size} bytes, {meta.get('size')} were written"
        if meta.get("sha256") and _sha256(path) != meta["sha256"]:
            return f"{name} is damaged (checksum differs)"
    state = read_json(checkpoint / "trainer_state.json")
    if not isinstance(state, dict) or state.get("global_step") != step_of(checkpoint):
        return "trainer_state.json is missing or names another step"
    return None


def complete(folder: Path) -> list[Path]:
    """Complete checkpoints under ``folder`` (a Trainer output_dir), oldest first."""
    found = [p for p in Path(folder).glob("checkpoint-*") if p.name.rsplit("-", 1)[1].isdigit()]
    return sorted((p for p in found if problem(p) is None), key=step_of)


def newest(folder: Path) -> Path | None:
    """The newest complete checkpoint; damaged newer ones are named on stdout and skipped."""
    found = sorted((p for p in Path(folder).glob("checkpoint-*") if p.name.rsplit("-", 1)[1].isdigit()),
                   key=step_of, reverse=True)
    for checkpoint in found:
        why = problem(checkpoint)
        if why is None:
            return checkpoint
        print(f"skipping {checkpoint}: {why}", flush=True)
    return None


class ManifestWriter(TrainerCallback):
    """After each save, write the manifest that makes the checkpoint count as complete."""

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if checkpoint.is_dir():
                write_manifest(checkpoint)


# --------------------------------------------------------------------------- where a run continues


def output_dir(run_dir: Path, stage: str | None) -> Path:
    """The Trainer output_dir of a stage (``None``: a single-stage run)."""
    return run_dir / STAGES / stage / CHECKPOINTS if stage else run_dir / CHECKPOINTS


def stage_dir(run_dir: Path, stage: str) -> Path:
    return run_dir / STAGES / stage


def mark_stage_done(run_dir: Path, stage: str, steps: int, model: Any) -> None:
    """Save the stage's final weights and mark it done: a resume starts the next stage from them."""
    folder = stage_dir(run_dir, stage)
    model.save_pretrained(str(folder / "weights"))
    write_json(folder / STAGE_DONE, {"stage": stage, "steps": steps})


@dataclass
class ResumePoint:
    """Where a run continues: the stage to run next, its checkpoint (or None: start it from the previous
    stage's weights), the steps already taken before it, and the weights to start from."""

    run_dir: Path
    stage: int = 0
    checkpoint: Path | None = None
    offset: int = 0
    weights: Path | None = None

    @property
    def step(self) -> int:
        """Global step the run continues after (log lines past it are dropped)."""
        return self.offset + (step_of(self.checkpoint) if self.checkpoint else 0)

    def describe(self, names: list[str]) -> str:
        where = f"from {self.checkpoint.name}" if self.checkpoint else "from its start"
        stage = f" at stage {names[self.stage]}" if len(names) > 1 else ""
        return f"resuming {self.run_dir}{stage} {where}"


def resume_point(path: str | Path, stages: list[str] | None = None) -> ResumePoint:
    """``--resume``: a run directory (its newest complete checkpoint, stage by stage) or one checkpoint folder.

    ``stages``: the run's stage names in order (None: a single-stage run)."""
    path = Path(path).expanduser()
    chosen = None
    if path.name.startswith("checkpoint-"):
        why = problem(path) if path.is_dir() else "no such folder"
        if why:
            raise UserError(f"{path} is not a complete checkpoint: {why}", str(path),
                            "resume from the run directory to take its newest complete checkpoint")
        chosen, path = path, next((p for p in path.parents if (p / rundir.CONFIG).is_file()), path.parent)
    if not (path / rundir.CONFIG).is_file():
        raise UserError(f"{path} is not a grpo_fast run directory (no {rundir.CONFIG})", "--resume",
                        "pass a run directory such as runs/demo-20261202-101500, or one of its checkpoints")
    names: list[str | None] = list(stages) if stages else [None]
    offset, weights = 0, None
    for index, name in enumerate(names):
        folder = output_dir(path, name)
        done = read_json(stage_dir(path, name) / STAGE_DONE) if name else None
        if chosen is not None:
            if chosen.parent != folder:
                offset += int(done.get("steps", 0)) if isinstance(done, dict) else 0
                continue
            return ResumePoint(path, index, chosen, offset)
        if isinstance(done, dict) and (stage_dir(path, name) / "weights").is_dir():
            offset, weights = offset + int(done.get("steps", 0)), stage_dir(path, name) / "weights"
            continue
        checkpoint = newest(folder)
        if checkpoint is not None or weights is not None:
            return ResumePoint(path, index, checkpoint, offset, None if checkpoint else weights)
        raise UserError(f"{path} has no complete checkpoint to resume from", str(folder),
                        "checkpoints are written every save_steps steps; start a new run instead")
    if chosen is not None:
        raise UserError(f"{chosen} belongs to no stage of this run's config", str(chosen),
                        "resume from the run directory instead")
    raise UserError(f"every stage of {path} is done: nothing to resume", str(path),
                    "the run finished its stages; evaluate it (grpo-fast eval) or start a new run")


def truncate_step_logs(run_dir: Path, step: int) -> None:
    """Drop log lines past ``step``, so a resumed run has no duplicate or orphan steps."""
    for name in STEP_LOGS:
        path = Path(run_dir) / name
        if path.exists():
            write_jsonl(path, [r for r in read_jsonl(path) if r.get("step", 0) <= step])
