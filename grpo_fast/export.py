"""Export a finished run: the LoRA adapter, a merged 16-bit model with a model card, or GGUF.

    grpo-fast export runs/demo-... --format merged --out my-model

Every format is written into a temporary folder beside the destination and renamed into place, so an
interrupted export never leaves a complete-looking model behind. Merged weights keep float32 on CPU (the
numbers are then exactly base + adapter) and use bf16 (fp16 on pre-Ampere GPUs) on CUDA; ``--dtype`` overrides.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from grpo_fast.entry import make_callable, quiet_libraries
from grpo_fast.errors import UserError
from grpo_fast.models import cuda_available
from grpo_fast.run.prepare import run_rewards
from grpo_fast.run.resolve import resolve_config
from grpo_fast.rundir import Run, path_of

log = logging.getLogger("grpo_fast.export")

FORMATS = ("adapter", "merged", "gguf")
DTYPES = ("auto", "fp32", "bf16", "fp16")
# Unsloth's ALLOWED_QUANTS (unsloth/save.py), which mirror llama.cpp's quantize types.
GGUF_QUANTS = (
    "not_quantized", "fast_quantized", "quantized", "f32", "bf16", "f16", "q8_0", "q4_k_m", "q5_k_m", "q2_k",
    "q3_k_l", "q3_k_m", "q3_k_s", "q4_0", "q4_1", "q4_k_s", "q4_k", "q5_k", "q5_0", "q5_1", "q5_k_s", "q6_k",
    "q3_k_xs",
)
HUB_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


# --------------------------------------------------------------------------- model card


def _reward_lines(info: Run) -> list[str]:
    """The rewards the run really trained with: its config resolved as training resolved it."""
    try:
        rewards = run_rewards(resolve_config(str(info.path / "config.yaml")))
        names, weights = rewards.names, rewards.weights
    except Exception as err:  # a recipe that no longer imports must not block an export
        log.warning("could not list the run's rewards: %s", err)
        names, weights = [], []
    return [f"- `{n}` (weight {w:g})" for n, w in zip(names, weights)] or ["- (unknown)"]


def _eval_table(data: Any) -> list[str]:
    """eval.json as a before/after table: grpo_fast.evaluate's ``comparison`` rows, ``before``/``after`` maps,
    or any list of rows."""
    if isinstance(data, dict) and isinstance(data.get("comparison"), list):
        lines = ["| metric | base model | trained | delta |", "|---|---|---|---|"]
        for row in data["comparison"]:
            delta = row.get("delta")
            lines.append(f"| {row.get('metric')} | {_fmt(row.get('base'))} | {_fmt(row.get('trained'))} | "
                         + (f"{delta:+.3g}" if isinstance(delta, (int, float)) else _fmt(delta)) + " |")
        settings = data.get("settings") or {}
        if settings:
            lines += ["", "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items())]
        return lines
    if isinstance(data, dict) and isinstance(data.get("before"), dict) and isinstance(data.get("after"), dict):
        before, after = data["before"], data["after"]
        lines = ["| metric | before | after |", "|---|---|---|"]
        for key in list(dict.fromkeys([*before, *after])):
            lines.append(f"| {key} | {_fmt(before.get(key))} | {_fmt(after.get(key))} |")
        return lines
    if isinstance(data, dict) and isinstance(data.get("metrics"), list):
        data = data["metrics"]
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        cols = list(dict.fromkeys(k for r in data for k in r))
        return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + [
            "| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in data]
    return ["```json", json.dumps(data, indent=2, default=str), "```"]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def model_card(info: Run, fmt: str, extra: dict[str, Any] | None = None) -> str:
    """README.md for an exported model: base model, recipe, rewards, hyperparameters, evaluation, versions."""
    base = info.base_model_name()
    meta = {"base_model": base, "library_name": "peft" if fmt == "adapter" else "transformers",
            "tags": ["grpo", "trl", "grpo_fast", *(["gguf"] if fmt == "gguf" else [])]}
    hyper = {k: v for k, v in info.config.items() if k not in ("source",) and not isinstance(v, dict)}
    lines = ["---", yaml.safe_dump(meta, sort_keys=False).strip(), "---", "",
             f"# {info.recipe} GRPO fine-tune of {base}", "",
             f"Trained with grpo_fast (GRPO on TRL), recipe `{info.recipe}`. "
             f"Format: **{fmt}**" + (f" ({extra['detail']})" if extra and extra.get("detail") else "") + ".", "",
             "## Base model", "", f"`{base}`", "", "## Rewards", "", *_reward_lines(info), ""]
    if info.summary:
        s = info.summary
        lines += ["## Training", "",
                  f"{s.get('steps')} steps, mean reward {_fmt(s.get('reward_first'))} -> {_fmt(s.get('reward_last'))}"
                  f" (max possible {_fmt(s.get('reward_max'))}), backend {s.get('backend')}.", ""]
    if info.evaluation is not None:
        lines += ["## Evaluation (held-out rows, before -> after training)", "", *_eval_table(info.evaluation), ""]
    lines += ["## Hyperparameters", "", "| key | value |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v) if not isinstance(v, list) else json.dumps(v)} |" for k, v in hyper.items()]
    lines += ["", "## Library versions", "", "| library | version |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in info.versions.items()]
    lines += ["", "## Use", ""]
    if fmt == "adapter":
        lines += ["```python", "from peft import AutoPeftModelForCausalLM",
                  "model = AutoPeftModelForCausalLM.from_pretrained('PATH_OR_REPO')", "```"]
    elif fmt == "merged":
        lines += ["```python", "from transformers import AutoModelForCausalLM, AutoTokenizer",
                  "model = AutoModelForCausalLM.from_pretrained('PATH_OR_REPO')", "```"]
    else:
        lines += ["```bash", "llama-cli -m model.gguf -cnv   # or: ollama create my-model -f Modelfile", "```"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the formats


def _torch_dtype(name: str) -> Any:
    import torch

    if name == "auto":
        if not cuda_available():
            return torch.float32
        return torch.bfloat16 if torch.cuda.get_device_capability(0)[0] >= 8 else torch.float16
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def merged_model(info: Run, dtype: str = "auto") -> tuple[Any, Any]:
    """Base model + the run's adapter, merged into plain weights (``merge_and_unload``)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = _torch_dtype(dtype)
    base = AutoModelForCausalLM.from_pretrained(info.base_model_path(), dtype=torch_dtype)
    model = PeftModel.from_pretrained(base, str(info.adapter)).merge_and_unload()
    model.to(torch_dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(info.adapter))
    return model, tokenizer


