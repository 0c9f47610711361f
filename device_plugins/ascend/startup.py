"""Start-up checks of the Ascend flavour, each failure one line that says what to do."""

from __future__ import annotations

from collections.abc import Sequence

from device_plugins.ascend.discovery import StaticChipSource
from device_plugins.ascend.flavour import chip_vendors
from device_plugins.ascend.settings import AscendSettings, AscendSettingsError, load_settings
from device_plugins.discovery.base import DiscoveryError
from device_plugins.settings import DevicePluginSettings
from device_plugins.startup import StartupError, check_static_file

#: Where the static chip file's format is described.
FORMAT_DOC = "device_plugins/ascend/discovery.py"


def ascend_settings(settings: DevicePluginSettings, flags: Sequence[str]) -> AscendSettings:
    """The ``VGPU_DP_ASCEND_*`` settings, the chip table and the static chip file checked."""
    try:
        ascend = load_settings()
    except AscendSettingsError as exc:
        raise StartupError(str(exc)) from None
    if ascend.config_file is not None:
        try:
            chip_vendors(ascend.config_file)
        except DiscoveryError as exc:
            raise StartupError(f"{exc}; fix VGPU_DP_ASCEND_CONFIG_FILE") from None
    if settings.discovery == "ascend-static" and settings.static_file is not None:
        check_static_file(
            StaticChipSource(settings.static_file).scan, flags, what="chip file", doc=FORMAT_DOC
        )
    return ascend
