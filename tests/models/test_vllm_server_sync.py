"""Server mode by adapter without a server: which runs sync by adapter, and the adapter written all at once.
(The server itself runs in tests_vllm/test_vllm_server.py, `make test-vllm`.)"""

from __future__ import annotations

import json

from grpo_fast.models.vllm_server import ADAPTERS, by_adapter, save_adapter
from grpo_fast.run.resolve import resolve_config


def _cfg(tiny_model_dir, *overrides):
    return resolve_config("demo", [f"model={tiny_model_dir}", *overrides])


def test_only_lora_runs_in_server_mode_sync_by_adapter(tiny_model_dir):
    assert by_adapter(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=server"))
    assert not by_adapter(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=colocate"))
    assert not by_adapter(_cfg(tiny_model_dir, "use_vllm=true", "vllm_mode=server", "lora=false"))
    assert not by_adapter(_cfg(tiny_model_dir, "vllm_mode=server"))  # no vLLM at all


def test_save_adapter_renames_a_complete_folder_into_place(tiny_model_dir, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)),
                           LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    path = tmp_path / ADAPTERS / "grpo-fast-x-1"
    path.parent.mkdir(parents=True)
    size = save_adapter(model, path)
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {p.name for p in path.iterdir()}
    assert size == sum(p.stat().st_size for p in path.iterdir()) > 0
    assert sorted(p.name for p in path.parent.iterdir()) == ["grpo-fast-x-1"]  # no temporary folder left
    assert json.loads((path / "adapter_config.json").read_text())["r"] == 8
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)), str(path))
    assert loaded.peft_config["default"].r == 8  # what the server loads is a complete peft adapter
