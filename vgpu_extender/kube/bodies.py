"""Request bodies the extender sends, built in one place for the real client and the fake.

Both implementations send or store exactly these, so a test against the fake sees the
same Binding, Event and patch a real API server would receive.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from vgpu_extender.kube.client import EventType

# The API server rejects longer event messages in events.k8s.io; keep core/v1 the same.
MAX_EVENT_MESSAGE = 1024
EVENT_TYPES: frozenset[str] = frozenset({"Normal", "Warning"})


def rfc3339(moment: datetime) -> str:
    """Seconds precision, UTC, ``Z`` suffix: what Go's ``time.RFC3339`` writes for UTC."""
    if moment.tzinfo is None:
        raise ValueError(f"timestamp must be timezone-aware, got {moment!r}")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _checked_map(
    field: str, values: Mapping[str, str | None], *, removable: bool = True
) -> dict[str, str | None]:
    """A copy of ``values``; ``removable`` allows ``None`` (a merge patch's delete)."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{field} must be a mapping of strings, got {values!r}")
    wanted = "a string or None" if removable else "a string"
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{field} key must be a non-empty string, got {key!r}")
        if not isinstance(value, str) and not (removable and value is None):
            raise ValueError(f"{field}[{key!r}] must be {wanted}, got {value!r}")
    return dict(values)


def metadata_patch(
    *,
    annotations: Mapping[str, str | None],
    labels: Mapping[str, str | None] | None = None,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """A JSON merge patch of annotations and labels; ``None`` values delete keys.

    A ``resource_version`` makes the patch conditional: the server answers 409 when
    the object has changed since.
    """
    metadata: dict[str, Any] = {"annotations": _checked_map("annotations", annotations)}
    if labels:
        metadata["labels"] = _checked_map("labels", labels)
    if resource_version is not None:
        if not isinstance(resource_version, str) or not resource_version:
            raise ValueError(
                f"resource_version must be a non-empty string, got {resource_version!r}"
            )
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


def binding(
    namespace: str,
    name: str,
    uid: str,
    node: str,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The ``Binding`` kube-scheduler's DefaultBinder creates, UID included.

    The API server sets the Binding's annotations on the pod in the same update that
    sets its node, so they arrive with the node or not at all.
    """
    for field, value in (("namespace", namespace), ("name", name), ("node", node)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"binding {field} must be a non-empty string, got {value!r}")
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        metadata["uid"] = uid
    if annotations is not None:
        # The server only sets a Binding's annotations on the pod, never removes one.
        metadata["annotations"] = _checked_map("annotations", annotations, removable=False)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def pod_event(
    *,
    namespace: str,
    pod: str,
    uid: str,
    reason: str,
    message: str,
    type: EventType,
    component: str,
    now: datetime,
) -> dict[str, Any]:
    """A core/v1 Event about a pod, shown by ``kubectl describe pod``."""
    if type not in EVENT_TYPES:
        raise ValueError(f"event type must be Normal or Warning, got {type!r}")
    if not namespace or not pod:
        raise ValueError(f"event needs the pod's namespace and name, got {namespace!r}/{pod!r}")
    stamp = rfc3339(now)
    involved: dict[str, str] = {"apiVersion": "v1", "kind": "Pod", "namespace": namespace}
    involved["name"] = pod
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": involved,
        "reason": reason,
        "message": message[:MAX_EVENT_MESSAGE],
        "type": type,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
