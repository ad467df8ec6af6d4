"""The GPU locks audited by their wheels (tests/helpers/wheel_audit.py): both locks pass (CUDA 13 and CUDA 12), a
set that mixes CUDA majors fails, the CUDA 13 lock before this audit fails the lock before it fails for
the reasons a first GPU user hit (no bitsandbytes inside vLLM 0.33.0; xformers 0.0.35, a CUDA 12.8 build beside
CUDA 13), and every place that repeats the lock says the same (gpu extra, doctor's embedded lock, notebooks, docs).

Reads PyPI (the wheels, cached in ``$GRPO_FAST_CACHE/wheels``): skipped offline, failed under CI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import wheel_audit
from pinned import resolve_gpu_set

from grpo_fast import doctor

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.network

# The GPU lock as it stood before this audit (commit 1fbaa15), with its base.
LOCK_BEFORE = {"torch": "2.14.0", "unsloth": "2026.10.9", "unsloth-zoo": "2026.10.9", "vllm": "0.33.0",
               "bitsandbytes": "0.50.2", "xformers": "0.0.35", "trl": "1.14.2", "transformers": "5.17.0"}


def gpu_lock(cuda12: bool = False) -> dict[str, str]:
    return doctor.lock_pins(gpu=True, cuda12=cuda12)[0]


# each lock: (its file, whether it is the CUDA 12 one, its recorded range decisions, the CUDA major it needs)
LOCKS = {"cu13": ("requirements-gpu.txt", False, doctor.VLLM_RANGE_DECISIONS, 13),
         "cu12": ("requirements-gpu-cu12.txt", True, doctor.VLLM_RANGE_DECISIONS_CU12, 12)}


@pytest.mark.parametrize("which", sorted(LOCKS))
def test_the_gpu_lock_passes_the_wheel_audit(which):
    _, cuda12, accepted, _ = LOCKS[which]
    findings = wheel_audit.audit(gpu_lock(cuda12), accepted)
    assert not findings, "\n".join(map(str, findings))


def test_a_set_that_mixes_cuda_majors_fails(tmp_path):
    """torch 2.11.0 from PyPI (a CUDA 13.0 build) with the CUDA 12 lock's vllm 0.19.1 (kernels linking
    libcudart.so.12, built for torch 2.10.0), written as a lock file the way the repository's are read: rules 2
    and 3 both name it, so the audit above fails make test on such a file."""
    (tmp_path / "requirements-base.txt").write_text((ROOT / "requirements-base.txt").read_text())
    text = (ROOT / "requirements-gpu-cu12.txt").read_text().replace("torch==2.10.0", "torch==2.11.0")
    (tmp_path / "requirements-gpu-cu12.txt").write_text(text)
    mixed, source = doctor.lock_pins(gpu=True, root=tmp_path, cuda12=True)
    assert source == "requirements-gpu-cu12.txt" and mixed == {**gpu_lock(cuda12=True), "torch": "2.11.0"}
    findings = wheel_audit.audit(mixed, doctor.VLLM_RANGE_DECISIONS_CU12)
    text = "\n".join(map(str, findings))
    assert any("CUDA majors" in f.reason and "torch CUDA 13" in f.reason and "vllm CUDA 12" in f.reason
               for f in findings), text
    assert any(f.package == "vllm" and "built for torch 2.10.0" in f.reason for f in findings), text
    assert wheel_audit.vllm_cudart(gpu_lock(cuda12=True)["vllm"]) == 12
    assert wheel_audit.vllm_cudart(gpu_lock()["vllm"]) == 13


def test_the_cuda_12_locks_vllm_carries_bitsandbytes_in_tree():
    """4-bit inside vLLM with no plugin: 0.19.1 still ships the method, and the module unsloth-zoo patches."""
    lock = gpu_lock(cuda12=True)
    assert "bitsandbytes" in wheel_audit.vllm_methods(lock["vllm"])
    assert "vllm-bnb-plugin" not in lock and not wheel_audit.check_quantization(lock)
    assert "vllm/model_executor/layers/quantization/bitsandbytes.py" in wheel_audit.wheel("vllm", lock["vllm"]).names


def test_the_lock_before_fails_for_bitsandbytes_inside_vllm_and_for_xformers():
    findings = wheel_audit.audit(LOCK_BEFORE, doctor.VLLM_RANGE_DECISIONS)
    text = "\n".join(map(str, findings))
    # reason 1: 4-bit inside vLLM (the memory profile) with no bitsandbytes anywhere in the lock
    assert any(f.package == "vllm" and "'bitsandbytes'" in f.reason and "vllm-bnb-plugin" in f.fix
               for f in findings), text
    # reason 3: xformers 0.0.35 is a CUDA 12.8 build (libcudart.so.12) beside a CUDA 13 torch and vLLM
    assert any("CUDA majors" in f.reason and "xformers CUDA 12" in f.reason and "torch CUDA 13" in f.reason
               for f in findings), text


def test_each_rule_fires_on_a_lock_built_to_break_it():
    lock = gpu_lock()
    # rule 1: beside vllm 0.33.0 the plugin still registers bitsandbytes and its imports resolve
    assert not wheel_audit.check_quantization({**lock, "vllm": "0.33.0"})
    # rule 1: a bitsandbytes older than the plugin requires
    old_bnb = wheel_audit.check_quantization({**lock, "bitsandbytes": "0.45.5"})
    assert [f.package for f in old_bnb] == ["vllm-bnb-plugin"] and "bitsandbytes>=0.48.1" in old_bnb[0].reason
    # rule 2: vllm 0.32.0 is built for torch 2.13.0 exactly
    other_torch = wheel_audit.check_binaries({**lock, "torch": "2.14.0"})
    assert any(f.package == "vllm" and "torch 2.13.0" in f.reason for f in other_torch), other_torch
    # rule 4: no recorded decision, or one for another declaration
    ranged = wheel_audit.check_vllm_ranges(lock, accepted={})
    assert [f.package for f in ranged] == ["trl"] and "VLLM_RANGE_DECISIONS" in ranged[0].fix
    stale = {"trl": {**doctor.VLLM_RANGE_DECISIONS["trl"], "vllm": "0.31.0"}}
    assert [f.package for f in wheel_audit.check_vllm_ranges(lock, stale)] == ["trl"]
    assert not wheel_audit.check_vllm_ranges(lock, doctor.VLLM_RANGE_DECISIONS)


def test_what_pip_resolves_for_the_cuda_12_lock_passes_rules_2_and_3():
    """Everything pip brings for requirements-gpu-cu12.txt needs CUDA 12 (xformers 0.0.34 is pinned, not removed)."""
    installs = resolve_gpu_set("requirements-gpu-cu12.txt")
    lock = gpu_lock(cuda12=True)
    findings = wheel_audit.check_resolved(installs, lock["torch"], removed=set())
    assert not findings, "\n".join(map(str, findings))
    versions = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in installs}
    assert {k: versions.get(k) for k in lock} == lock


def test_what_pip_resolves_for_the_lock_passes_rules_2_and_3():
    """Beyond the pins: torchvision, torchaudio, flashinfer, the nvidia-* packages pip brings in; xformers, which
    unsloth pulls in, would fail (a CUDA 12 build) but the install removes it."""
    installs = resolve_gpu_set()
    names = {i["metadata"]["name"].lower().replace("_", "-") for i in installs}
    assert {"torch", "vllm", "torchvision", "xformers"} <= names, sorted(names)
    lock = gpu_lock()
    findings = wheel_audit.check_resolved(installs, lock["torch"], set(doctor.GPU_REMOVED))
    assert not findings, "\n".join(map(str, findings))
    assert wheel_audit.check_resolved(installs, "2.14.0", set(doctor.GPU_REMOVED))  # rule 2 can fire here
    kept = wheel_audit.check_resolved(installs, lock["torch"], removed=set())  # rule 3: xformers left installed
    assert any("xformers CUDA 12" in f.reason for f in kept), kept


def test_the_plugins_vllm_imports_resolve_in_the_locked_vllm():
    lock = gpu_lock()
    assert "bitsandbytes" in wheel_audit.plugin_methods("vllm-bnb-plugin", lock["vllm-bnb-plugin"])
    assert "bitsandbytes" not in wheel_audit.vllm_methods(lock["vllm"])
    assert wheel_audit.unresolved_vllm_imports("vllm-bnb-plugin", lock["vllm-bnb-plugin"], lock["vllm"]) == []
    # the same check finds what an older vLLM lacks (0.10.2 had no transformers_utils.repo_utils)
    missing = wheel_audit.unresolved_vllm_imports("vllm-bnb-plugin", lock["vllm-bnb-plugin"], "0.10.2")
    assert "vllm.transformers_utils.repo_utils (no such module)" in missing, missing


def test_the_removed_package_is_one_the_lock_pulls_in():
    """xformers is removed after install because unsloth requires it; if unsloth stops requiring it, drop the
    removal (and the step in the README and notebooks) instead of carrying it."""
    lock = gpu_lock()
    pulled = {r.name for r in wheel_audit.unconditional(wheel_audit.requirements("unsloth", lock["unsloth"]))}
    assert set(doctor.GPU_REMOVED) <= pulled
    assert not set(doctor.GPU_REMOVED) & set(lock)


# --------------------------------------------------------------------------- every copy of the lock agrees


def _pins(specs: list[str]) -> dict[str, str]:
    return {s.split("==")[0].lower().replace("_", "-"): s.split("==")[1] for s in specs}


@pytest.mark.parametrize("which", sorted(LOCKS))
@pytest.mark.parametrize("where", ["gpu extra", "embedded lock", "decision", "docs"])
def test_every_copy_of_each_gpu_lock_agrees(where, which):
    from grpo_fast.models import host_lock

    name, cuda12, _, _ = LOCKS[which]
    lock = gpu_lock(cuda12)
    gpu_only = {k: v for k, v in lock.items() if k not in doctor.lock_pins(gpu=False)[0] or k == "torch"}
    if where == "gpu extra":
        import tomllib

        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        assert _pins(extras["gpu-cu12" if cuda12 else "gpu"]) == {k: v for k, v in gpu_only.items() if k != "torch"}
    elif where == "embedded lock":
        table = doctor.EMBEDDED_LOCK["gpu-cu12" if cuda12 else "gpu"]
        embedded = {k.replace("_", "-"): v for k, v in {**doctor.EMBEDDED_LOCK["base"], **table}.items()}
        assert {k: v for k, v in lock.items() if k in embedded} == embedded and set(gpu_only) <= set(embedded)
    elif where == "decision":  # what the notebooks install: the decision module's pins, the whole file
        spec = host_lock.LOCKS[which]
        assert spec.requirements == name and _pins(list(spec.pins)) == lock
        assert (spec.torch, spec.vllm) == (lock["torch"], lock["vllm"])
    else:
        usage = (ROOT / "docs" / "usage.md").read_text()
        for dist, version in gpu_only.items():
            assert f"{dist} {version}" in usage, f"docs/usage.md does not give {dist} {version}"


def test_what_each_install_removes_is_named_once():
    """The CUDA 13 install removes xformers (a CUDA 12.8 build unsloth pulls in); the CUDA 12 lock pins the build
    that fits it and removes nothing. The decision module (what the notebooks run) and the docs say the same."""
    from grpo_fast.models import host_lock

    assert list(host_lock.LOCKS["cu13"].removed) == sorted(doctor.GPU_REMOVED)
    assert host_lock.LOCKS["cu12"].removed == () and "xformers" in gpu_lock(cuda12=True)
    usage = (ROOT / "docs" / "usage.md").read_text()
    assert "pip uninstall -y xformers" in usage and "pip uninstall -y xformers" in (ROOT / "README.md").read_text()


def test_unsloth_zoo_finds_in_the_plugin_what_it_patches():
    """unsloth-zoo imports the plugin's modules by path and patches names on them (4-bit LoRA inside vLLM);
    each name it reads must be there in the locked plugin, or Unsloth's 4-bit vLLM path breaks on load."""
    import ast

    lock = gpu_lock()
    zoo = wheel_audit.wheel("unsloth-zoo", lock["unsloth-zoo"])
    plugin = wheel_audit.wheel("vllm-bnb-plugin", lock["vllm-bnb-plugin"])
    paths = {"_vllm_bnb": "vllm_bnb_plugin/bitsandbytes.py", "_bnb_loader": "vllm_bnb_plugin/bitsandbytes_loader.py"}
    tree = ast.parse(zoo.read("unsloth_zoo/vllm_utils.py"))
    literals = {n.value for t in (tree, ast.parse(zoo.read("unsloth_zoo/empty_model.py"))) for n in ast.walk(t)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert {"vllm_bnb_plugin.bitsandbytes", "vllm_bnb_plugin.bitsandbytes_loader"} <= literals  # parsed right
    for handle, member in paths.items():
        read = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and n.value.id == handle}
        defined = {a.asname or a.name for n in ast.walk(ast.parse(plugin.read(member)))
                   if isinstance(n, (ast.ImportFrom, ast.Import)) for a in n.names}
        defined |= {n.name for n in ast.walk(ast.parse(plugin.read(member)))
                    if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        assert read and read <= defined, (member, read - defined)


def test_doctors_extension_probes_load_modules_the_locked_wheels_have():
    """doctor loads each binary the way its package does first; the module it imports must exist in the locked
    wheel (vLLM 0.32.0's kernels are vllm._C_stable_libtorch, not the vllm._C of older releases)."""
    from grpo_fast.models.cuda_stack import EXTENSION_PROBES

    cu12 = gpu_lock(cuda12=True)  # the same probes on the CUDA 12 lock's wheels (vllm 0.19.1, xformers 0.0.34)
    checked = [{"xformers": "0.0.35", **{k: v for k, v in lock.items() if k in EXTENSION_PROBES}}
               for lock in (gpu_lock(), cu12)]
    assert checked[1]["vllm"] == "0.19.1" and checked[1]["xformers"] == "0.0.34"
    for name, version in [item for versions in checked for item in versions.items()]:
        names = set(wheel_audit.wheel(name, version).names)
        statements = re.findall(r"(?:^|;)\s*(?:from ([\w.]+) import|import ([\w.]+))", EXTENSION_PROBES[name])
        for module in [a or b for a, b in statements]:
            path = module.replace(".", "/")
            assert any(n == f"{path}.py" or n == f"{path}/__init__.py" or
                       (n.startswith(f"{path}.") and n.endswith(".so")) for n in names), (name, module)
