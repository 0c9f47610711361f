"""Start-up checks of the node agent, each failure a single line that says what to do.

A DaemonSet's Pod that cannot start shows its last log line in ``kubectl get pods``
(CrashLoopBackOff) and ``kubectl logs``: that line names the setting (flag and
environment variable), the value given and the fix, without a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from device_plugins.discovery.base import DiscoveryError
from device_plugins.discovery.static import StaticBackend
from device_plugins.settings import DevicePluginSettings

#: Where the static device file's format is described.
FORMAT_DOC = "docs/node-agent.md"
ENV_PREFIX = "VGPU_DP_"


class StartupError(Exception):
    """The agent cannot start with these settings; exit status 2."""


def where(field: str, flags: Sequence[str]) -> str:
    """How a setting is given: its flag when the CLI has one, and its variables."""
    names = [f"--{field.replace('_', '-')}"] if field in flags else []
    names.append(f"{ENV_PREFIX}{field.upper()}")
    if field == "node_name":
        names.append("NODE_NAME")
    return " / ".join(names)


def settings_from(overrides: Mapping[str, Any], flags: Sequence[str]) -> DevicePluginSettings:
    """The environment with the given flags (not None) on top, or a ``StartupError``."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return DevicePluginSettings(**given)
    except ValidationError as exc:
        raise StartupError(describe(exc, flags)) from None


def describe(exc: ValidationError, flags: Sequence[str]) -> str:
    """Every failing setting on one line: name, value given, why, and the fix."""
    parts = []
    for err in exc.errors():
        message = err["msg"].removeprefix("Value error, ")
        if not err["loc"]:  # a check across settings: its message names them
            parts.append(message)
            continue
        field = str(err["loc"][0])
        default = DevicePluginSettings.model_fields.get(field)
        fix = "set a valid value"
        if default is not None and not default.is_required():
            fix += f" or unset it (default {default.default})"
        parts.append(f"{field} ({where(field, flags)}) = {err.get('input')!r}: {message}; {fix}")
    return "invalid settings: " + "; ".join(parts)


def check_static_file(settings: DevicePluginSettings, flags: Sequence[str]) -> None:
    """With ``static`` discovery the device file must exist, be readable and be valid."""
    if settings.discovery != "static" or settings.static_file is None:
        return
    path: Path = settings.static_file
    setting = f"static_file ({where('static_file', flags)})"
    if not path.exists():
        raise StartupError(
            f"{setting}: the device file {str(path)!r} does not exist; create it "
            f"(format in {FORMAT_DOC}) or point the setting at an existing file"
        )
    if path.is_dir() or not os.access(path, os.R_OK):
        raise StartupError(
            f"{setting}: cannot read the device file {str(path)!r} "
            f"({'a folder' if path.is_dir() else 'permission denied'}); give a readable file"
        )
    try:
        StaticBackend(path).discover()
    except DiscoveryError as exc:
        raise StartupError(f"{setting}: invalid device file: {exc}; see {FORMAT_DOC}") from None
