"""Write the images' constraints files from the installed, tested environment.

  python requirements/generate.py        # from a venv with pip install -e '.[test]'

Each file pins (``name==version``) every distribution in the dependency closure of one
side: ``node-agent.txt`` the base requirements of vgpu-extender, ``extender.txt`` the
base plus the ``extender`` extra. The versions are the ones installed here (the
environment the tests passed in), so an image installs what was tested; markers are
read for this interpreter and platform (the images' Python 3.11 on Linux).
Constraints name no extras (pip refuses them there): ``uvicorn[standard]`` is pinned
as ``uvicorn`` plus what its extra brings.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "vgpu-extender"
HERE = Path(__file__).resolve().parent
SIDES = {"node-agent": (), "extender": ("extender",)}
HEADER = """\
# Constraints for the {side} image: pip install -c requirements/{side}.txt ...
# Every distribution vgpu-extender{extras} needs, pinned to the version
# the tests passed with. Regenerate after changing dependencies in pyproject.toml,
# from a venv with pip install -e '.[test]':  python requirements/generate.py
"""


def closure(project: str, extras: Iterable[str]) -> dict[str, str]:
    """Canonical name -> installed version, for everything ``project[extras]`` needs."""
    pins: dict[str, str] = {}
    pending: list[tuple[str, frozenset[str]]] = [(project, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        dist = metadata.distribution(name)
        for text in dist.requires or ():
            requirement = Requirement(text)
            if not _applies(requirement, wanted):
                continue
            child = canonicalize_name(requirement.name)
            if child != canonicalize_name(project):
                pins[child] = metadata.version(child)
            pending.append((child, frozenset(requirement.extras)))
    return dict(sorted(pins.items()))


def _applies(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in (*extras, ""))


def render(side: str, extras: tuple[str, ...]) -> str:
    shown = f"[{','.join(extras)}]" if extras else " (base requirements only)"
    lines = [f"{name}=={version}" for name, version in closure(PROJECT, extras).items()]
    return HEADER.format(side=side, extras=shown) + "\n".join(lines) + "\n"


def main() -> int:
    for side, extras in SIDES.items():
        path = HERE / f"{side}.txt"
        path.write_text(render(side, extras), encoding="utf-8")
        sys.stderr.write(f"wrote {path.relative_to(HERE.parent)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
