"""Contract tests: the kit's real calls into Unsloth and vLLM, checked against the pinned wheels' own source.

Unsloth cannot be imported without a GPU and vllm 0.33.0 is a CUDA build, so these read the locked wheels
(tests/helpers/pinned.py downloads them once) with ``ast``. The kit builds its keyword arguments in small functions
(grpo_fast.models / infer / export); the tests call those and check every name against the signature it
reaches, so a version bump that renames or drops a parameter, or changes a return value the kit reads,
fails here instead of in a user's Colab run.
"""

from __future__ import annotations

import ast
import dataclasses
import typing

import pytest
from pinned import PinnedWheel, calls_in, class_fields, find_def, named_params

from grpo_fast import export, infer
from grpo_fast.config import grpo_args
from grpo_fast.models import gpu
from grpo_fast.run.resolve import resolve_config
from grpo_fast.rundir import Run

LOADER = "unsloth/models/loader.py"
LLAMA = "unsloth/models/llama.py"


@pytest.fixture(scope="module")
def unsloth():
    return PinnedWheel.get("unsloth")


@pytest.fixture(scope="module")
def zoo():
    return PinnedWheel.get("unsloth-zoo")


@pytest.fixture(scope="module")
def vllm():
    return PinnedWheel.get("vllm")


def _cfg(tiny_model_dir, *overrides):
    return resolve_config("demo", [f"model={tiny_model_dir}", *overrides])


def _run_info(tmp_path, **config) -> Run:
    (tmp_path / "adapter").mkdir(exist_ok=True)
    (tmp_path / "adapter" / "adapter_config.json").write_text('{"r": 32}')
    return Run(tmp_path, {"model": str(tmp_path), **config}, {}, None, None)


# --------------------------------------------------------------------------- Unsloth: loading and LoRA


def test_from_pretrained_takes_every_keyword_the_kit_passes(unsloth, tiny_model_dir, tmp_path, monkeypatch):
    params = named_params(find_def(unsloth.ast(LOADER), "from_pretrained", cls="FastLanguageModel"))
    for overrides in ([], ["use_vllm=true", "load_in_4bit=true", "fp16=true"], ["lora=false", "bf16=true"]):
        kwargs = gpu.unsloth_load_kwargs(_cfg(tiny_model_dir, *overrides), "m")
        assert set(kwargs) <= params, set(kwargs) - params
    monkeypatch.setattr(Run, "base_model_path", lambda self: str(tmp_path))
    info = _run_info(tmp_path, max_seq_length=512, vllm_gpu_memory_utilization=0.5)
    assert set(infer.unsloth_infer_kwargs(info)) <= params
    assert set(export.gguf_load_kwargs(info)) <= params


def test_get_peft_model_takes_every_keyword_the_kit_passes(unsloth, tiny_model_dir):
    params = named_params(find_def(unsloth.ast(LLAMA), "get_peft_model", cls="FastLlamaModel"))
    kwargs = gpu.unsloth_peft_kwargs(_cfg(tiny_model_dir, "lora_r=32"))
    assert set(kwargs) <= params, set(kwargs) - params
    assert kwargs["use_gradient_checkpointing"] == "unsloth" and kwargs["target_modules"] == gpu.LORA_TARGETS


def test_load_lora_exists_only_after_get_peft_model_and_fast_generate_is_the_engine(unsloth, zoo):
    """Why chat/generate pass a LoRARequest to fast_generate instead of calling model.load_lora (defect 1)."""
    tree = unsloth.ast("unsloth/models/_utils.py")
    setters = [fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
               for node in ast.walk(fn) if isinstance(node, ast.Assign)
               for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "load_lora"]
    assert setters == ["patch_peft_fast_inference"]
    llama = unsloth.ast(LLAMA)
    callers = {fn.name for fn in ast.walk(llama) if isinstance(fn, ast.FunctionDef)
               and "patch_peft_fast_inference" in calls_in(fn)}
    assert callers and callers <= {"get_peft_model", "patch_peft_model"}, callers
    assigned = {ast.unparse(n.value) for n in ast.walk(find_def(llama, "from_pretrained", cls="FastLlamaModel"))
                if isinstance(n, ast.Assign) and any(ast.unparse(t) == "model.fast_generate" for t in n.targets)}
    assert "model.vllm_engine.generate" in assigned


