"""RFC 6902 JSON Patch (add, replace, remove) with RFC 6901 pointers, applied to a copy:
what the webhook answers and what deploy/'s kustomizations carry."""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def json_patch(obj: Obj, operations: list[dict[str, Any]]) -> Obj:
    """Apply add / replace / remove (what deploy/ uses) to a copy of ``obj``."""
    result = copy.deepcopy(obj)
    for op in operations:
        *parents, last = _pointer(op["path"])
        node: Any = result
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        kind = op["op"]
        if kind not in ("add", "replace", "remove"):
            raise ValueError(f"unsupported JSON patch op {kind!r}")
        if isinstance(node, list):
            index = len(node) if last == "-" else int(last)
            if kind == "remove":
                del node[index]
            elif kind == "replace":
                node[index] = copy.deepcopy(op["value"])
            else:
                node.insert(index, copy.deepcopy(op["value"]))
        elif kind == "remove":
            del node[last]
        else:
            if kind == "replace" and last not in node:
                raise KeyError(f"replace of a missing key {op['path']!r}")
            node[last] = copy.deepcopy(op["value"])
    return result
