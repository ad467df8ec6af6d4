"""doctor: simulated machines for the known-broken combinations, and the real command once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_fast import doctor
from grpo_fast.doctor import FAIL, OK, WARN, Machine

LOCKED = {"torch": "2.13.0", "transformers": "5.17.0", "trl": "1.14.2", "peft": "0.21.2", "accelerate": "1.16.0",
          "datasets": "4.8.5"}
GPU_LOCKED = {**LOCKED, "torch": "2.13.0", "vllm": "0.32.0", "unsloth": "2026.10.9", "bitsandbytes": "0.50.2"}
OK_IMPORTS = {"unsloth": "ok", "vllm": "ok", "bitsandbytes": "ok"}


def _rows(machine, **kw):
    return {r.name: r for r in doctor.checks(machine, **kw)}


def test_locked_cpu_machine_is_ready():
    rows = _rows(Machine("3.11.7", dict(LOCKED), cuda=False))
    assert not doctor.blocking(list(rows.values()))
    assert rows["trl"].status == OK and rows["profile"].value == "cpu"
    assert rows["vllm"].value == "not installed" and rows["vllm"].status != FAIL  # GPU-only packages: fine on CPU


def test_trl_115_on_cpu_blocks_but_not_on_gpu():
    cpu = _rows(Machine("3.11.7", {**LOCKED, "trl": "1.15.0"}, cuda=False))
    assert cpu["trl on CPU"].status == FAIL and "Triton" in cpu["trl on CPU"].note
    assert doctor.blocking(list(cpu.values()))
    gpu = doctor.checks(Machine("3.11.7", {**GPU_LOCKED, "trl": "1.15.0"}, cuda=True, gpu_name="NVIDIA A100",
                                gpu_gb=80, capability=(8, 0), imports=OK_IMPORTS))
    assert not any(r.name == "trl on CPU" for r in gpu)
    assert {r.name: r.status for r in gpu}["trl"] == WARN  # off the lock, not blocking


def test_vllm_needs_its_torch():
    m = Machine("3.11.7", {**GPU_LOCKED, "torch": "2.14.0+cu130"}, cuda=True, gpu_name="NVIDIA L4", gpu_gb=22.5,
                capability=(8, 9), imports=OK_IMPORTS)
    rows = _rows(m)
    assert rows["vllm/torch"].status == FAIL and "2.13.0" in rows["vllm/torch"].note
    assert rows["profile"].value == "memory"
    fine = _rows(Machine("3.11.7", dict(GPU_LOCKED), cuda=True, gpu_name="NVIDIA H100", gpu_gb=80,
                         capability=(9, 0), imports=OK_IMPORTS))
    assert "vllm/torch" not in fine and fine["profile"].value == "performance"
    assert not doctor.blocking(list(fine.values()))


def test_bf16_on_a_t4():
    t4 = dict(python="3.11.7", versions=dict(GPU_LOCKED), cuda=True, gpu_name="Tesla T4", gpu_gb=14.7,
              capability=(7, 5), imports=OK_IMPORTS)
    asked = _rows(Machine(**t4), bf16_requested=True)
    assert asked["bf16"].status == FAIL and "fp16" in asked["bf16"].note
    emulated = _rows(Machine(**t4, bf16_reported=True))
    assert emulated["bf16"].status == WARN and "emulation" in emulated["bf16"].note


def test_broken_gpu_import_and_missing_core_package():
    m = Machine("3.11.7", {k: v for k, v in GPU_LOCKED.items() if k != "peft"}, cuda=True, gpu_name="NVIDIA A10G",
                gpu_gb=22, capability=(8, 6), imports={**OK_IMPORTS, "bitsandbytes": "import fails: libcudart.so"})
    rows = _rows(m)
    assert rows["peft"].status == FAIL and rows["bitsandbytes"].status == FAIL
    assert "libcudart" in rows["bitsandbytes"].note


def test_lock_is_read_from_requirements_or_embedded(tmp_path):
    pins, source = doctor.lock_pins(gpu=True)
    assert source == "requirements-gpu.txt" and pins["vllm"] == "0.32.0" and pins["trl"] == "1.14.2"
    pins, source = doctor.lock_pins(gpu=False, root=tmp_path)  # an installed wheel: no files beside it
    assert source == "embedded lock" and pins["torch"] == "2.13.0" and pins["huggingface-hub"] == "1.33.0"
    assert doctor.lock_pins(gpu=False)[0]["torch"] == pins["torch"]  # the embedded table matches the files


@pytest.mark.slow
def test_real_doctor_command():
    code = ("import sys; from grpo_fast import doctor; sys.exit(doctor.run(as_json='--json' in sys.argv))")
    proc = subprocess.run([sys.executable, "-c", code, "--json"], capture_output=True, text=True, timeout=300)
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert proc.returncode == (1 if any(r["status"] == FAIL for r in rows.values()) else 0)
    if rows["gpu"]["value"] == "none":  # the CPU class and the cpu profile's choices on it, with reasons
        assert rows["cpu"]["note"] and rows["cpu profile: bf16 training pass"]["value"] in ("on", "off")
        assert "probe" in rows["cpu profile: bf16 training pass"]["note"]
        assert rows["cpu profile: threads"]["value"].isdigit()
    assert rows["trl"]["value"] and rows["code sandbox"]["value"] and "GiB free" in rows["cache"]["note"]
    table = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "grpo-fast doctor" in table.stdout and table.returncode == proc.returncode


def test_gpu_benchmark_exits_cleanly_without_cuda():
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
    proc = subprocess.run([sys.executable, str(bench), "--steps", "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "no CUDA: nothing to measure" in proc.stdout


def test_gpu_benchmark_random_model_has_the_real_architecture():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert [c["name"] for c in bench.configurations()][0] == "transformers"
    table = bench.table([{"name": "transformers", "step_s": 2.0, "gen_tok_s": 512, "peak_gb": 4.0},
                         {"name": "unsloth", "step_s": 1.0, "gen_tok_s": 1024, "peak_gb": 2.0}])
    assert "2.00      0.50" in table  # twice as fast, half the memory
    from tiny import tiny_tokenizer

    cfg = bench.random_model_config(tiny_tokenizer())
    assert cfg.model_type == "qwen2" and cfg.num_hidden_layers == 24 and cfg.hidden_size == 896
    assert cfg.eos_token_id == tiny_tokenizer().eos_token_id


def test_unsloth_zoo_and_the_bnb_plugin_are_compared_with_the_lock():
    base = dict(python="3.11.7", cuda=True, gpu_name="NVIDIA L4", gpu_gb=22.5, capability=(8, 9), imports=OK_IMPORTS)
    off = _rows(Machine(versions={**GPU_LOCKED, "unsloth-zoo": "2026.9.1", "vllm-bnb-plugin": "0.0.1"}, **base))
    assert off["unsloth-zoo"].status == WARN and "2026.10.9" in off["unsloth-zoo"].note
    assert off["vllm-bnb-plugin"].status == WARN and "0.0.3" in off["vllm-bnb-plugin"].note
    locked = _rows(Machine(versions={**GPU_LOCKED, "unsloth-zoo": "2026.10.9", "vllm-bnb-plugin": "0.0.3"}, **base))
    assert locked["unsloth-zoo"].status == OK and locked["vllm-bnb-plugin"].status == OK
    missing = _rows(Machine(versions=dict(GPU_LOCKED), **base))
    assert missing["vllm-bnb-plugin"].value == "not installed" and missing["vllm-bnb-plugin"].status == WARN
    assert "vllm-bnb-plugin" not in _rows(Machine("3.11.7", dict(LOCKED), cuda=False))  # CPU: not part of the set


# --------------------------------------------------------------------------- the driver and binaries, for real


def _stand_in_smi(folder: Path, driver: str, cuda: str, gpu: str = "NVIDIA GeForce RTX 4090") -> str:
    """An nvidia-smi that answers the two calls doctor makes, as the real one prints them."""
    smi = folder / "nvidia-smi"
    query = f'if [ "$1" = "--query-gpu=name,driver_version" ]; then echo "{gpu}, {driver}"; exit 0; fi\n'
    banner = f'echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda} |"\n'
    smi.write_text("#!/bin/sh\n" + query + banner)
    smi.chmod(0o755)
    return str(smi)


def test_driver_older_than_the_locks_cuda_is_named_with_its_fix(tmp_path):
    from grpo_fast.models.cuda_stack import nvidia_driver

    old = nvidia_driver(_stand_in_smi(tmp_path, "550.54.15", "12.4"))
    assert old.version == "550.54.15" and old.cuda == (12, 4) and old.gpu == "NVIDIA GeForce RTX 4090"
    # torch 2.13.0 from PyPI is a CUDA 13.0 build: under this driver torch sees no GPU (cuda=False)
    m = Machine("3.11.7", dict(GPU_LOCKED), cuda=False, driver=old, built_cuda={"torch": (13, 0), "vllm": (13, 0)})
    rows = _rows(m)
    assert "torch sees no GPU" in rows["nvidia driver"].note
    assert rows["torch/driver"].status == FAIL and "580" in rows["torch/driver"].note
    assert rows["vllm/driver"].status == FAIL and doctor.blocking(list(rows.values()))
    minor = nvidia_driver(_stand_in_smi(tmp_path, "580.65.06", "13.0"))
    rows = _rows(Machine("3.11.7", dict(GPU_LOCKED), cuda=True, gpu_name="NVIDIA L4", gpu_gb=22.5, capability=(8, 9),
                         imports=OK_IMPORTS, driver=minor, built_cuda={"torch": (13, 2)}))
    assert rows["torch/driver"].status == WARN and "minor-version" in rows["torch/driver"].note
    new = nvidia_driver(_stand_in_smi(tmp_path, "590.10", "13.1"))
    rows = _rows(Machine("3.11.7", dict(GPU_LOCKED), cuda=True, gpu_name="NVIDIA L4", gpu_gb=22.5, capability=(8, 9),
                         imports=OK_IMPORTS, driver=new, built_cuda={"torch": (13, 0), "vllm": (13, 0)}))
    assert rows["nvidia driver"].status == OK and "torch/driver" not in rows and "vllm/driver" not in rows
    # the driver runs torch's CUDA, yet torch sees no GPU: a device the process was not given
    hidden = _rows(Machine("3.11.7", dict(GPU_LOCKED), cuda=False, driver=new, built_cuda={"torch": (13, 0)}))
    assert hidden["nvidia driver"].status == FAIL and "CUDA_VISIBLE_DEVICES" in hidden["nvidia driver"].note
    # a CPU build of torch on a GPU box (make setup there): not blocking, and the fix named
    cpu_torch = _rows(Machine("3.11.7", dict(LOCKED), cuda=False, driver=new))
    assert cpu_torch["nvidia driver"].status == WARN and "requirements-gpu.txt" in cpu_torch["nvidia driver"].note
    assert not doctor.blocking(list(cpu_torch.values()))
    broken = tmp_path / "broken-smi"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver'\n"
                      "exit 9\n")
    broken.chmod(0o755)
    assert nvidia_driver(str(broken)) is None and nvidia_driver(str(tmp_path / "absent")) is None


def test_probe_reads_the_driver_beside_this_torch(tmp_path, monkeypatch):
    """doctor's own probe with a stand-in nvidia-smi on PATH: the driver is read, this CPU torch is named."""
    _stand_in_smi(tmp_path, "580.65.06", "13.0")
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    m = doctor.probe(imports=False)
    assert m.driver is not None and m.driver.version == "580.65.06" and m.driver.cuda == (13, 0)
    rows = {r.name: r for r in doctor.cuda_rows(m)}
    if "torch" not in m.built_cuda:  # this machine's torch: the CPU build
        assert rows["nvidia driver"].status == WARN and "CPU build" in rows["nvidia driver"].note