def _write_adapter(info: Run, tmp: Path) -> str:
    shutil.copytree(info.adapter, tmp, dirs_exist_ok=True)
    return "LoRA adapter; load it on top of the base model"


def _write_merged(info: Run, tmp: Path, dtype: str) -> str:
    model, tokenizer = merged_model(info, dtype)
    model.config.name_or_path = info.base_model_name()
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    return f"LoRA merged into the base weights, {str(model.dtype).replace('torch.', '')}"


def unsloth_gguf_ready() -> bool:
    return importlib.util.find_spec("unsloth") is not None and cuda_available()


def gguf_load_kwargs(info: Run) -> dict[str, Any]:
    """``FastLanguageModel.from_pretrained`` arguments for the GGUF export: the adapter folder (Unsloth loads
    its base model from adapter_config.json and merges)."""
    cfg = info.config
    return {"model_name": str(info.adapter), "max_seq_length": int(cfg.get("max_seq_length") or 1024),
            "load_in_4bit": bool(cfg.get("load_in_4bit"))}


def collect_gguf(result: Any, dest: Path) -> list[Path]:
    """Move the files ``save_pretrained_gguf`` reports into ``dest``.

    Unsloth writes GGUF files into a sibling folder ``<save_directory>_gguf`` and returns their paths in
    ``result["gguf_files"]`` (plus an Ollama ``Modelfile`` when it made one); nothing lands in the folder passed.
    """
    if not isinstance(result, dict) or not result.get("gguf_files"):
        raise RuntimeError(f"Unsloth's save_pretrained_gguf reported no GGUF files (returned {result!r})")
    moved = []
    for name in [*result["gguf_files"], result.get("modelfile_location")]:
        if not name:
            continue
        src = Path(name)
        if not src.is_file():
            raise RuntimeError(f"Unsloth reported {src}, which does not exist")
        target = dest / src.name
        shutil.move(str(src), target)
        moved.append(target)
    return moved


def _write_gguf(info: Run, tmp: Path, quant: str) -> str:
    """Unsloth merges the adapter and converts through llama.cpp (it builds llama.cpp on first use)."""
    from unsloth import FastLanguageModel

    model, tokenizer = FastLanguageModel.from_pretrained(**gguf_load_kwargs(info))
    work = tmp.parent / f"{tmp.name}-merge"  # the 16-bit merge; the GGUF files go to its sibling work_gguf
    try:
        result = model.save_pretrained_gguf(str(work), tokenizer, quantization_method=quant)
        files = collect_gguf(result, tmp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(f"{work}_gguf", ignore_errors=True)
    return f"GGUF, {quant}: " + ", ".join(f.name for f in files if f.suffix == ".gguf")


def check_hub_repo(repo: str | None) -> None:
    if repo is not None and not HUB_REPO_RE.match(repo):
        raise UserError(f"--push-to-hub {repo!r} is not a hub repository id", "--push-to-hub",
                        "use owner/name, e.g. my-user/qwen2.5-gsm8k-grpo")


def push(folder: Path, repo: str, private: bool = False) -> str:
    """Upload an exported folder to the Hugging Face Hub (needs network and a token: `hf auth login`)."""
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo, private=private, exist_ok=True)
        api.upload_folder(repo_id=repo, folder_path=str(folder), commit_message="grpo_fast export")
    except Exception as err:
        raise UserError(f"push to {repo} failed: {type(err).__name__}: {str(err).splitlines()[0][:200]}",
                        "--push-to-hub", "check the network and your token (`hf auth login` or HF_TOKEN)") from None
    return f"https://huggingface.co/{repo}"


