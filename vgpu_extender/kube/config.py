"""Where the cluster is, and how long to wait for it.

Configuration is built into a fresh ``kubernetes.client.Configuration`` and never
into the client's process-wide default, so nothing global changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from vgpu_extender.kube.errors import KubeError


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Socket timeouts. A watch's read timeout is its ``timeoutSeconds`` plus ``watch_slack_s``."""

    connect_s: float = 5.0
    read_s: float = 15.0
    watch_slack_s: float = 10.0

    def __post_init__(self) -> None:
        for field in ("connect_s", "read_s", "watch_slack_s"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"timeout {field} must be a positive number, got {value!r}")


def load_configuration(
    *, kubeconfig: str | None = None, context: str | None = None
) -> k8s.Configuration | None:
    """Where to reach the cluster: ``None`` means none was found (standalone mode).

    An explicit ``kubeconfig`` wins and must load; otherwise the in-cluster service
    account, then ``$KUBECONFIG`` or ``~/.kube/config`` when such a file exists.
    """
    configuration = k8s.Configuration()
    if kubeconfig is not None:
        try:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (ConfigException, OSError, ValueError) as exc:
            raise KubeError(f"kubeconfig {kubeconfig!r} cannot be loaded: {exc}") from exc
        return configuration
    try:
        k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
        return configuration
    except ConfigException:
        pass
    # Read $KUBECONFIG now: the client's own default was fixed when it was imported.
    found = os.environ.get("KUBECONFIG") or "~/.kube/config"
    if not any(Path(p).expanduser().is_file() for p in found.split(os.pathsep) if p):
        return None
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=found,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except (ConfigException, OSError, ValueError) as exc:
        raise KubeError(f"kubeconfig {found!r} cannot be loaded: {exc}") from exc
    return configuration