def _stand_in_extension(root: Path, name: str, loads: bool) -> None:
    """A package whose binary is a real shared object; one built against a symbol this process lacks (what a
    wheel built for another torch looks like to the dynamic loader), loaded the way xformers loads its own."""
    package = root / name
    package.mkdir(parents=True)
    source = root / f"{name}.c"
    call = "" if loads else ("extern int at_built_for_another_torch(void);\n"
                             "int probe(void) { return at_built_for_another_torch(); }\n")
    source.write_text(call + "int ok(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(package / "_C.so"), str(source)], check=True, timeout=120)
    (package / "__init__.py").write_text("")
    (package / "_cpp_lib.py").write_text(
        "import ctypes, os\n\n"
        "def _register_extensions():\n"
        "    return ctypes.CDLL(os.path.join(os.path.dirname(__file__), '_C.so'), mode=os.RTLD_NOW)\n")


def test_binary_extensions_are_loaded_not_compared_by_version(tmp_path):
    from grpo_fast.models.cuda_stack import EXTENSION_PROBES, probe_extensions

    _stand_in_extension(tmp_path / "bad", "xformers", loads=False)
    _stand_in_extension(tmp_path / "good", "standin", loads=True)
    found = probe_extensions({"xformers"}, path=[str(tmp_path / "bad")])  # the kit's own xformers probe
    assert found["xformers"].startswith("cannot load") and "at_built_for_another_torch" in found["xformers"]
    probes = {"standin": EXTENSION_PROBES["xformers"].replace("xformers", "standin")}
    assert probe_extensions({"standin"}, probes, path=[str(tmp_path / "good")]) == {"standin": "ok"}
    assert probe_extensions(set(), path=[str(tmp_path / "bad")]) == {}  # only installed packages are probed
    base = dict(python="3.11.7", cuda=True, gpu_name="NVIDIA L4", gpu_gb=22.5, capability=(8, 9), imports=OK_IMPORTS)
    rows = _rows(Machine(versions={**GPU_LOCKED, "xformers": "0.0.35"}, extensions=found, **base))
    assert rows["xformers binary"].status == WARN and "pip uninstall -y xformers" in rows["xformers binary"].note
    assert rows["xformers binary"].value == "0.0.35" and not doctor.blocking(list(rows.values()))
    dead = _rows(Machine(versions=dict(GPU_LOCKED), extensions={"vllm": "cannot load: undefined symbol"}, **base))
    assert dead["vllm binary"].status == FAIL  # vLLM's own kernels: generation cannot start
