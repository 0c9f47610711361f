"""HAMi's Hygon ``MutateAdmission``: a container with the count resource in its limits
uses DCUs (the pod becomes the scheduler's); nothing is rewritten."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.vendors.base import ContainerAdmission


def container_admission(container: Mapping[str, Any], count: str) -> ContainerAdmission | None:
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    if isinstance(limits, Mapping) and count in limits:
        return ContainerAdmission(uses=True)
    return None