def test_fast_inference_is_refused_with_full_finetuning_and_under_fsdp2(unsloth):
    """Why lora: false passes fast_inference=False (defect 6) and FSDP + vLLM is refused up front (defect 5)."""
    vision = find_def(unsloth.ast("unsloth/models/vision.py"), "from_pretrained", cls="FastBaseModel")
    guarded = [n for n in ast.walk(vision) if isinstance(n, ast.If) and ast.unparse(n.test) == "full_finetuning"
               and any(isinstance(r, ast.Raise) and "NotImplementedError" in ast.unparse(r) for r in ast.walk(n))]
    assert guarded, "fast_inference + full_finetuning no longer raises: the kit could let vLLM serve full weights"
    loader = find_def(unsloth.ast(LOADER), "from_pretrained", cls="FastLanguageModel")
    assert "raise_if_fast_inference_under_fsdp2" in calls_in(loader)
    check = find_def(unsloth.ast("unsloth/models/loader_utils.py"), "raise_if_fast_inference_under_fsdp2")
    assert any(isinstance(n, ast.Raise) and "NotImplementedError" in ast.unparse(n) for n in ast.walk(check))
    assert "full_finetuning" in named_params(find_def(unsloth.ast(LOADER), "from_pretrained",
                                                      cls="FastLanguageModel"))


# --------------------------------------------------------------------------- Unsloth: GGUF export


def test_save_pretrained_gguf_writes_a_sibling_folder_and_returns_the_files(unsloth):
    save = unsloth.ast("unsloth/save.py")
    fn = find_def(save, "unsloth_save_pretrained_gguf")
    assert {"tokenizer", "quantization_method"} <= named_params(fn)
    returned = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Dict)]
    keys = {k.value for d in returned for k in d.keys if isinstance(k, ast.Constant)}
    assert {"gguf_files", "modelfile_location"} <= keys  # what export.collect_gguf reads
    sibling = find_def(save, "_gguf_output_directory")
    assert ast.unparse(sibling.body[-1].value) == "f'{save_directory}_gguf'"
    allowed = next(n.value for n in save.body if isinstance(n, ast.Assign)
                   and any(getattr(t, "id", None) == "ALLOWED_QUANTS" for t in n.targets))
    names = {k.value for k in allowed.keys}
    assert set(export.GGUF_QUANTS) <= names, set(export.GGUF_QUANTS) - names


# --------------------------------------------------------------------------- Unsloth: rewritten trainer defaults


def _replacement_keys(tree: ast.Module) -> set[str]:
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            if any(getattr(t, "id", None) == "replacements" for t in node.targets):
                keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and getattr(t.value, "id", None) == "replacements":
                    keys.add(t.slice.value)
    return keys


def test_every_default_unsloth_rewrites_is_pinned_by_the_kit(unsloth, tiny_model_dir):
    """Defect 8: the list comes from unsloth/models/rl.py; each GRPOConfig field in it is passed explicitly."""
    from trl import GRPOConfig

    rewritten = _replacement_keys(unsloth.ast("unsloth/models/rl.py"))
    assert {"gradient_accumulation_steps", "weight_decay", "warmup_steps", "optim"} <= rewritten  # parsed right
    fields = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    relevant = rewritten & fields - {"output_dir"}  # the kit always passes output_dir
    assert relevant <= set(grpo_args.UNSLOTH_CHANGED_DEFAULTS), relevant - set(grpo_args.UNSLOTH_CHANGED_DEFAULTS)
    args = grpo_args.trainer_args(dict(_cfg(tiny_model_dir).grpo), GRPOConfig)
    assert relevant - {"seed", "output_dir"} <= set(args)  # seed and output_dir: build_trainer passes them
    assert "epsilon_high = 0.28" in unsloth.text("unsloth/models/rl.py")  # why epsilon_high is pinned too


