"""From the node's chips to what the scheduler reads: the Ascend plugin's node annotations.

Each registration writes three node annotations: ``hami.io/node-register-<CW>`` (the
chips as HAMi's ``DeviceInfo``, the vendor's own encoding), ``hami-vnpu-core``
(``"true"`` or ``"false"``) and the handshake ``hami.io/node-handshake-<CW>`` =
``Reported_<2006.01.02 15:04:05>``, one second ahead as the plugin's default
``report_time_offset`` puts it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.discovery.base import PhysicalDevice
from vgpu_extender.domain import Device
from vgpu_extender.vendors.ascend.handshake import handshake_annotation, reported_value
from vgpu_extender.vendors.ascend.inventory_codec import (
    CORE_MODE_ANNOTATION,
    MODE_HAMI_CORE,
    MODE_VNPU,
    network_id,
)

#: HAMi-core nodes register 100 cores per chip (a percentage), others the chip's AI cores.
CORE_MODE_CORES = 100
REPORT_TIME_OFFSET = timedelta(seconds=1)


def to_device(device: PhysicalDevice, flavour: AscendFlavour) -> Device:
    chip = flavour.chip
    word = chip.common_word
    network = network_id(word, device.index)
    return Device(
        uuid=device.uuid,
        index=device.index,
        count=flavour.count,
        memory_mib=chip.memory_allocatable,
        cores=CORE_MODE_CORES if flavour.core_mode else chip.ai_core,
        type=word,
        numa=0,
        mode=MODE_HAMI_CORE if flavour.core_mode else MODE_VNPU,
        healthy=device.healthy,
        vendor=word,
        custom_info=() if network is None else (("NetworkID", network),),
    )


def to_devices(devices: Iterable[PhysicalDevice], flavour: AscendFlavour) -> tuple[Device, ...]:
    return tuple(to_device(device, flavour) for device in devices)


def handshake(now: datetime) -> str:
    return reported_value(now + REPORT_TIME_OFFSET)


def node_annotations(
    devices: Iterable[PhysicalDevice], flavour: AscendFlavour, *, now: datetime
) -> dict[str, str]:
    """Everything one registration writes on the node."""
    return {
        flavour.vendor.inventory_annotation: flavour.vendor.encode_inventory(
            to_devices(devices, flavour)
        ),
        CORE_MODE_ANNOTATION: "true" if flavour.core_mode else "false",
        handshake_annotation(flavour.chip): handshake(now),
    }
