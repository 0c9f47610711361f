"""Field and label selectors as the Kubernetes API server reads them, for the test server.

Field selectors: ``a=b``, ``a==b``, ``a!=b`` on a few supported fields per kind (others
are a 400, as on a real server). Label selectors: equality, inequality, ``key``,
``!key``, ``key in (a,b)`` and ``key notin (a,b)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Predicate = Callable[[Mapping[str, Any]], bool]

FIELDS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
        }
    ),
    "nodes": frozenset({"metadata.name", "spec.unschedulable"}),
    "leases": frozenset({"metadata.name", "metadata.namespace"}),
}

_SET_TERM = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


class SelectorError(ValueError):
    """A selector the server cannot read; the message is what the API server says."""


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses (``in (a,b)`` keeps its commas)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


def _equality(term: str) -> tuple[str, bool, str] | None:
    """``(key, negated, value)`` for ``k=v``, ``k==v``, ``k!=v``; None otherwise."""
    for op, negated in (("!=", True), ("==", False), ("=", False)):
        if op in term:
            key, value = term.split(op, 1)
            return key.strip(), negated, value.strip()
    return None


def field_selector(kind: str, selector: str | None) -> Predicate | None:
    if not selector:
        return None
    checks: list[tuple[str, bool, str]] = []
    for term in _split_terms(selector):
        parsed = _equality(term)
        if parsed is None:
            raise SelectorError(f"invalid field selector: {term!r}: expected key=value")
        if parsed[0] not in FIELDS.get(kind, frozenset()):
            raise SelectorError(f'field label not supported: "{parsed[0]}"')
        checks.append(parsed)

    def predicate(obj: Mapping[str, Any]) -> bool:
        return all((_field_value(obj, key) == value) != negated for key, negated, value in checks)

    return predicate


def label_selector(selector: str | None) -> Predicate | None:
    if not selector:
        return None
    checks: list[Callable[[Mapping[str, str]], bool]] = []
    for term in _split_terms(selector):
        checks.append(_label_check(term))

    def predicate(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(check(labels) for check in checks)

    return predicate


def _label_check(term: str) -> Callable[[Mapping[str, str]], bool]:
    if match := _SET_TERM.match(term):
        key, op, raw = match.groups()
        values = frozenset(v.strip() for v in raw.split(",") if v.strip())
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    parsed = _equality(term)
    if parsed is not None:
        key, negated, value = parsed
        if not key:
            raise SelectorError(f"invalid label selector: {term!r}: empty key")
        return lambda labels: (labels.get(key) == value) != negated
    if term.startswith("!"):
        key = term[1:].strip()
        return lambda labels: key not in labels
    if re.fullmatch(r"[A-Za-z0-9./_-]+", term):
        return lambda labels: term in labels
    raise SelectorError(f"invalid label selector: {term!r}")