# --------------------------------------------------------------------------- vLLM


def test_vllm_lora_rank_whitelist_is_the_pinned_one(vllm):
    tree = vllm.ast("vllm/config/lora.py")
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "MaxLoRARanks")
    ranks = tuple(ast.literal_eval(e) for e in node.value.slice.elts)
    assert ranks == gpu.VLLM_LORA_RANKS


def test_engine_and_sampling_arguments_exist_in_vllm(vllm):
    engine_args = class_fields(vllm.ast("vllm/engine/arg_utils.py"), "EngineArgs")
    for cpu in (False, True):
        kwargs = gpu.vllm_engine_kwargs({"lora_r": 16, "max_seq_length": 512}, cpu=cpu)
        assert set(kwargs) <= engine_args, set(kwargs) - engine_args
    sampling = class_fields(vllm.ast("vllm/sampling_params.py"), "SamplingParams")
    assert {"temperature", "top_p", "max_tokens", "min_tokens"} <= sampling and "min_new_tokens" not in sampling
    lora = class_fields(vllm.ast("vllm/lora/request.py"), "LoRARequest")
    assert {"lora_name", "lora_int_id", "lora_path"} <= lora
    order = [s.target.id for s in next(n for n in ast.walk(vllm.ast("vllm/lora/request.py"))
                                       if isinstance(n, ast.ClassDef) and n.name == "LoRARequest").body
             if isinstance(s, ast.AnnAssign)]
    assert order[:3] == ["lora_name", "lora_int_id", "lora_path"]  # infer.lora_request passes them by position


def test_trl_builds_the_colocated_engine_through_the_name_the_cpu_opt_in_wraps():
    """TRL 1.14.2 (installed) has no enforce_eager/dtype option: the CPU opt-in wraps the LLM it calls."""
    import inspect

    from trl import GRPOConfig
    from trl.generation import vllm_generation

    source = inspect.getsource(vllm_generation.VLLMGeneration._init_vllm)
    assert "self.llm = LLM(" in source and "enforce_eager" not in source and "dtype=" not in source
    assert "load_weights" in inspect.getsource(vllm_generation.VLLMGeneration.sync_weights)
    default = next(f.default for f in dataclasses.fields(GRPOConfig) if f.name == "vllm_gpu_memory_utilization")
    assert default == gpu.TRL_VLLM_GPU_MEMORY_UTILIZATION
    assert typing.get_type_hints(GRPOConfig)["vllm_gpu_memory_utilization"] is float


# --------------------------------------------------------------------------- Unsloth: TRL's tool loop


def test_unsloths_trainer_rewrite_leaves_trls_tool_loop_alone(unsloth):
    """Unsloth builds its GRPOTrainer by editing TRL's source text (rl.py: str.replace / re.sub). None of those
    edits may touch the tool loop or its arguments, so `environment_factory` (tool_math) reaches TRL's own loop;
    and PatchFastRL installs its tool-template matching (a template TRL does not know by identity)."""
    tree = unsloth.ast("unsloth/models/rl.py")
    edited = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("replace", "sub"):
            edited |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    assert len(edited) > 50  # the rewrite is found: Unsloth edits TRL's source in many places
    for name in ("_tool_call_loop", "environment_factory", "max_tool_calling_iterations", "_get_tool_suffix_ids",
                 "tools=", "parse_response"):
        assert not [text for text in edited if name in text], name
    assert "patch_trl_tool_chat_templates" in calls_in(find_def(tree, "PatchFastRL"))
