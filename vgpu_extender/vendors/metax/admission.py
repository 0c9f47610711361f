"""HAMi's webhook rules for MetaX sGPU pods, as pure functions of the pod's annotations
and a container's count.

- ``metax-tech.com/sgpu-app-class`` must be ``online`` or ``offline``, and a pod of
  either class asks for exactly one sGPU per container;
- ``metax-tech.com/sgpu-qos-policy`` must be ``best-effort``, ``fixed-share`` or
  ``burst-share``; a pod that is not online and names none gets ``best-effort``
  (``pod_annotations``: the pod annotations to add, carried by the container's
  admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.metax.config import MetaxConfig
from vgpu_extender.vendors.metax.request import APP_CLASS_ANNOTATION, ONLINE, QOS_ANNOTATION

APP_CLASSES = ("online", "offline")
QOS_POLICIES = ("best-effort", "fixed-share", "burst-share")
DEFAULT_QOS = "best-effort"


def check_container(annotations: Mapping[str, Any], count: int, *, container: str = "") -> None:
    """``RequestError`` for an sGPU container HAMi's webhook refuses."""
    app_class = annotations.get(APP_CLASS_ANNOTATION)
    if app_class is not None:
        if app_class not in APP_CLASSES:
            raise RequestError(
                f"{APP_CLASS_ANNOTATION} must be one of {', '.join(APP_CLASSES)}",
                container=container,
                field=APP_CLASS_ANNOTATION,
                value=app_class,
            )
        if count != 1:
            raise RequestError(
                f"a pod of app class {app_class} asks for exactly one sGPU per container",
                container=container,
                field=APP_CLASS_ANNOTATION,
                value=count,
            )
    qos = annotations.get(QOS_ANNOTATION)
    if qos is not None and qos not in QOS_POLICIES:
        raise RequestError(
            f"{QOS_ANNOTATION} must be one of {', '.join(QOS_POLICIES)}",
            container=container,
            field=QOS_ANNOTATION,
            value=qos,
        )


def pod_annotations(annotations: Mapping[str, Any]) -> dict[str, str]:
    """The annotations the webhook adds to an sGPU pod: the default QoS policy."""
    if annotations.get(APP_CLASS_ANNOTATION) == ONLINE or QOS_ANNOTATION in annotations:
        return {}
    return {QOS_ANNOTATION: DEFAULT_QOS}


def container_admission(
    container: Mapping[str, Any], pod: Mapping[str, Any], config: MetaxConfig
) -> ContainerAdmission | None:
    """The pod's default QoS policy, for a container asking for sGPUs (nothing changes
    in the container itself); ``RequestError`` for one HAMi refuses."""
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    raw = limits.get(config.sgpu_resource) if isinstance(limits, Mapping) else None
    if raw is None:
        return None
    name = container.get("name")
    name = name if isinstance(name, str) else ""
    count = quantity_to_int(raw, field=config.sgpu_resource, container=name)
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    given = annotations if isinstance(annotations, Mapping) else {}
    check_container(given, count, container=name)
    return ContainerAdmission(uses=True, pod_annotations=pod_annotations(given))
