"""Readers for the few pod and node fields the extender needs, on plain dicts.

Objects stay the JSON the API server sent (decoded once, never parsed into models):
full model parsing of pod and node lists is slow and buys nothing here. A missing
field reads as empty; a field of the wrong type raises :class:`MalformedObject`
naming it, rather than an ``AttributeError`` deep in a caller.
"""

from collections.abc import Mapping
from typing import Any

from vgpu_extender.kube.errors import MalformedObject

KubeObject = dict[str, Any]
"""A Kubernetes object as decoded JSON (``apiVersion``, ``kind``, ``metadata``, ...)."""

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _section(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedObject(key, value, "an object")
    return value


def _string(section: Mapping[str, Any], key: str, where: str) -> str:
    value = section.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedObject(f"{where}.{key}", value, "a string")
    return value


def _string_map(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    value = _section(obj, "metadata").get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedObject(f"metadata.{key}", value, "an object of strings")
    for k, v in value.items():
        if not isinstance(v, str):
            raise MalformedObject(f"metadata.{key}[{k!r}]", v, "a string")
    return dict(value)


def name(obj: Mapping[str, Any]) -> str:
    return _string(_section(obj, "metadata"), "name", "metadata")


def namespace(obj: Mapping[str, Any]) -> str:
    return _string(_section(obj, "metadata"), "namespace", "metadata")


def uid(obj: Mapping[str, Any]) -> str:
    return _string(_section(obj, "metadata"), "uid", "metadata")


def resource_version(obj: Mapping[str, Any]) -> str:
    return _string(_section(obj, "metadata"), "resourceVersion", "metadata")


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.annotations`` (empty when absent)."""
    return _string_map(obj, "annotations")


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """A copy of ``metadata.labels`` (empty when absent)."""
    return _string_map(obj, "labels")


def deletion_timestamp(obj: Mapping[str, Any]) -> str | None:
    """``metadata.deletionTimestamp``: set once deletion started (graceful termination)."""
    value = _string(_section(obj, "metadata"), "deletionTimestamp", "metadata")
    return value or None


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return deletion_timestamp(obj) is not None


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``, the key kube-scheduler and kubectl use."""
    return f"{namespace(pod)}/{name(pod)}"


def pod_phase(pod: Mapping[str, Any]) -> str:
    """``status.phase``; empty when the server has not set it yet."""
    return _string(_section(pod, "status"), "phase", "status")


def is_terminal(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: its containers will not run again, so its devices are free."""
    return pod_phase(pod) in TERMINAL_PHASES


def node_name(pod: Mapping[str, Any]) -> str:
    """``spec.nodeName``; empty while the pod is unscheduled."""
    return _string(_section(pod, "spec"), "nodeName", "spec")


def scheduler_name(pod: Mapping[str, Any]) -> str:
    return _string(_section(pod, "spec"), "schedulerName", "spec")


def node_unschedulable(node: Mapping[str, Any]) -> bool:
    """``spec.unschedulable`` (cordoned)."""
    value = _section(node, "spec").get("unschedulable", False)
    if not isinstance(value, bool):
        raise MalformedObject("spec.unschedulable", value, "a boolean")
    return value
