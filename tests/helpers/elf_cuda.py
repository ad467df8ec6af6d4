"""What a CUDA binary (a shared object inside a wheel) says of itself, read from its ELF sections: the CUDA runtime
it links (``DT_NEEDED libcudart.so.N``) and the GPU architectures its embedded kernels are built for (the
``.nv_fatbin`` container: one entry per kernel image, SASS for one ``sm_XY`` or PTX for a ``compute_XY``).

Why: a wheel's METADATA need not name its CUDA (vllm 0.19.1 names no ``-cu12`` package, yet its ``_C.abi3.so``
needs ``libcudart.so.12``), and whether a release runs on a card (a T4 is sm_75) is decided by the kernels it
ships, not by its version. Standard library only: no cuobjdump on a CPU machine.
"""

from __future__ import annotations

import re
import struct

FATBIN_MAGIC = 0xBA55ED50


def _sections(elf: bytes) -> dict[str, tuple[int, int, int, int]]:
    """Section name -> (type, offset, size, link) of a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    entsize, count, names_at = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQII", elf, shoff + i * entsize) for i in range(count)]
    names = headers[names_at][4]
    out = {}
    for name, kind, _flags, _addr, offset, size, link, _info in headers:
        start = names + name
        out[elf[start: elf.index(b"\0", start)].decode()] = (kind, offset, size, link)
    return out


def needed(elf: bytes) -> list[str]:
    """The shared libraries the binary links (its DT_NEEDED entries)."""
    sections = _sections(elf)
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return []
    _, offset, size, _ = sections[".dynamic"]
    strings = sections[".dynstr"][1]
    out = []
    for at in range(offset, offset + size, 16):
        tag, value = struct.unpack_from("<qQ", elf, at)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            out.append(elf[strings + value: elf.index(b"\0", strings + value)].decode())
    return out


def cudart_major(elf: bytes) -> int | None:
    """The CUDA major of the runtime the binary links (``libcudart.so.12`` -> 12); None where it links none."""
    found = [int(m.group(1)) for lib in needed(elf) if (m := re.fullmatch(r"libcudart\.so\.(\d+)", lib))]
    return found[0] if found else None


def kernel_archs(elf: bytes) -> set[str]:
    """``sm_XY`` (SASS) and ``compute_XY`` (PTX) of every kernel image in the binary's fat binaries."""
    section = _sections(elf).get(".nv_fatbin")
    if section is None:
        return set()
    blob = elf[section[1]: section[1] + section[2]]
    out, pos = set(), 0
    while pos + 16 <= len(blob):
        magic, _version, header, size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # containers are 8-byte aligned
            continue
        entry, end = pos + header, pos + header + size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", blob, entry)
            arch = struct.unpack_from("<I", blob, entry + 28)[0]
            out.add(f"{'compute' if kind == 1 else 'sm'}_{arch}")
            entry += entry_header + payload
        pos = end
    return out


def runs_on(archs: set[str], capability: tuple[int, int]) -> bool:
    """Whether kernels built for ``archs`` run on a card of ``capability``: SASS for the same major and a minor no
    newer (sm_80 runs on an sm_86), or PTX for any older architecture (compiled by the driver)."""
    major, minor = capability
    for arch in archs:
        kind, _, number = arch.partition("_")
        m, n = divmod(int(number), 10)
        if kind == "sm" and m == major and n <= minor or kind == "compute" and (m, n) <= (major, minor):
            return True
    return False