def export_run(run_dir: str | Path | Run, format: str = "merged", *, quant: str | None = None,
               out: str | Path | None = None,
               dtype: str = "auto", push_to_hub: str | None = None, private: bool = False) -> Path:
    """Export a finished run; returns the folder written. Every argument is checked before any work.

        grpo_fast.export(run, format="merged")                 # 16-bit model + model card, next to the run
        grpo_fast.export("runs/demo-...", format="adapter", out="my-adapter", push_to_hub="me/my-adapter")
    """
    quiet_libraries()
    if format not in FORMATS:
        raise UserError(f"unknown export format {format!r}", "--format", f"use one of: {', '.join(FORMATS)}")
    if dtype not in DTYPES:
        raise UserError(f"unknown dtype {dtype!r}", "--dtype", f"use one of: {', '.join(DTYPES)}")
    if quant is not None and format != "gguf":
        raise UserError(f"--quant applies to --format gguf only (got --format {format})", "--quant",
                        "drop --quant, or add --format gguf")
    quant = (quant or "q4_k_m").lower()
    if format == "gguf" and quant not in GGUF_QUANTS:
        raise UserError(f"unknown GGUF quantization {quant!r}", "--quant", f"use one of: {', '.join(GGUF_QUANTS)}")
    check_hub_repo(push_to_hub)
    info = Run.open(path_of(run_dir), finished=True, lora=True)
    if format == "gguf" and not unsloth_gguf_ready():
        raise UserError(
            "GGUF export needs Unsloth on a CUDA GPU, and it is not available here",
            "--format gguf",
            "pip install -r requirements-gpu.txt on a GPU machine; or export --format merged and convert with "
            "llama.cpp: python llama.cpp/convert_hf_to_gguf.py MERGED_DIR --outtype f16, then llama-quantize",
        )
    if format == "gguf":
        import unsloth  # noqa: F401  (before anything below imports transformers or peft: Unsloth patches them)
    default = info.path / (f"export-gguf-{quant}" if format == "gguf" else f"export-{format}")
    dest = Path(out).expanduser() if out else default
    if dest.exists() and any(dest.iterdir()):
        raise UserError(f"{dest} already exists and is not empty", "--out", "choose another --out or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        if format == "adapter":
            detail = _write_adapter(info, tmp)
        elif format == "merged":
            detail = _write_merged(info, tmp, dtype)
        else:
            detail = _write_gguf(info, tmp, quant)
        (tmp / "README.md").write_text(model_card(info, format, {"detail": detail}), encoding="utf-8")
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if push_to_hub:
        print(f"pushed to {push(dest, push_to_hub, private)}")
    return dest


# --------------------------------------------------------------------------- command line


def _export_cmd(args: argparse.Namespace) -> int:
    dest = export_run(args.run_dir, args.format, quant=args.quant, out=args.out, dtype=args.dtype,
                      push_to_hub=args.push_to_hub, private=args.private)
    print(f"exported {args.format} to {dest}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``grpo-fast export``."""
    p = sub.add_parser("export", help="export a finished run: LoRA adapter, merged model or GGUF")
    p.add_argument("run_dir", help="a finished run directory (runs/<recipe>-<time>)")
    p.add_argument("--format", default="merged", choices=None, help="adapter | merged (default) | gguf")
    p.add_argument("--quant", default=None, help="GGUF quantization (default q4_k_m): q8_0, f16, q5_k_m, ...")
    p.add_argument("--dtype", default="auto", help="merged weights: auto (fp32 on CPU, bf16/fp16 on GPU) | fp32 | "
                   "bf16 | fp16")
    p.add_argument("--out", default=None, help="destination folder (default: RUN_DIR/export-<format>)")
    p.add_argument("--push-to-hub", default=None, metavar="REPO", help="also upload to the hub as owner/name")
    p.add_argument("--private", action="store_true", help="with --push-to-hub: create a private repository")
    p.set_defaults(func=_export_cmd)


make_callable(__name__, export_run)
