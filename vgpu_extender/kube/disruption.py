"""PodDisruptionBudgets as kube-scheduler's preemption reads them.

``violations`` counts the victims whose eviction would break a budget, exactly as
kube-scheduler's ``filterPodsWithPDBViolation`` does: each budget starts from its
``status.disruptionsAllowed``; every victim it selects (same namespace, a non-empty
label selector that matches, not already in ``status.disruptedPods``) takes one
from it; a victim is violating when a budget it took from is below zero. A nil or
empty selector, or one that does not parse, selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class SelectorError(ValueError):
    """A label selector the API server would refuse (kube-scheduler skips its budget)."""


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    return value if isinstance(value, Mapping) else {}


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expression.get("key")
    operator = expression.get("operator")
    values = expression.get("values") or []
    if not isinstance(key, str) or not key or not isinstance(values, list):
        raise SelectorError(f"matchExpressions: invalid expression {dict(expression)!r}")
    if operator in ("In", "NotIn"):
        if not values:
            raise SelectorError(f"matchExpressions: {operator} on {key!r} needs values")
        present = bool(key in labels and labels[key] in values)
        return present if operator == "In" else not present
    if operator in ("Exists", "DoesNotExist"):
        if values:
            raise SelectorError(f"matchExpressions: {operator} on {key!r} takes no values")
        return bool((key in labels) == (operator == "Exists"))
    raise SelectorError(f"matchExpressions: unknown operator {operator!r} on {key!r}")


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a budget's ``spec.selector`` selects a pod with ``labels``.

    ``None`` and ``{}`` select nothing (as for a PodDisruptionBudget); raises
    ``SelectorError`` for a malformed selector.
    """
    if not selector:
        return False
    if not isinstance(selector, Mapping):
        raise SelectorError(f"invalid label selector {selector!r}")
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError(f"invalid label selector {dict(selector)!r}")
    if not match_labels and not expressions:
        return False
    if any(labels.get(str(k)) != v for k, v in match_labels.items()):
        return False
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise SelectorError(f"matchExpressions: invalid expression {expression!r}")
        if not _expression_matches(expression, labels):
            return False
    return True


def _allowed(pdb: Mapping[str, Any]) -> int:
    value = _section(pdb, "status").get("disruptionsAllowed")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def violations(victims: Sequence[Mapping[str, Any]], pdbs: Sequence[Mapping[str, Any]]) -> int:
    """How many of ``victims`` (pod objects, most important first, as kube-scheduler
    orders them) would be evicted against a PodDisruptionBudget among ``pdbs``."""
    allowed = [_allowed(pdb) for pdb in pdbs]
    count = 0
    for pod in victims:
        meta = _section(pod, "metadata")
        labels = meta.get("labels")
        if not isinstance(labels, Mapping) or not labels:
            continue  # a pod without labels matches no budget
        violated = False
        for i, pdb in enumerate(pdbs):
            pdb_meta = _section(pdb, "metadata")
            if pdb_meta.get("namespace") != meta.get("namespace"):
                continue
            try:
                if not selects(_section(pdb, "spec").get("selector"), labels):
                    continue
            except SelectorError:
                continue
            if meta.get("name") in _section(_section(pdb, "status"), "disruptedPods"):
                continue  # already being evicted through the API: not counted again
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        count += violated
    return count
