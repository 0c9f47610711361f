"""HAMi's webhook rule for Enflame DRS asks (``MutateAdmission``), as a pure function of
a container's resources: a slice count must be positive; ``gcu-memory`` positive and
``gcu-core`` in (0,100]; each value given in only one of limits and requests is copied
to the other. The refusals are HAMi's texts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import parse_quantity
from vgpu_extender.vendors.base import ContainerAdmission
from vgpu_extender.vendors.enflame.config import EnflameConfig


def _refusal(message: str, field: str, value: object) -> RequestError:
    error = RequestError(message)  # HAMi's text alone: clients match it
    error.field, error.value = field, value
    return error


def container_admission(
    container: Mapping[str, Any], config: EnflameConfig
) -> ContainerAdmission | None:
    resources = container.get("resources")
    resources = resources if isinstance(resources, Mapping) else {}
    limits = resources.get("limits")
    limits = limits if isinstance(limits, Mapping) else {}
    requests = resources.get("requests")
    requests = requests if isinstance(requests, Mapping) else {}

    def given(name: str) -> Any:
        value = limits.get(name)
        return requests.get(name) if value is None else value

    count = given(config.drs_resource)
    if count is not None:
        if parse_quantity(count, field=config.drs_resource) <= 0:
            raise _refusal(
                f"{config.drs_resource} must be greater than 0", config.drs_resource, count
            )
        names: tuple[str, ...] = (config.drs_resource,)
    else:
        memory, cores = given(config.memory_resource), given(config.core_resource)
        if memory is None and cores is None:
            return None
        if memory is not None and parse_quantity(memory, field=config.memory_resource) <= 0:
            raise _refusal(
                f"{config.memory_resource} must be greater than 0", config.memory_resource, memory
            )
        if cores is not None and not 0 < parse_quantity(cores, field=config.core_resource) <= 100:
            raise _refusal(
                f"{config.core_resource} must be in range (0,100]", config.core_resource, cores
            )
        names = tuple(
            name
            for name, value in ((config.memory_resource, memory), (config.core_resource, cores))
            if value is not None
        )
    add_limits = {n: str(given(n)) for n in names if n not in limits}
    add_requests = {n: str(given(n)) for n in names if n not in requests}
    return ContainerAdmission(limits=add_limits, requests=add_requests, uses=True)
