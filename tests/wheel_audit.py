"""An audit of a GPU lock by its wheels' own metadata and code: what a first GPU user would hit, found in CI.

``audit(lock)`` reads the locked wheels (tests/pinned.py: whole wheels for the packages the contract tests also
read, single members over HTTP range requests for the rest) and returns one ``Finding`` per problem, each naming
the package and the fix. The rules, each a question no import on this CPU machine can answer:

1. every quantization method the kit's profiles ask vLLM for is in the locked vLLM, or registered by a pinned
   plugin (``vllm.general_plugins`` entry point) whose ``from vllm... import`` lines all resolve in that vLLM;
2. no binary extension in the lock was built for another torch (xformers' ``cpp_lib.json``; an exact
   ``torch==`` requirement) or another CUDA major;
3. the locked packages need one CUDA major between them (torch's ``cuda-toolkit``, ``-cuNN`` packages and
   ``[cuNN]`` extras, xformers' build; bitsandbytes ships one library per CUDA and must have the lock's);
4. TRL's and Unsloth's declared vLLM ranges admit the locked vLLM, unless the lock records a decision.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version
from pinned import PinnedWheel, RemoteWheel, linux_wheel

from grpo_fast.doctor import lock_pins
from grpo_fast.models import gpu
from grpo_fast.run.resolve import PROFILES

# Locked wheels the contract tests read whole anyway; everything else is read member by member.
WHOLE = {"vllm", "unsloth", "unsloth-zoo"}


@dataclass(frozen=True)
class Finding:
    package: str
    reason: str
    fix: str

    def __str__(self) -> str:
        return f"{self.package}: {self.reason} -> {self.fix}"


@cache
def wheel(dist: str, version: str) -> PinnedWheel | RemoteWheel:
    whole = dist in WHOLE and lock_pins(gpu=True)[0].get(dist) == version
    return PinnedWheel.get(dist, version) if whole else RemoteWheel(dist, version)


def requirements(dist: str, version: str) -> list[Requirement]:
    """Requires-Dist of the wheel's METADATA (markers kept; unparsable lines skipped)."""
    w = wheel(dist, version)
    meta = next(n for n in w.names if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
    out = []
    for line in w.read(meta).decode("utf-8").splitlines():
        if line.startswith("Requires-Dist:"):
            try:
                out.append(Requirement(line.split(":", 1)[1].strip()))
            except InvalidRequirement:
                continue
    return out


def unconditional(reqs: list[Requirement]) -> list[Requirement]:
    """Requirements a plain install pulls on Linux x86_64 (no extra)."""
    env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def extra_requirements(reqs: list[Requirement], extra: str) -> list[Requirement]:
    env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "extra": extra}
    return [r for r in reqs if r.marker is not None and "extra" in str(r.marker) and r.marker.evaluate(env)]


@cache
def has_wheel(dist: str, version: str) -> bool:
    try:
        return bool(linux_wheel(dist, version))
    except LookupError:  # sdist only: built on the user's machine, nothing to read here
        return False


def has_binary(dist: str, version: str) -> bool:
    """Whether the package's Linux wheel is platform-specific (sdist-only and pure wheels carry no binary)."""
    return has_wheel(dist, version) and not linux_wheel(dist, version)["filename"].endswith("-none-any.whl")


# --------------------------------------------------------------------------- rule 1: quantization methods


def methods_the_kit_uses() -> set[str]:
    """vLLM quantization methods the kit's profiles ask for (4-bit inside vLLM is bitsandbytes)."""
    used = {gpu.vllm_quantization(bool(p.get("load_in_4bit")), bool(p.get("use_vllm"))) for p in PROFILES.values()}
    return used - {None}


