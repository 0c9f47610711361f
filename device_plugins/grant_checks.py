"""The checks every chip's ``Allocate`` makes of what kubelet sent and what was granted,
each refusal an ``AllocationError`` whose code becomes the gRPC status."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import PhysicalDevice
from device_plugins.errors import AllocationError
from device_plugins.pods import PodView
from device_plugins.replicas import ReplicaIdError, physical_uuid


def check_requested(
    device_ids: Sequence[str], devices: Mapping[str, PhysicalDevice], node: str
) -> None:
    """Every ID kubelet sent must name (a replica of) a device on this node."""
    for device_id in device_ids:
        try:
            uuid = physical_uuid(device_id)
        except ReplicaIdError as exc:
            raise AllocationError(str(exc), code=AllocationError.INVALID) from exc
        if uuid not in devices:
            raise AllocationError(
                f"kubelet asked for device {device_id!r}, which is not on node {node}",
                code=AllocationError.INVALID,
            )


def check_healthy(state: DeviceState, device: PhysicalDevice, pod: PodView, *, word: str) -> None:
    """A device granted while unhealthy is refused (kubelet may retry), with the reason."""
    if not device.healthy:
        reason = state.failure_reason(device.uuid) or "reported unhealthy"
        raise AllocationError(
            f"pod {pod.key} was given {word} {device.uuid}, which is unhealthy ({reason})",
            code=AllocationError.UNAVAILABLE,
        )


@contextlib.contextmanager
def preparing(what: str) -> Iterator[None]:
    """An ``OSError`` while making ``what`` (HAMi-core's folders) fails the call."""
    try:
        yield
    except OSError as exc:
        raise AllocationError(f"cannot prepare {what}: {exc}", code=AllocationError.FAILED) from exc
