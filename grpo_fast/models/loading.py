"""Load a policy model: Unsloth when a GPU and Unsloth are there, transformers + peft otherwise.

``select_backend`` picks the loader and says why; ``load_model`` loads the weights and attaches LoRA with the
arguments ``gpu`` builds; ``load_weights`` puts a saved stage's weights back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_fast.config import RunConfig
from grpo_fast.embedded import (
    EMBEDDED,
    EMBEDDED_GGUF,
    EMBEDDED_NAME,
    embedded_converted,
    embedded_gguf_dir,
    resolve_model_path,
)
from grpo_fast.errors import UserError
from grpo_fast.models import machine
from grpo_fast.models.gpu import (
    bnb_config_kwargs,
    lora_alpha,
    train_precision,
    unsloth_load_kwargs,
    unsloth_peft_kwargs,
    weights_dtype,
)
from grpo_fast.models.machine import VLLM_CPU_ENV
from grpo_fast.models.templates import use_chat_template
from grpo_fast.models.vllm_colocate import prepare_vllm_on_cpu

log = logging.getLogger("grpo_fast.models")

BACKENDS = ("auto", "unsloth", "transformers")


@dataclass(frozen=True)
class Backend:
    """The chosen loader and the reason, logged so a user knows why a run is slow or fast."""

    name: str
    reason: str


def select_backend(
    requested: str = "auto",
    *,
    load_in_4bit: bool = False,
    use_vllm: bool = False,
    cuda: bool | None = None,
    unsloth: bool | None = None,
    vllm_cpu: bool | None = None,
) -> Backend:
    """Pick ``unsloth`` or ``transformers``; refuse GPU-only options on a machine without CUDA.

    ``use_vllm`` on CPU is allowed only with the explicit opt-in ``GRPO_FAST_VLLM_CPU=1`` (``vllm_cpu``).
    """
    if requested not in BACKENDS:
        raise UserError(
            f"unknown backend {requested!r}", "config key 'backend'", f"use one of: {', '.join(BACKENDS)}"
        )
    cuda = machine.cuda_available() if cuda is None else cuda
    unsloth = machine.unsloth_importable() if unsloth is None else unsloth
    vllm_cpu = machine.vllm_cpu_opted_in() if vllm_cpu is None else vllm_cpu
    if not cuda:
        vllm_here = use_vllm and vllm_cpu
        use_vllm = use_vllm and not vllm_cpu
        gpu_only = [name for name, on in (("load_in_4bit", load_in_4bit), ("use_vllm", use_vllm)) if on]
        if requested == "unsloth":
            gpu_only.insert(0, "backend: unsloth")
        if gpu_only:
            raise UserError(
                f"{', '.join(gpu_only)} needs a CUDA GPU, and none is visible here",
                "config keys " + ", ".join(repr(k.split(":")[0]) for k in gpu_only),
                "run on a GPU machine, or use `profile: cpu` (backend: transformers, no 4-bit, no vLLM)",
            )
        if vllm_here:
            return Backend("transformers", f"no CUDA GPU: transformers + peft on CPU ({VLLM_CPU_ENV}=1: vLLM's CPU "
                                           "build generates, its weights packed: docs/scale.md)")
        return Backend("transformers", "no CUDA GPU visible: transformers + peft on CPU")
    if requested == "unsloth":
        if not unsloth:
            raise UserError(
                "backend 'unsloth' was asked for but the unsloth package is not installed",
                "config key 'backend'",
                "pip install -r requirements-gpu.txt, or set backend: transformers",
            )
        return Backend("unsloth", "asked for in the config")
    if requested == "transformers":
        return Backend("transformers", "asked for in the config")
    if unsloth:
        return Backend("unsloth", "CUDA GPU present and unsloth importable")
    return Backend("transformers", "CUDA GPU present but unsloth not installed (pip install -r requirements-gpu.txt)")


def preimport_unsloth(requested: str) -> bool:
    """Import unsloth before trl/transformers when it will be used, as Unsloth requires for its patches."""
    if requested == "transformers" or not machine.unsloth_importable() or not machine.cuda_available():
        return False
    import unsloth  # noqa: F401

    return True


def load_tokenizer(model: str | None, chat_template: str | None = None, where: str = "config key 'chat_template'"
                   ) -> Any:
    """The model's tokenizer (pad token set; ``chat_template``, the config's, in place of the model's). The embedded
    model's comes straight from its GGUF file when the model is not converted yet, so a dry run never pays for the
    conversion."""
    from transformers import AutoTokenizer

    if model in (None, "", EMBEDDED, EMBEDDED_NAME) and embedded_converted() is None:
        tokenizer = AutoTokenizer.from_pretrained(embedded_gguf_dir(), gguf_file=EMBEDDED_GGUF)
    else:
        path = resolve_model_path(model)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path)
        except OSError as err:
            raise load_error(path, err) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return use_chat_template(tokenizer, chat_template, where)


@dataclass
class LoadedModel:
    """What the trainer needs: the (peft-wrapped) model, its tokenizer and how it was loaded."""

    model: Any
    tokenizer: Any
    backend: Backend
    model_path: str


def weight_files(model: str) -> list[tuple[str, int, int]]:
    """(path, size, mtime) of the base model's files: a local folder or file, or a hub model's cached snapshot
    (its folder names the commit): what identifies the weights, e.g. for a kept base evaluation."""
    path = Path(resolve_model_path(model))
    if not path.exists():
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(model, local_files_only=True))
    files = sorted(f for f in path.iterdir() if f.is_file()) if path.is_dir() else [path]
    return [(str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files]


def load_error(model_path: str, err: Exception) -> UserError:
    """A model or tokenizer that would not load, as one message with the likely fixes."""
    return UserError(
        f"could not load model {model_path!r}: {type(err).__name__}: {str(err).splitlines()[0][:200]}",
        "config key 'model'",
        "check the name (hub ids look like org/name) or the network; offline, use `embedded` or a local folder",
    )


def load_model(cfg: RunConfig, announce: bool = True) -> LoadedModel:
    """Load the policy with the backend ``select_backend`` picks and attach LoRA unless ``lora: false``.
    ``announce``: log the backend line (training's report has already printed it)."""
    from transformers import set_seed

    use_vllm = bool(cfg.args.use_vllm)
    backend = select_backend(cfg.backend, load_in_4bit=cfg.load_in_4bit, use_vllm=use_vllm)
    set_seed(cfg.seed)  # LoRA's initial weights come from the global RNG: same seed, same adapter
    if announce:
        log.info("backend: %s (%s)", backend.name, backend.reason)
    model_path = resolve_model_path(cfg.model)
    if use_vllm and cfg.args.vllm_mode == "colocate" and not machine.cuda_available():
        prepare_vllm_on_cpu()  # server mode runs no engine in this process
    if backend.name == "unsloth":
        model, tokenizer = _load_unsloth(cfg, model_path)
    else:
        model, tokenizer = _load_transformers(cfg, model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    use_chat_template(tokenizer, cfg.chat_template, cfg.where("chat_template"))
    return LoadedModel(model, tokenizer, backend, model_path)


def _load_transformers(cfg: RunConfig, model_path: str) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {}
    precision = train_precision(cfg)
    if cfg.load_in_4bit:
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(**bnb_config_kwargs(precision))
    dtype = weights_dtype(cfg.lora, precision, machine.cuda_available())
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
    except OSError as err:
        raise load_error(model_path, err) from None
    if not cfg.lora:
        return model, tokenizer
    from peft import LoraConfig, get_peft_model

    if cfg.load_in_4bit:
        from peft import prepare_model_for_kbit_training

        checkpointing = bool(cfg.args.gradient_checkpointing)
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=checkpointing)
    lora = LoraConfig(
        r=cfg.lora_r, lora_alpha=lora_alpha(cfg), lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules, task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora), tokenizer


def _load_unsloth(cfg: RunConfig, model_path: str) -> tuple[Any, Any]:
    """Unsloth's documented GRPO path: from_pretrained(fast_inference=...) then get_peft_model."""
    from unsloth import FastLanguageModel

    try:
        model, tokenizer = FastLanguageModel.from_pretrained(**unsloth_load_kwargs(cfg, model_path))
    except OSError as err:
        raise load_error(model_path, err) from None
    if cfg.lora:
        model = FastLanguageModel.get_peft_model(model, **unsloth_peft_kwargs(cfg))
    return model, tokenizer


def load_weights(model: Any, folder: Path) -> None:
    """Put weights saved with ``save_pretrained`` (a LoRA adapter or a full model) back into ``model``:
    a resumed multi-stage run starts its next stage from the previous stage's end."""
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise UserError(f"{folder} holds no weights (*.safetensors)", str(folder), "start a new run")
    state: dict[str, Any] = {}
    for file in files:
        state.update(load_file(str(file)))
    if (Path(folder) / "adapter_config.json").is_file():
        from peft import set_peft_model_state_dict

        result = set_peft_model_state_dict(model, state)
        missing = [k for k in getattr(result, "unexpected_keys", [])]
    else:
        missing = model.load_state_dict(state, strict=False).unexpected_keys
    if missing:
        raise UserError(f"{folder} does not fit this model ({len(missing)} unknown weights, e.g. {missing[0]})",
                        str(folder), "resume with the run's own config, or start a new run")
