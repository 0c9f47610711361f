"""Start-up checks of the node agent, each failure a single line that says what to do.

A DaemonSet's Pod that cannot start shows its last log line in ``kubectl get pods``
(CrashLoopBackOff) and ``kubectl logs``: that line names the setting (flag and
environment variable), the value given and the fix, without a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
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


def check_files(settings: DevicePluginSettings, flags: Sequence[str]) -> None:
    """The files the settings name must be readable; the static device file valid."""
    if settings.kubeconfig is not None:
        _readable(settings.kubeconfig, "kubeconfig", flags, "give the cluster's kubeconfig")
    if settings.discovery != "static" or settings.static_file is None:
        return
    _readable(
        settings.static_file,
        "static_file",
        flags,
        f"create it (format in {FORMAT_DOC}) or point the setting at an existing file",
    )
    check_static_file(
        StaticBackend(settings.static_file).discover, flags, what="device file", doc=FORMAT_DOC
    )


def check_static_file(
    read: Callable[[], object], flags: Sequence[str], *, what: str, doc: str
) -> None:
    """A static file that ``read`` cannot decode stops the start, naming the setting."""
    try:
        read()
    except DiscoveryError as exc:
        raise StartupError(
            f"static_file ({where('static_file', flags)}): invalid {what}: {exc}; see {doc}"
        ) from None


def _readable(path: Path, field: str, flags: Sequence[str], fix: str) -> None:
    setting = f"{field} ({where(field, flags)})"
    if not path.exists():
        raise StartupError(f"{setting}: the file {str(path)!r} does not exist; {fix}")
    if path.is_dir() or not os.access(path, os.R_OK):
        why = "a folder" if path.is_dir() else "permission denied"
        raise StartupError(f"{setting}: cannot read the file {str(path)!r} ({why}); {fix}")
