"""GGUF export through Unsloth's ``save_pretrained_gguf`` (defect 2), on CPU.

Unsloth cannot import without a GPU, so a stand-in ``unsloth`` module plays its part with the behaviour read
from the pinned wheel (tests/gpu/test_contracts.py checks it there): the GGUF files go to a sibling folder
``<save_directory>_gguf`` and their paths come back in ``result["gguf_files"]``. The file it writes is a real
GGUF (the gguf package) holding the run's merged weights, so the test reads what landed where the kit says.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
from tiny import VARIED_REWARDS

from grpo_fast import export
from grpo_fast.run.resolve import resolve_config
from grpo_fast.train import train


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf-run") / "run"
    cfg = resolve_config("demo", [f"model={tiny_model_dir}", "max_steps=1", "max_completion_length=8",
                                  f"run_dir={out}", "evaluate=false", VARIED_REWARDS])
    return train(cfg).path


def _standin_unsloth(calls: list) -> types.ModuleType:
    """FastLanguageModel.from_pretrained -> model whose save_pretrained_gguf behaves as unsloth 2026.10.9's."""
    import gguf
    from peft import AutoPeftModelForCausalLM

    class Model:
        def __init__(self, adapter: str):
            self.merged = AutoPeftModelForCausalLM.from_pretrained(adapter).merge_and_unload()

        def save_pretrained_gguf(self, save_directory, tokenizer=None, quantization_method="fast_quantized"):
            calls.append(("save_pretrained_gguf", save_directory, quantization_method))
            self.merged.save_pretrained(save_directory)  # the 16-bit merge it converts from
            out = Path(f"{save_directory}_gguf")
            out.mkdir()
            path = out / f"model.{quantization_method.upper()}.gguf"
            writer = gguf.GGUFWriter(str(path), "llama")
            for name, tensor in list(self.merged.state_dict().items())[:3]:
                writer.add_tensor(name, tensor.float().numpy().astype(np.float32))
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
            writer.close()
            return {"save_directory": save_directory, "gguf_directory": str(out), "gguf_files": [str(path)],
                    "modelfile_location": None, "want_full_precision": False, "is_vlm": False}

    class FastLanguageModel:
        @staticmethod
        def from_pretrained(model_name, max_seq_length=2048, load_in_4bit=True, **kwargs):
            calls.append(("from_pretrained", model_name, kwargs))
            return Model(model_name), object()

    return types.SimpleNamespace(FastLanguageModel=FastLanguageModel)


def test_gguf_files_land_in_the_export_folder(run_dir, tmp_path, monkeypatch):
    import gguf

    calls: list = []
    monkeypatch.setitem(sys.modules, "unsloth", _standin_unsloth(calls))
    monkeypatch.setattr(export, "unsloth_gguf_ready", lambda: True)
    dest = export.export_run(run_dir, "gguf", quant="q8_0", out=tmp_path / "gguf")
    files = sorted(dest.glob("*.gguf"))
    assert [f.name for f in files] == ["model.Q8_0.gguf"], sorted(p.name for p in dest.iterdir())
    reader = gguf.GGUFReader(str(files[0]))
    assert len(reader.tensors) == 3
    assert "model.Q8_0.gguf" in (dest / "README.md").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["gguf"]  # merge folder and its _gguf sibling removed
    assert calls[0][1] == str(run_dir / "adapter") and calls[1][2] == "q8_0"


def test_no_gguf_reported_is_an_error_and_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError, match="no GGUF files"):
        export.collect_gguf({"gguf_files": []}, tmp_path)
    with pytest.raises(RuntimeError, match="does not exist"):
        export.collect_gguf({"gguf_files": [str(tmp_path / "missing.gguf")]}, tmp_path)
