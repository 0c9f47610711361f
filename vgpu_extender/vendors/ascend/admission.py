"""HAMi's admission rewrite of one container for one Ascend chip (``MutateAdmission``),
as a pure function of the container's resources and the pod's annotations.

The count is read from limits only. Hard split (no ``huawei.com/vnpu-mode: hami-core``)
rounds memory up to the smallest template that holds it, or to the whole card when it
is within the card's capacity, and rejects a ``-core`` ask and partial memory on several
NPUs; HAMi-core keeps memory as given. No memory asks for the whole card. The result is
written into both limits and requests. A 910C super pod takes NPUs in pairs: 1 becomes 2,
another odd count is rejected. The error texts are HAMi's, for clients that match them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu_extender.domain import RequestError
from vgpu_extender.domain.quantity import parse_quantity, quantity_to_int
from vgpu_extender.vendors.ascend.allocation_codec import HAMI_CORE, VNPU_MODE_ANNOTATION
from vgpu_extender.vendors.ascend.chips import ChipConfig
from vgpu_extender.vendors.base import ContainerAdmission

#: What an ``overwriteEnv`` chip gives a container that asks for none of it: no NPU.
VISIBLE_DEVICES_ENV = "ASCEND_VISIBLE_DEVICES"


@dataclass(frozen=True, slots=True)
class Admitted:
    """The container's resources after admission. ``uses``: whether the container asks
    for this chip (HAMi's ``found``: the pod is then the scheduler's); ``env`` is what to
    append to the container's environment; ``runtime_class_name`` what to set when the
    pod has none ("" sets nothing)."""

    uses: bool
    limits: dict[str, str]
    requests: dict[str, str]
    env: tuple[tuple[str, str], ...] = ()
    runtime_class_name: str = ""


def hami_error(message: str, *, field: str, value: object) -> RequestError:
    """A ``RequestError`` whose text is exactly HAMi's ``message`` (clients match it),
    still naming the resource and value in its attributes."""
    error = RequestError(message)
    error.field = field
    error.value = value
    return error


def admit_container(
    limits: Mapping[str, Any],
    requests: Mapping[str, Any],
    annotations: Mapping[str, str],
    chip: ChipConfig,
    *,
    container: str = "",
) -> Admitted:
    """The rewritten limits and requests of one container (copies; the inputs are not
    changed), or ``RequestError`` with HAMi's message for a pod HAMi rejects."""
    new_limits = {str(key): str(value) for key, value in limits.items()}
    new_requests = {str(key): str(value) for key, value in requests.items()}
    count_raw = limits.get(chip.resource_name)
    if count_raw is None:
        env = ((VISIBLE_DEVICES_ENV, ""),) if chip.overwrite_env else ()
        return Admitted(False, new_limits, new_requests, env)
    count = quantity_to_int(count_raw, field=chip.resource_name, container=container)

    if chip.super_pod and count % 2 == 1:
        if count != 1:
            raise hami_error(
                f"{chip.common_word} device request must be 1 or 2*n, got {count}",
                field=chip.resource_name,
                value=count_raw,
            )
        count = 2
        new_limits[chip.resource_name] = "2"
        if chip.resource_name in new_requests:
            new_requests[chip.resource_name] = "2"

    hami_core = annotations.get(VNPU_MODE_ANNOTATION) == HAMI_CORE
    cores_raw = limits.get(chip.resource_core_name) if chip.resource_core_name else None
    if not hami_core and cores_raw is not None:
        cores = quantity_to_int(cores_raw, field=chip.resource_core_name, container=container)
        if cores > 0:
            raise hami_error(
                f"{chip.resource_core_name} is only supported in hami-core (soft split) mode",
                field=chip.resource_core_name,
                value=cores_raw,
            )

    memory = chip.memory_allocatable
    memory_raw = limits.get(chip.resource_memory_name)
    if memory_raw is not None:
        asked = _mib(memory_raw, chip, container)
        if hami_core:
            memory = asked
        else:
            memory, _ = chip.trim_memory(asked)
            if memory <= 0:
                raise hami_error(
                    f"{chip.resource_memory_name} {asked} is invalid",
                    field=chip.resource_memory_name,
                    value=memory_raw,
                )
    if not hami_core and count > 1 and memory != chip.memory_allocatable:
        raise hami_error(
            "vNPU not supported for multiple devices",
            field=chip.resource_memory_name,
            value=memory_raw,
        )
    new_limits[chip.resource_memory_name] = str(memory)
    new_requests[chip.resource_memory_name] = str(memory)
    return Admitted(True, new_limits, new_requests, (), chip.runtime_class_name)


def container_admission(
    container: Mapping[str, Any], pod: Mapping[str, Any], chip: ChipConfig
) -> ContainerAdmission | None:
    """``admit_container`` on one container of a pod, as what changes: the limits and
    requests whose value is new, the env to add, the runtime class; None when nothing
    changes. Raises ``RequestError`` with HAMi's message."""
    resources = _mapping(container.get("resources"))
    limits, requests = _mapping(resources.get("limits")), _mapping(resources.get("requests"))
    annotations = _mapping(_mapping(pod.get("metadata")).get("annotations"))
    name = container.get("name")
    admitted = admit_container(
        limits, requests, annotations, chip, container=name if isinstance(name, str) else ""
    )
    result = ContainerAdmission(
        limits=_changed(limits, admitted.limits),
        requests=_changed(requests, admitted.requests),
        env=admitted.env,
        runtime_class_name=admitted.runtime_class_name,
        uses=admitted.uses,
    )
    if result == ContainerAdmission():
        return None
    return result


def _changed(before: Mapping[str, Any], after: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in after.items() if str(before.get(key)) != value}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mib(value: Any, chip: ChipConfig, container: str) -> int:
    """The memory ask in MiB, rounded up as Kubernetes' ``Quantity.Value`` rounds."""
    amount = parse_quantity(value, field=chip.resource_memory_name, container=container)
    if amount < 0:
        raise hami_error(
            f"{chip.resource_memory_name} {math.floor(amount)} is invalid",
            field=chip.resource_memory_name,
            value=value,
        )
    return math.ceil(amount)
