"""How deep a JSON body may nest: 64 levels, where no Kubernetes object needs 20.

A body nested thousands deep is refused by the JSON parsers themselves (their
recursion limit); one nested hundreds deep would parse and then cost every walk over
it. The admin API and the webhook refuse what is deeper than ``MAX_NESTING`` as
malformed (422, or the webhook's refused review), naming the limit; the scheduler
verbs, on the hot path, leave it to their decoder's limit and answer its refusal in
the verb's ``Error``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import AfterValidator

MAX_NESTING = 64

_T = TypeVar("_T")


def nesting_depth_exceeds(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` has objects or arrays nested more than ``limit`` deep (the
    value itself is level 1). Iterative: a deep value cannot exhaust the stack here."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Any
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _shallow(value: _T) -> _T:
    if nesting_depth_exceeds(value, MAX_NESTING - 1):  # the field sits one level down
        raise ValueError(f"malformed: nested deeper than {MAX_NESTING} levels")
    return value


#: Marks a free-form field (``Annotated[dict[str, Any], Shallow]``) as depth-checked.
Shallow = AfterValidator(_shallow)
