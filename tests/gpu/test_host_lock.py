"""The lock decision (grpo_fast/models/host_lock.py) for the four hosts of issue 49, each behind a stand-in
``nvidia-smi``: run as the notebooks run it (the file by path, its JSON), and as ``grpo-fast doctor`` shows it.
Its table of what each release ships is checked against the wheels (network)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from stand_in_smi import HOSTS, stand_in_smi

from grpo_fast.models import host_lock
from grpo_fast.models.host_lock import Host, decide

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "grpo_fast" / "models" / "host_lock.py"


def run_script(path_dir: Path | None, *args: str) -> subprocess.CompletedProcess:
    """The decision as the notebooks' install cell runs it: this file by path, PATH holding only the stand-in."""
    env = {**os.environ, "PATH": f"{path_dir}:/usr/bin:/bin" if path_dir else "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env=env)


EXPECTED = {  # host -> (lock, vLLM, words the one line must hold)
    "L4 on a CUDA 13 driver": ("cu13", True, ["the CUDA 13 lock", "vLLM yes", "sm_89", "FLASH_ATTN"]),
    "T4 on a CUDA 12.8 driver": ("cu12", True, ["the CUDA 12 lock", "vLLM yes", "sm_75", "FLASHINFER",
                                                 "TRITON_ATTN"]),
    "A100 on a CUDA 12.4 driver": ("cu12", True, ["the CUDA 12 lock", "vLLM yes", "minor-version compatibility"]),
}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_each_gpu_host_gets_its_lock_from_the_script(host, tmp_path):
    stand_in_smi(tmp_path, *HOSTS[host])
    proc = run_script(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    lock, vllm, words = EXPECTED[host]
    assert (plan["lock"], plan["vllm"]) == (lock, vllm)
    assert all(w in plan["line"] for w in words), plan["line"]
    assert plan["requirements"] == host_lock.LOCKS[lock].requirements
    assert f"vllm=={host_lock.LOCKS[lock].vllm}" in plan["pins"]
    assert f"torch=={host_lock.LOCKS[lock].torch}" in plan["pins"]
    text = run_script(tmp_path)  # the plain line, as a person reads it
    assert text.returncode == 0 and text.stdout.startswith("this host: ")


def test_no_gpu_gets_the_cpu_set_without_vllm(tmp_path):
    plan = json.loads(run_script(None, "--json").stdout)  # no nvidia-smi on PATH
    assert plan["lock"] == "cpu" and not plan["vllm"] and "no NVIDIA GPU" in plan["line"]
    assert not [p for p in plan["pins"] if p.startswith(("vllm", "unsloth"))]
    broken = tmp_path / "nvidia-smi"  # a driver that answers nothing is no GPU either
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver'\n"
                      "exit 9\n")
    broken.chmod(0o755)
    assert json.loads(run_script(tmp_path, "--json").stdout)["lock"] == "cpu"


def test_bad_arguments_exit_2_with_one_line():
    proc = run_script(None, "--yaml")
    assert proc.returncode == 2 and "usage: host_lock.py" in proc.stderr and proc.stdout == ""


def test_colabs_preinstalled_torch_is_named_as_replaced(tmp_path):
    """Colab: torch 2.11.0+cu128 is in neither lock; the CUDA 12 lock replaces it, and says so with a time."""
    smi = stand_in_smi(tmp_path, *HOSTS["T4 on a CUDA 12.8 driver"])
    host = host_lock.read_host(str(smi))
    assert (host.driver_cuda, host.capability, host.gpu) == ((12, 8), (7, 5), "Tesla T4")
    colab = decide(Host(host.driver_cuda, host.capability, host.gpu, torch="2.11.0+cu128"))
    assert colab.lock == "cu12" and "torch 2.11.0+cu128" in colab.replaces and "torch 2.10.0" in colab.replaces
    assert re.search(r"about \d+\.\d GB to download, roughly \d+-\d+ minutes", colab.replaces)
    assert decide(Host((12, 8), (7, 5), "Tesla T4", torch="2.10.0+cu128")).replaces == ""  # already the lock's


def test_cards_no_release_serves_get_the_kit_without_vllm():
    """A P100 (sm_60): neither lock's torch ships kernels for it, so the runtime's torch stays and vLLM is out,
    in one sentence. A V100 (sm_70) on a CUDA 13 driver: torch 2.13.0 (CUDA 13) has none, the CUDA 12 lock has."""
    p100 = decide(Host((12, 4), (6, 0), "Tesla P100-PCIE-16GB", torch="2.6.0+cu124"))
    assert (p100.lock, p100.vllm, p100.keep_torch) == ("cu12", False, "2.6.0+cu124")
    assert "sm_60" in p100.line and "without vLLM" in p100.line and p100.line.count(". ") == 0
    assert "torch==2.6.0+cu124" in p100.pins() and not [p for p in p100.pins() if p.startswith("vllm")]
    with pytest.raises(SystemExit, match="no torch"):
        decide(Host((12, 4), (6, 0), "Tesla P100-PCIE-16GB", torch=None))
    v100 = decide(Host((13, 0), (7, 0), "Tesla V100-SXM2-16GB"))
    assert v100.lock == "cu12" and "has no kernels for Tesla V100" in v100.why
    assert v100.vllm and host_lock.vllm_backends(host_lock.LOCKS["cu12"], (7, 0)) == ["TRITON_ATTN"]
    old = decide(Host((11, 8), (8, 6), "NVIDIA A10G", torch="2.1.0+cu118"))
    assert not old.vllm and old.keep_torch == "2.1.0+cu118" and "runs neither lock's torch" in old.why


def test_the_doctor_row_follows_the_decision(tmp_path):
    from grpo_fast import doctor

    for host, (lock, _, words) in EXPECTED.items():
        smi = stand_in_smi(tmp_path / host.split()[0], *HOSTS[host])
        row = doctor.host_lock_row(host_lock.read_host(str(smi)))
        assert row.value == host_lock.LOCKS[lock].requirements and row.note.startswith("this host: ")
        assert all(w in row.note for w in words), row.note
    none = doctor.host_lock_row(host_lock.read_host(str(tmp_path / "absent")))
    assert none.value == "requirements.txt" and "vLLM no" in none.note


# --------------------------------------------------------------------------- the table, against the wheels


@pytest.mark.network
@pytest.mark.parametrize("which", ["cu13", "cu12"])
def test_what_each_release_ships_is_read_off_its_wheels(which):
    """vLLM's kernels (every vllm/_C*.so: the architectures all of them carry SASS for), the CUDA they link, and
    its attention backends' compute-capability bounds, as the decision's table gives them."""
    import elf_cuda
    import wheel_audit

    lock = host_lock.LOCKS[which]
    w = wheel_audit.wheel("vllm", lock.vllm)
    kernels = [n for n in w.names if re.fullmatch(r"vllm/_C[\w.]*\.so", n)]
    shipped = [{int(a[3:]) for a in elf_cuda.kernel_archs(w.read(n)) if a.startswith("sm_")} for n in kernels]
    assert set.intersection(*shipped) == lock.vllm_sm
    assert {elf_cuda.cudart_major(w.read(n)) for n in kernels} == {lock.driver_cuda}
    for name, low, high in lock.attention:
        if name == "TRITON_ATTN":
            continue
        tree = ast.parse(w.read(f"vllm/v1/attention/backends/{name.lower()}.py"))
        code = [ast.unparse(f) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                and f.name == "supports_compute_capability" and "DeviceCapability(" in ast.unparse(f)]
        bounds = [int(a) * 10 + int(b) for a, b in re.findall(r"DeviceCapability\((\d+),\s*(\d+)\)", code[0])]
        assert bounds == ([low] if high == 999 else [low, high]), (name, bounds)  # code only: comments dropped


@pytest.mark.network
@pytest.mark.parametrize("which", ["cu13", "cu12"])
def test_torchs_kernels_are_read_off_its_wheel(which):
    """torch's libtorch_cuda.so (read member by member from PyPI; about 450 MB the first time, then cached)."""
    import elf_cuda
    from pinned import RemoteWheel

    lock = host_lock.LOCKS[which]
    binary = RemoteWheel("torch", lock.torch).read("torch/lib/libtorch_cuda.so")
    assert {int(a[3:]) for a in elf_cuda.kernel_archs(binary) if a.startswith("sm_")} == lock.torch_sm
    assert elf_cuda.cudart_major(binary) == lock.driver_cuda


def test_grpo_fast_doctor_names_the_lock_on_a_stand_in_t4(tmp_path):
    """The real command, its nvidia-smi a T4 on a CUDA 12.8 driver: the row says the CUDA 12 lock, vLLM yes, why."""
    stand_in_smi(tmp_path, *HOSTS["T4 on a CUDA 12.8 driver"])
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "grpo_fast", "doctor", "--json"], capture_output=True, text=True,
                          timeout=600, env=env)
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    row = rows["lock for this host"]
    assert row["value"] == "requirements-gpu-cu12.txt", row
    assert row["note"].startswith("this host: the CUDA 12 lock; vLLM yes: a CUDA 12.8 driver runs CUDA 12 builds")