def vllm_methods(version: str) -> set[str]:
    """The ``QuantizationMethods`` literal of the vLLM wheel."""
    tree = ast.parse(wheel("vllm", version).read("vllm/model_executor/layers/quantization/__init__.py"))
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if getattr(target, "id", None) == "QuantizationMethods":
            return {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    raise LookupError(f"QuantizationMethods not found in vllm {version}")


def _sources(dist: str, version: str) -> dict[str, ast.Module]:
    w = wheel(dist, version)
    return {n: ast.parse(w.read(n)) for n in w.names if n.endswith(".py")}


def plugin_methods(dist: str, version: str) -> set[str]:
    """Quantization methods a package registers with vLLM: it declares a ``vllm.general_plugins`` entry point and
    calls ``register_quantization_config("name")``."""
    w = wheel(dist, version)
    entry = next((n for n in w.names if n.endswith(".dist-info/entry_points.txt")), None)
    if entry is None or "[vllm.general_plugins]" not in w.read(entry).decode("utf-8"):
        return set()
    out = set()
    for tree in _sources(dist, version).values():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) ==
                    "register_quantization_config" and node.args and isinstance(node.args[0], ast.Constant)):
                out.add(node.args[0].value)
    return out


def _module_file(names: set[str], dotted: str) -> str | None:
    path = dotted.replace(".", "/")
    return next((f for f in (f"{path}.py", f"{path}/__init__.py") if f in names), None)


@cache
def module_names(vllm_version: str, dotted: str) -> frozenset[str]:
    """Names a vLLM module defines or imports, following ``from .x import *`` (``__all__`` where given)."""
    w = wheel("vllm", vllm_version)
    member = _module_file(set(w.names), dotted)
    if member is None:
        return frozenset()
    names: set[str] = set()
    package = dotted if member.endswith("__init__.py") else dotted.rpartition(".")[0]
    for node in ast.walk(ast.parse(w.read(member))):  # module-level and conditional definitions alike
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                base = package.split(".")
                source = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                names |= module_names(vllm_version, source)
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
    return frozenset(names)


def unresolved_vllm_imports(dist: str, version: str, vllm_version: str) -> list[str]:
    """``from vllm.x import y`` lines of a plugin that the vLLM wheel cannot satisfy."""
    names = set(wheel("vllm", vllm_version).names)
    missing = []
    for tree in _sources(dist, version).values():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm"):
                continue
            if _module_file(names, node.module) is None:
                missing.append(f"{node.module} (no such module)")
                continue
            defined = module_names(vllm_version, node.module)
            for alias in node.names:
                if alias.name not in defined and _module_file(names, f"{node.module}.{alias.name}") is None:
                    missing.append(f"{node.module}.{alias.name}")
    return sorted(set(missing))


def check_quantization(lock: dict[str, str]) -> list[Finding]:
    vllm = lock.get("vllm")
    if vllm is None:
        return []
    out = []
    for method in sorted(methods_the_kit_uses() - vllm_methods(vllm)):
        plugins = [d for d in lock if d != "vllm" and has_wheel(d, lock[d]) and method in plugin_methods(d, lock[d])]
        if not plugins:
            out.append(Finding("vllm", f"vllm {vllm} has no {method!r} quantization (4-bit inside vLLM) and no "
                               "pinned plugin registers it", "pin the plugin that registers it (vllm-bnb-plugin) "
                               "in requirements-gpu.txt, or a vLLM that still ships it"))
        for plugin in plugins:
            missing = unresolved_vllm_imports(plugin, lock[plugin], vllm)
            if missing:
                out.append(Finding(plugin, f"imports what vllm {vllm} lacks: {', '.join(missing[:5])}",
                                   f"pin a {plugin} release written for vllm {vllm}, or the vLLM it was written for"))
            for req in unconditional(requirements(plugin, lock[plugin])):
                name = req.name.lower().replace("_", "-")
                if name in lock and not req.specifier.contains(lock[name], prereleases=True):
                    out.append(Finding(plugin, f"requires {req}, the lock pins {name} {lock[name]}",
                                       f"pin {name} within {req.specifier}"))
    return out


# --------------------------------------------------------------------------- rules 2 and 3: torch and CUDA


def xformers_build(version: str) -> dict | None:
    """xformers' own record of what its binary was built against (``xformers/cpp_lib.json``), or None."""
    w = wheel("xformers", version)
    return json.loads(w.read("xformers/cpp_lib.json")) if "xformers/cpp_lib.json" in w.names else None


