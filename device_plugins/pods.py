"""The few fields of a pod the agent reads, taken from its decoded JSON.

A field of the wrong type raises ``PodFormatError`` naming the field and the value,
instead of an ``AttributeError`` somewhere in the middle of an ``Allocate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class PodFormatError(ValueError):
    """A pod object has a field of an unexpected type."""

    def __init__(self, pod: str, where: str, value: object, expected: str) -> None:
        super().__init__(f"pod {pod}: field {where!r} should be {expected}, got {value!r}")


@dataclass(frozen=True, slots=True)
class ContainerView:
    name: str
    init: bool = False
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodView:
    """A pod as the agent needs it; ``containers`` are init containers first."""

    namespace: str
    name: str
    uid: str = ""
    phase: str = ""
    node_name: str = ""
    created: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[ContainerView, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _mapping(obj: Mapping[str, Any], key: str, pod: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PodFormatError(pod, f"{where}{key}", value, "an object")
    return value


def _text(obj: Mapping[str, Any], key: str, pod: str, where: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PodFormatError(pod, f"{where}{key}", value, "a string")
    return value


def _containers(spec: Mapping[str, Any], key: str, pod: str, init: bool) -> list[ContainerView]:
    items = spec.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise PodFormatError(pod, f"spec.{key}", items, "a list")
    views = []
    for position, item in enumerate(items):
        where = f"spec.{key}[{position}]."
        if not isinstance(item, Mapping):
            raise PodFormatError(pod, where.rstrip("."), item, "an object")
        env_items = item.get("env")
        if env_items is None:
            env_items = []
        if not isinstance(env_items, list):
            raise PodFormatError(pod, f"{where}env", env_items, "a list")
        env = {
            str(entry["name"]): entry["value"]
            for entry in env_items
            if isinstance(entry, Mapping)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("value"), str)
        }
        views.append(ContainerView(_text(item, "name", pod, where), init, env))
    return views


def pod_view(obj: Mapping[str, Any]) -> PodView:
    """Read a decoded pod; raises ``PodFormatError`` on a malformed field."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise PodFormatError("?", "metadata", meta, "an object")
    namespace = meta.get("namespace") or "default"
    name = meta.get("name") or ""
    pod = f"{namespace}/{name}"
    if not isinstance(namespace, str) or not isinstance(name, str) or not name:
        raise PodFormatError(pod, "metadata.name", name, "a non-empty string")
    annotations = _mapping(meta, "annotations", pod, "metadata.")
    for key, value in annotations.items():
        if not isinstance(value, str):
            raise PodFormatError(pod, f"metadata.annotations[{key!r}]", value, "a string")
    spec = _mapping(obj, "spec", pod, "")
    status = _mapping(obj, "status", pod, "")
    return PodView(
        namespace=namespace,
        name=name,
        uid=_text(meta, "uid", pod, "metadata."),
        phase=_text(status, "phase", pod, "status."),
        node_name=_text(spec, "nodeName", pod, "spec."),
        created=_text(meta, "creationTimestamp", pod, "metadata."),
        annotations=dict(annotations),
        containers=tuple(
            _containers(spec, "initContainers", pod, True)
            + _containers(spec, "containers", pod, False)
        ),
    )