def test_doctor_compares_a_cuda_12_install_with_the_cuda_12_lock():
    """The CUDA 12 lock installed on a T4: no row calls torch 2.10.0 or vllm 0.19.1 off the lock."""
    from grpo_fast import doctor

    pins = doctor.lock_pins(gpu=True, cuda12=True)[0]
    versions = {k: pins[k] for k in (*doctor.CORE, *doctor.OPTIONAL_GPU, "unsloth-zoo")}
    m = doctor.Machine("3.11.7", {**versions, "torch": "2.10.0+cu128"}, cuda=True, gpu_name="Tesla T4", gpu_gb=14.7,
                       capability=(7, 5), imports={n: "ok" for n in doctor.OPTIONAL_GPU},
                       built_cuda={"torch": (12, 8), "vllm": (12, 0)})
    rows = {r.name: r for r in doctor.checks(m)}
    assert rows["torch"].status == doctor.OK and rows["vllm"].status == doctor.OK, (rows["torch"], rows["vllm"])
    assert "vllm/torch" not in rows and rows["unsloth-zoo"].status == doctor.OK
    cu13 = doctor.Machine("3.11.7", {**versions, "torch": "2.10.0+cu128"}, cuda=True, gpu_name="Tesla T4",
                          gpu_gb=14.7, capability=(7, 5), imports={n: "ok" for n in doctor.OPTIONAL_GPU},
                          built_cuda={"torch": (13, 0)})  # a CUDA 13 torch: the CUDA 13 lock's pins apply
    assert {r.name: r for r in doctor.checks(cu13)}["vllm"].status == doctor.WARN
