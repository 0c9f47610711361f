"""Value types shared by every layer. No I/O, no framework imports."""

from vgpu_extender.domain.assignment import DeviceGrant, DeviceUsage, PodAssignment
from vgpu_extender.domain.device import Device, NodeInventory
from vgpu_extender.domain.errors import AnnotationError, InventoryError, RequestError
from vgpu_extender.domain.reasons import NEUTRAL_WORDING, Reason, Rejection, Wording
from vgpu_extender.domain.request import ContainerRequest, DeviceSelector, PodRequest

__all__ = [
    "NEUTRAL_WORDING",
    "AnnotationError",
    "ContainerRequest",
    "Device",
    "DeviceGrant",
    "DeviceSelector",
    "DeviceUsage",
    "InventoryError",
    "NodeInventory",
    "PodAssignment",
    "PodRequest",
    "Reason",
    "Rejection",
    "RequestError",
    "Wording",
]
