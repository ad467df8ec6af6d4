"""An audit of a GPU lock by its wheels' own metadata and code: what a first GPU user would hit, found in CI.

``audit(lock)`` reads the locked wheels (tests/helpers/pinned.py: whole wheels for the packages the contract tests also
read, single members over HTTP range requests for the rest) and returns one ``Finding`` per problem, each naming
the package and the fix. The rules, each a question no import on this CPU machine can answer:

1. every quantization method the kit's profiles ask vLLM for is in the locked vLLM, or registered by a pinned
   plugin (``vllm.general_plugins`` entry point) whose ``from vllm... import`` lines all resolve in that vLLM;
2. no package was built for another torch (an exact ``torch==`` requirement);
3. the packages need one CUDA major between them (torch's ``cuda-toolkit``, ``-cuNN`` packages and ``[cuNN]``
   extras, xformers' ``cpp_lib.json``, the ``libcudart.so.N`` vLLM's kernels link; bitsandbytes ships one
   library per CUDA and must have the lock's);
   rules 2 and 3 also run over everything pip resolves for the lock (``check_resolved``), less what the install
   removes (``doctor.GPU_REMOVED``);
4. TRL's and Unsloth's declared vLLM ranges admit the locked vLLM, unless the lock records a decision for that
   very declaration (``doctor.VLLM_RANGE_DECISIONS``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from functools import cache

import elf_cuda
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
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
    whole = dist in WHOLE and version in {lock_pins(gpu=True, cuda12=c)[0].get(dist) for c in (False, True)}
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
    """Requirements ``extra`` adds (e.g. TRL's ``vllm`` extra)."""
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


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's own statements, including those under if/try/with (not inside functions or classes)."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            nested = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            nested += [stmt for handler in getattr(node, "handlers", []) for stmt in handler.body]
            out += _module_level(nested)
    return out


@cache
def module_names(vllm_version: str, dotted: str, star: bool = False) -> frozenset[str]:
    """Names a vLLM module defines or imports at module level, following ``from .x import *``. ``star``: only
    what a star import takes (``__all__`` where the module gives it, else its names without a leading _)."""
    w = wheel("vllm", vllm_version)
    member = _module_file(set(w.names), dotted)
    if member is None:
        return frozenset()
    names: set[str] = set()
    exported: set[str] | None = None
    package = dotted if member.endswith("__init__.py") else dotted.rpartition(".")[0]
    for node in _module_level(ast.parse(w.read(member)).body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
                    if t.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        exported = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if any(a.name == "*" for a in node.names):
                base = package.split(".")
                source = (".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
                          if node.level else node.module)
                names |= module_names(vllm_version, source, star=True)
            names |= {a.asname or a.name for a in node.names if a.name != "*"}
    if star:
        return frozenset(exported if exported is not None else {n for n in names if not n.startswith("_")})
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
    """Rule 1: each method the kit asks vLLM for is in the locked vLLM or a pinned plugin that fits it."""
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


def cuda_majors(reqs: list[Requirement]) -> set[int]:
    """CUDA majors a package's requirements name: ``cuda-toolkit==``, ``-cuNN`` packages, ``[cuNN]`` extras."""
    majors: set[int] = set()
    for req in reqs:
        found = re.search(r"-cu(\d\d)$", req.name) or next(
            (m for e in req.extras if (m := re.fullmatch(r"cu(\d\d)", e))), None)
        if found:
            majors.add(int(found.group(1)))
        if req.name == "cuda-toolkit":
            majors |= {Version(s.version).major for s in req.specifier if s.operator == "=="}
    return majors


def torch_and_cuda(packages: dict[str, tuple[str, list[Requirement]]], torch: str,
                   built: dict[str, set[int]], shipped: dict[str, set[int]]) -> list[Finding]:
    """Rules 2 and 3 over ``packages`` (name -> (version, requirements a plain install pulls)): an exact torch
    other than the lock's; CUDA majors that disagree. ``built``: CUDA majors read off binaries (xformers' build);
    ``shipped``: packages with one library per CUDA (bitsandbytes), which must have the lock's. A package whose
    own requirements name several majors ships for each of them."""
    out = []
    needs: dict[str, set[int]] = {}
    supports = dict(shipped)
    for dist, (version, reqs) in sorted(packages.items()):
        for req in reqs:
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if req.name == "torch" and exact and exact[0] != torch:
                out.append(Finding(dist, f"{dist} {version} is built for torch {exact[0]}, the lock pins {torch}",
                                   f"pin the {dist} release built for torch {torch}, or torch {exact[0]}"))
        majors = cuda_majors(reqs) | built.get(dist, set())
        if len(majors) == 1:
            needs[dist] = majors
        elif majors:
            supports[dist] = majors
    wanted = set().union(*needs.values()) if needs else set()
    if len(wanted) > 1:
        by = ", ".join(f"{d} CUDA {'/'.join(map(str, sorted(m)))}" for d, m in sorted(needs.items()))
        out.append(Finding("/".join(sorted(needs)), f"the locked packages need different CUDA majors: {by}",
                           "pin builds of one CUDA major (the one torch is built for), or remove the odd one"))
    for dist, majors in sorted(supports.items()):
        if wanted and not wanted & majors:
            out.append(Finding(dist, f"{dist} ships nothing for CUDA {sorted(wanted)}",
                               f"pin a {dist} release with a CUDA {sorted(wanted)[0]} build"))
    return out


def check_binaries(lock: dict[str, str]) -> list[Finding]:
    """Rules 2 and 3 over the pinned packages, read off their wheels."""
    if "torch" not in lock:
        return []
    binaries = {d: v for d, v in lock.items() if has_binary(d, v)}
    packages = {d: (v, unconditional(requirements(d, v))) for d, v in binaries.items()}
    built = binary_builds(packages)
    shipped: dict[str, set[int]] = {}
    if "bitsandbytes" in binaries:
        names = wheel("bitsandbytes", binaries["bitsandbytes"]).names
        libs = [re.search(r"libbitsandbytes_cuda(\d+)\.so$", n) for n in names]
        shipped["bitsandbytes"] = {int(m.group(1)) // 10 for m in libs if m}
    return torch_and_cuda(packages, lock["torch"], built, shipped)


def check_resolved(installs: list[dict], torch: str, removed: set[str]) -> list[Finding]:
    """Rules 2 and 3 over everything pip installs for the lock (``pip install --dry-run --report``'s ``install``
    list, whose metadata carries each package's requirements), less what the install then removes. A package's
    requirements include those of the extras others ask of it (vllm asks nvidia-cutlass-dsl[cu13])."""
    parsed: dict[str, tuple[str, list[Requirement]]] = {}
    for item in installs:
        meta = item["metadata"]
        reqs = []
        for line in meta.get("requires_dist") or []:
            try:
                reqs.append(Requirement(line))
            except InvalidRequirement:
                continue
        parsed[meta["name"].lower().replace("_", "-")] = (meta["version"], reqs)
    asked: dict[str, set[str]] = {name: {""} for name in parsed}
    for _, reqs in parsed.values():
        for req in unconditional(reqs):
            asked.setdefault(req.name.lower().replace("_", "-"), {""}).update(req.extras)
    packages = {name: (version, [r for r in reqs if any(r in _pulled([r], extra) for extra in asked[name])])
                for name, (version, reqs) in parsed.items() if name not in removed}
    return torch_and_cuda(packages, torch, binary_builds(packages), {})


def binary_builds(packages: dict[str, tuple[str, list[Requirement]]]) -> dict[str, set[int]]:
    """CUDA majors read off binaries whose requirements do not say (xformers' ``cpp_lib.json``; the CUDA runtime
    vLLM's kernels link, which its METADATA does not name)."""
    out = {}
    if "xformers" in packages and (build := xformers_build(packages["xformers"][0])) and build["version"].get("cuda"):
        out["xformers"] = {build["version"]["cuda"] // 100}  # e.g. 1208: CUDA 12.8 (libcudart.so.12)
    if "vllm" in packages and (major := vllm_cudart(packages["vllm"][0])):
        out["vllm"] = {major}
    return out


@cache
def vllm_cudart(version: str) -> int | None:
    """The CUDA major vLLM's own kernels (``vllm/_C*.so``) link: ``libcudart.so.12`` for 0.19.1."""
    w = wheel("vllm", version)
    kernels = sorted(n for n in w.names if re.fullmatch(r"vllm/_C[\w.]*\.so", n))
    majors = {elf_cuda.cudart_major(w.read(n)) for n in kernels} - {None}
    return max(majors) if majors else None


def _pulled(reqs: list[Requirement], extra: str) -> list[Requirement]:
    return unconditional(reqs) if not extra else [r for r in reqs if r in unconditional(reqs) or
                                                  r in extra_requirements(reqs, extra)]


# --------------------------------------------------------------------------- rule 4: declared vLLM ranges


def check_vllm_ranges(lock: dict[str, str], accepted: dict[str, dict[str, str]]) -> list[Finding]:
    """Rule 4. A decision covers one declaration only: the package's version, its declared range and the locked
    vLLM must all be the ones it names, so a new TRL, a new range or a new vLLM is looked at again."""
    vllm = lock.get("vllm")
    out = []
    for dist in ("trl", "unsloth", "unsloth-zoo"):
        if vllm is None or dist not in lock:
            continue
        reqs = requirements(dist, lock[dist])
        declared = [r for r in unconditional(reqs) + extra_requirements(reqs, "vllm") if r.name == "vllm"]
        for req in declared:
            if req.specifier.contains(vllm, prereleases=True):
                continue
            decision = accepted.get(dist, {})
            if (decision.get("version") == lock[dist] and decision.get("vllm") == vllm
                    and SpecifierSet(decision.get("declared", "")) == req.specifier):
                continue
            out.append(Finding(dist, f"{dist} {lock[dist]} declares vllm{req.specifier}, the lock pins {vllm}",
                               "pin a vLLM in that range, or record the decision (this version, range and vLLM) "
                               "and its reason in grpo_fast.doctor.VLLM_RANGE_DECISIONS and docs/usage.md"))
    return out


def audit(lock: dict[str, str], accepted: dict[str, dict[str, str]]) -> list[Finding]:
    """Every finding for ``lock`` (package -> version; normalised names), GPU packages and torch included."""
    return check_quantization(lock) + check_binaries(lock) + check_vllm_ranges(lock, accepted)
