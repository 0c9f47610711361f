"""HAMi's webhook rounding of a vXPU ask: ``kunlunxin.com/vxpu-memory`` rounded up to a
quarter, half or whole card (24576, 49152, 98304 MiB) in the limits and requests that
give it; more than a card is refused."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import quantity_to_int
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.kunlun.config import KunlunConfig
from vgpu_extender.vendors.kunlun.request import CARD_MIB, round_memory


def container_admission(
    container: Mapping[str, Any], config: KunlunConfig
) -> ContainerAdmission | None:
    resources = container.get("resources")
    resources = resources if isinstance(resources, Mapping) else {}
    name = container.get("name")
    name = name if isinstance(name, str) else ""
    changed: dict[str, dict[str, str]] = {"limits": {}, "requests": {}}
    for part in changed:
        values = resources.get(part)
        if not isinstance(values, Mapping) or config.vmemory_resource not in values:
            continue
        raw = values[config.vmemory_resource]
        asked = quantity_to_int(raw, field=config.vmemory_resource, container=name)
        rounded = round_memory(asked)
        if rounded is None:
            raise RequestError(
                f"vXPU memory must be at most a card's {CARD_MIB} MiB",
                container=name,
                field=config.vmemory_resource,
                value=raw,
            )
        if str(raw) != str(rounded):
            changed[part][config.vmemory_resource] = str(rounded)
    if not changed["limits"] and not changed["requests"]:
        return None
    return ContainerAdmission(limits=changed["limits"], requests=changed["requests"], uses=True)