def cuda_majors(dist: str, version: str) -> tuple[set[int], bool]:
    """(CUDA majors, whether the package needs exactly one of them) from its requirements and binaries."""
    majors: set[int] = set()
    for req in unconditional(requirements(dist, version)):
        found = re.search(r"-cu(\d\d)$", req.name) or next(
            (re.match(r"cu(\d\d)$", e) for e in req.extras if re.match(r"cu(\d\d)$", e)), None)
        if found:
            majors.add(int(found.group(1)))
        if req.name == "cuda-toolkit":
            majors |= {Version(s.version).major for s in req.specifier if s.operator == "=="}
    if dist == "xformers" and (build := xformers_build(version)) and build["version"].get("cuda"):
        majors.add(build["version"]["cuda"] // 100)
    if dist == "bitsandbytes":  # one library per CUDA version: supports any of them
        return {int(m.group(1)) // 10 for n in wheel(dist, version).names
                if (m := re.search(r"libbitsandbytes_cuda(\d+)\.so$", n))}, False
    return majors, True


def check_binaries(lock: dict[str, str]) -> list[Finding]:
    torch = lock.get("torch")
    binaries = {d: v for d, v in lock.items() if has_binary(d, v)}
    out = []
    for dist, version in sorted(binaries.items()):
        if dist == "torch" or torch is None:
            continue
        for req in unconditional(requirements(dist, version)):
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if req.name == "torch" and exact and exact[0] != torch:
                out.append(Finding(dist, f"{dist} {version} is built for torch {exact[0]}, the lock pins {torch}",
                                   f"pin the {dist} release built for torch {torch}, or torch {exact[0]}"))
        if dist == "xformers" and (build := xformers_build(version)):
            built = build["version"]["torch"]
            if built.split("+")[0] != torch:
                out.append(Finding(dist, f"xformers {version}'s binary was built for torch {built}, the lock pins "
                                   f"torch {torch}: it cannot load", "drop xformers from the installed set (pip "
                                   "uninstall -y xformers: Unsloth uses PyTorch attention) or pin a matching build"))
    needs: dict[str, set[int]] = {}
    supports: dict[str, set[int]] = {}
    for dist, version in binaries.items():
        majors, exact = cuda_majors(dist, version)
        if majors:
            (needs if exact else supports)[dist] = majors
    wanted = set().union(*needs.values()) if needs else set()
    if len(wanted) > 1:
        by = ", ".join(f"{d} CUDA {'/'.join(map(str, sorted(m)))}" for d, m in sorted(needs.items()))
        out.append(Finding("/".join(sorted(needs)), f"the locked packages need different CUDA majors: {by}",
                           "pin builds of one CUDA major (the one torch is built for)"))
    for dist, majors in supports.items():
        if wanted and not wanted & majors:
            out.append(Finding(dist, f"{dist} ships no library for CUDA {sorted(wanted)}",
                               f"pin a {dist} release with a CUDA {sorted(wanted)[0]} library"))
    return out


# --------------------------------------------------------------------------- rule 4: declared vLLM ranges


def check_vllm_ranges(lock: dict[str, str], accepted: dict[str, str]) -> list[Finding]:
    vllm = lock.get("vllm")
    out = []
    for dist in ("trl", "unsloth", "unsloth-zoo"):
        if vllm is None or dist not in lock or dist in accepted:
            continue
        reqs = requirements(dist, lock[dist])
        declared = [r for r in unconditional(reqs) + extra_requirements(reqs, "vllm") if r.name == "vllm"]
        for req in declared:
            if not req.specifier.contains(vllm, prereleases=True):
                out.append(Finding(dist, f"{dist} {lock[dist]} declares vllm{req.specifier}, the lock pins {vllm}",
                                   "pin a vLLM in that range, or record the decision and its reason in the lock "
                                   "(grpo_fast.doctor.VLLM_RANGE_DECISIONS) and docs/usage.md"))
    return out


def audit(lock: dict[str, str], accepted: dict[str, str]) -> list[Finding]:
    """Every finding for ``lock`` (package -> version; normalised names), GPU packages and torch included."""
    return check_quantization(lock) + check_binaries(lock) + check_vllm_ranges(lock, accepted)
