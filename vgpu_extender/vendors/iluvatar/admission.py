"""HAMi's Iluvatar ``MutateAdmission`` for one chip, as a pure function of a container:
a container with the chip's count in its limits uses the chip; several GPUs get the
``.vCore`` limit ``count x 100`` (read as 100 by the Fit: whole GPUs), and the container
gets ``SOL_CONTINER_NAME=<container name>`` (HAMi's spelling) unless it has it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.iluvatar.config import IluvatarChip

CONTAINER_NAME_ENV = "SOL_CONTINER_NAME"


def container_admission(
    container: Mapping[str, Any], chip: IluvatarChip
) -> ContainerAdmission | None:
    resources = container.get("resources")
    limits = resources.get("limits") if isinstance(resources, Mapping) else None
    if not isinstance(limits, Mapping) or chip.count_resource not in limits:
        return None
    name = container.get("name")
    name = name if isinstance(name, str) else ""
    count = quantity_to_int(limits[chip.count_resource], field=chip.count_resource, container=name)
    new_limits: dict[str, str] = {}
    if count > 1:
        cores = str(count * 100)
        if str(limits.get(chip.cores_resource)) != cores:
            new_limits[chip.cores_resource] = cores
    env = container.get("env")
    has_name = isinstance(env, list) and any(
        isinstance(item, Mapping) and item.get("name") == CONTAINER_NAME_ENV for item in env
    )
    return ContainerAdmission(
        limits=new_limits,
        env=() if has_name else ((CONTAINER_NAME_ENV, name),),
        uses=True,
    )
