"""Scale-out: process-count checks, shipped accelerate configs, and a real 2-process gloo run on CPU."""

from __future__ import annotations

import json
import sys

import pytest

from grpo_fast import scale
from grpo_fast.errors import UserError


def test_process_count_is_checked_against_the_machine():
    assert scale.check_processes(2, cuda_devices=0, cpus=2) == "cpu"
    assert scale.check_processes(4, cuda_devices=4, cpus=2) == "cuda"
    with pytest.raises(UserError, match="only 2 CPU core"):
        scale.check_processes(3, cuda_devices=0, cpus=2)
    with pytest.raises(UserError, match="only 1 CUDA GPU"):
        scale.check_processes(2, cuda_devices=1, cpus=64)
    with pytest.raises(UserError, match="at least 1"):
        scale.check_processes(0, cuda_devices=0, cpus=2)
    with pytest.raises(UserError, match="CPU core"):  # the real machine, through launch()
        scale.launch(["demo"], 10_000)


def test_commands_torchrun_and_accelerate(tmp_path):
    cmd = scale.build_command(["demo", "max_steps=2"], 2, None, "cpu")
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert cmd[cmd.index("--nproc_per_node") + 1] == "2" and cmd[-5:] == ["-m", "grpo_fast", "train", "demo",
                                                                          "max_steps=2"]
    acc = scale.build_command(["math"], 4, "fsdp", "cuda")
    assert acc[acc.index("--config_file") + 1].endswith("grpo_fast/accelerate/fsdp.yaml")
    assert acc[acc.index("--num_processes") + 1] == "4"
    with pytest.raises(UserError, match="need CUDA"):
        scale.build_command(["demo"], 2, "ddp", "cpu")
    with pytest.raises(UserError, match="neither a shipped one nor a file"):
        scale.accelerate_config("zero9")
    own = tmp_path / "mine.yaml"
    own.write_text("distributed_type: MULTI_GPU\n")
    assert scale.accelerate_config(str(own)) == own


def test_shipped_accelerate_configs_load():
    from accelerate.commands.config.config_args import load_config_from_file

    kinds = {}
    for name, file in scale.ACCELERATE_CONFIGS.items():
        path = scale.ACCELERATE_DIR / file
        kinds[name] = load_config_from_file(str(path)).distributed_type.value
    assert kinds == {"ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED", "fsdp": "FSDP"}


def test_run_dir_is_pinned_once_for_all_workers(tmp_path):
    argv = scale.pin_run_dir(["demo", "max_steps=2"])
    assert argv[:2] == ["demo", "max_steps=2"] and argv[2].startswith("run_dir=runs/demo-")
    assert scale.pin_run_dir(["demo", "run_dir=x"]) == ["demo", "run_dir=x"]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("recipe: math\n")
    assert scale.pin_run_dir([str(cfg)])[-1].startswith("run_dir=runs/math-")


@pytest.mark.slow
def test_two_processes_train_on_cpu_with_gloo(tiny_model_dir, in_tmp):
    rc = scale.launch(["demo", f"model={tiny_model_dir}", "max_steps=2", "max_completion_length=8"], 2)
    runs = list((in_tmp / "runs").iterdir())
    assert rc == 0 and len(runs) == 1  # one run directory, not one per rank
    run = runs[0]
    for name in ("config.yaml", "versions.json", "metrics.jsonl", "samples.jsonl", "reward_curve.png",
                 "summary.json", "adapter/adapter_model.safetensors", "adapter/tokenizer.json"):
        assert (run / name).exists(), name
    assert json.loads((run / "summary.json").read_text())["steps"] == 2
    # both ranks took part: the checkpoint holds one RNG state per rank
    assert {p.name for p in run.glob("checkpoints/checkpoint-2/rng_state_*.pth")} == {"rng_state_0.pth",
                                                                                      "rng_state_1.pth"}


def test_fsdp_with_unsloth_and_vllm_is_refused_before_launch(tmp_path):
    fsdp = scale.accelerate_config("fsdp")
    with pytest.raises(UserError) as err:
        scale.check_launch(fsdp, "unsloth", use_vllm=True)
    assert "FSDP" in str(err.value) and "use_vllm: false" in str(err.value)
    scale.check_launch(fsdp, "unsloth", use_vllm=False)  # Unsloth trains under FSDP2 without vLLM
    scale.check_launch(fsdp, "transformers", use_vllm=True)  # TRL's own vLLM gathers FSDP weights
    scale.check_launch(scale.accelerate_config("ddp"), "unsloth", use_vllm=True)
    own = tmp_path / "fsdp1.yaml"
    own.write_text("distributed_type: FSDP\nfsdp_config: {fsdp_version: 1}\n")
    with pytest.raises(UserError, match="FSDP"):
        scale.check_launch(own, "unsloth", use_vllm=True)


def test_mixed_precision_comes_from_the_run_not_the_shipped_yaml():
    import yaml

    for file in scale.ACCELERATE_CONFIGS.values():
        assert "mixed_precision" not in yaml.safe_load((scale.ACCELERATE_DIR / file).read_text())
    t4 = scale.build_command(["math"], 2, "ddp", "cuda", mixed_precision="fp16")
    assert t4[t4.index("--mixed_precision") + 1] == "fp16"
    backend, use_vllm, precision = scale.launch_settings(["demo", "use_vllm=false", "fp16=true"])
    assert (backend, use_vllm, precision) == ("transformers", False, "fp16")
    assert scale.launch_settings(["demo"])[2] == "no"  # the CPU profile trains in fp32
