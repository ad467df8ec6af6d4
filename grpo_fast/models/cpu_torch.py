"""torch's CPU build for a host without an NVIDIA GPU, the way PyTorch documents it (``pip install torch
--index-url https://download.pytorch.org/whl/cpu``), with a fast fallback to what pip finds.

Why: on Linux x86_64, ``torch==2.13.0`` from PyPI is the CUDA 13 build, a 527 MB wheel plus about 2 GB of NVIDIA
libraries that a laptop never uses; the CPU build is about 190 MB. Where PyTorch's index cannot be reached (a
firewall, a mirror-only network), the probe says so within seconds instead of waiting out pip's retries, and pip
then installs what its own indexes hold. Either way the script says which build it installed.

``make setup`` runs this file by path with the new venv's interpreter, before the kit's dependencies exist:
standard library only. ``python cpu_torch.py --python .venv/bin/python --requirements requirements.txt``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

try:
    from grpo_fast.models.host_lock import read_host
except ImportError:  # run by path (make setup): host_lock.py sits beside this file
    from host_lock import read_host  # type: ignore[no-redef]

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PROBE_S = 5.0


def torch_pin(requirements: Path) -> str:
    """The ``torch==`` version pinned in ``requirements`` (following ``-r`` includes)."""
    for raw in requirements.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            try:
                return torch_pin(requirements.parent / line[3:].strip())
            except LookupError:
                continue
        if found := re.fullmatch(r"torch\s*==\s*([\w.+]+)", line):
            return found.group(1)
    raise LookupError(f"{requirements} pins no torch==")


def unreachable(index: str, timeout: float = PROBE_S) -> str | None:
    """None where ``index`` answers within ``timeout`` seconds, else why not (one short phrase)."""
    try:
        with urllib.request.urlopen(f"{index.rstrip('/')}/torch/", timeout=timeout) as reply:
            return None if reply.status == 200 else f"HTTP {reply.status}"
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))[:120] or type(err).__name__


def installed_build(python: str) -> str:
    """Which torch the interpreter has: '2.13.0+cpu (the CPU build)' or '2.13.0 (a CUDA 13.0 build)'."""
    code = "import torch; print(torch.__version__, torch.version.cuda or '')"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=600)
    if proc.returncode:
        return "none that imports: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
    version, _, cuda = proc.stdout.strip().partition(" ")
    return f"{version} ({f'a CUDA {cuda} build' if cuda else 'the CPU build'})"


def install(python: str, version: str, index: str = CPU_INDEX, extra: tuple[str, ...] = ()) -> int:
    """Install torch ``version`` into ``python``'s environment: the CPU build from ``index`` where it answers,
    else what pip finds. Nothing on a host with an NVIDIA GPU (its lock decides: grpo-fast doctor)."""
    host = read_host()
    if host.driver_cuda is not None:
        print(f"cpu_torch: an NVIDIA GPU ({host.gpu or 'nvidia-smi'}): torch comes from the requirements as pinned")
        return 0
    pip = [python, "-m", "pip", "install", "-q", *extra]
    start = time.monotonic()
    why = unreachable(index)
    if why is None:
        print(f"cpu_torch: no NVIDIA GPU: torch {version} from PyTorch's CPU index {index}")
        if subprocess.run([*pip, "--timeout", "30", "--index-url", index, f"torch=={version}"]).returncode == 0:
            print(f"cpu_torch: installed torch {installed_build(python)}")
            return 0
        why = "pip could not install from it"
    print(f"cpu_torch: PyTorch's CPU index {index} cannot be reached ({why}; {time.monotonic() - start:.1f} s): "
          f"torch {version} from pip's own indexes instead")
    code = subprocess.run([*pip, f"torch=={version}"]).returncode
    print(f"cpu_torch: installed torch {installed_build(python)}" if code == 0 else "cpu_torch: pip failed")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="torch's CPU build on a host without an NVIDIA GPU")
    parser.add_argument("--python", default=sys.executable, help="the environment's interpreter")
    parser.add_argument("--requirements", type=Path, default=Path("requirements.txt"), help="where torch is pinned")
    parser.add_argument("--index", default=CPU_INDEX, help="PyTorch's CPU wheel index")
    parser.add_argument("--pip-arg", action="append", default=[], help="passed to pip (e.g. --dry-run)")
    args = parser.parse_args(argv)
    try:
        version = torch_pin(args.requirements)
    except (OSError, LookupError) as err:
        print(f"cpu_torch: {err}", file=sys.stderr)
        return 2
    return install(args.python, version, args.index, tuple(args.pip_arg))


if __name__ == "__main__":
    raise SystemExit(main())
