"""Which Ascend chip this node agent serves, and how: HAMi's plugin picks its chip
configuration by the chip's name and serves that one chip (its CommonWord).

The chip table is HAMi's ``vnpus:`` section (the file ``config_file`` names, a whole
``device-config.yaml`` or the section alone; the v2.10 chart's chips without one). A
node runs HAMi-core (``hami-vnpu-core``) as ``hami_vnpu_core`` says, else as the
table's ``hamiVnpuCore``; each chip holds ``vdevice_count`` vNPUs, else the chip's
slots (allocatable memory over the smallest template's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from device_plugins.ascend.chips import NpuChip, chip_config
from device_plugins.ascend.settings import AscendSettings
from device_plugins.discovery.base import DiscoveryError
from device_plugins.settings import DevicePluginSettings
from device_plugins.vendor import ascend
from vgpu_extender.vendors.ascend import AscendChipVendor, ChipConfig


@dataclass(frozen=True, slots=True)
class AscendFlavour:
    vendor: AscendChipVendor
    core_mode: bool
    count: int

    @property
    def chip(self) -> ChipConfig:
        return self.vendor.chip

    @property
    def resource_name(self) -> str:
        return self.chip.resource_name

    @property
    def socket_name(self) -> str:
        # HAMi's plugin listens on <CW>.sock.
        return f"{self.chip.common_word}.sock"


def chip_vendors(config_file: Path | None) -> tuple[AscendChipVendor, ...]:
    """One vendor per chip of the table; ``DiscoveryError`` (one line) for a bad file."""
    if config_file is None:
        return ascend()
    try:
        text = config_file.read_text()
    except OSError as exc:
        raise DiscoveryError(f"cannot read the Ascend chip table {config_file}: {exc}") from None
    try:
        return ascend({"vnpus": text})
    except ValueError as exc:
        reason = str(exc).replace("\n", " ")
        raise DiscoveryError(f"the Ascend chip table {config_file} is invalid: {reason}") from None


def resolve_flavour(chips: Sequence[NpuChip], ascend: AscendSettings) -> AscendFlavour:
    """The flavour for the node's chips; ``DiscoveryError`` for an unknown chip."""
    vendors = chip_vendors(ascend.config_file)
    chip = chip_config(chips, [vendor.chip for vendor in vendors])
    vendor = next(vendor for vendor in vendors if vendor.chip == chip)
    core = ascend.hami_vnpu_core
    return AscendFlavour(
        vendor=vendor,
        core_mode=vendor.config.hami_vnpu_core if core is None else core,
        count=ascend.vdevice_count or chip.slots,
    )


def flavoured_settings(
    settings: DevicePluginSettings, flavour: AscendFlavour
) -> DevicePluginSettings:
    """The chip's resource name and socket, unless the settings name their own."""
    update: dict[str, object] = {}
    if "resource_name" not in settings.model_fields_set:
        update["resource_name"] = flavour.resource_name
    if "socket_name" not in settings.model_fields_set:
        update["socket_name"] = flavour.socket_name
    return settings.model_copy(update=update)
