"""A container's environment as the kubelet gives it: ``$(NAME)`` in a value expands to
the value of a variable defined above it in the list, ``$$`` is a literal ``$``, and a
reference to a variable not defined above is left as written."""

from __future__ import annotations

import re
from typing import Any

_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(value: str, defined: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return defined.get(name, match.group(0))

    return _REFERENCE.sub(one, value)


def expanded_env(container_spec: dict[str, Any]) -> dict[str, str]:
    """The container's literal variables, each expanded against those above it
    (``valueFrom`` entries are left out: their values are not in the manifest)."""
    defined: dict[str, str] = {}
    for entry in container_spec.get("env") or []:
        if "value" in entry:
            defined[entry["name"]] = expand(str(entry["value"]), defined)
    return defined
