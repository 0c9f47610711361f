"""Registering with kubelet, and noticing when kubelet restarts.

Kubelet learns about a plugin only through ``Register`` on its own socket. When
kubelet restarts it deletes every socket in the device-plugins folder (ours too)
and creates a new ``kubelet.sock``; the plugin must then serve again and register
again. We notice by watching the identity (device and inode) of ``kubelet.sock``
and the presence of our own socket: a plain ``stat`` poll, which works on every
filesystem and needs no inotify binding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc

from device_plugins.kubelet_api import API_VERSION, pb, pb_grpc


class RegistrationError(RuntimeError):
    """Kubelet did not accept the registration; the message says what kubelet said."""


def register(
    kubelet_socket: Path,
    *,
    endpoint: str,
    resource_name: str,
    timeout: float,
    preferred_allocation: bool = True,
) -> None:
    """Call kubelet's ``Register``; ``endpoint`` is our socket's file name only."""
    if "/" in endpoint:
        raise RegistrationError(f"endpoint must be a file name, not a path: {endpoint!r}")
    if socket_identity(kubelet_socket) is None:
        raise RegistrationError(f"kubelet socket {kubelet_socket} does not exist (yet)")
    request = pb.RegisterRequest(
        version=API_VERSION,
        endpoint=endpoint,
        resource_name=resource_name,
        options=pb.DevicePluginOptions(
            pre_start_required=False,
            get_preferred_allocation_available=preferred_allocation,
        ),
    )
    with grpc.insecure_channel(f"unix:{kubelet_socket}") as channel:
        try:
            pb_grpc.RegistrationStub(channel).Register(
                request, timeout=timeout, wait_for_ready=True
            )
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            raise RegistrationError(
                f"kubelet at {kubelet_socket} refused to register {resource_name} "
                f"(endpoint {endpoint}): {code.name if code else 'error'}: {details}"
            ) from exc


@dataclass(frozen=True, slots=True)
class SocketIdentity:
    device: int
    inode: int


def socket_identity(path: Path) -> SocketIdentity | None:
    """Who a socket file is (None when absent); a recreated socket has a new identity."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return SocketIdentity(info.st_dev, info.st_ino)


class KubeletWatch:
    """Tells whether kubelet was restarted since the last registration."""

    def __init__(self, kubelet_socket: Path) -> None:
        self._path = kubelet_socket
        self._registered_with: SocketIdentity | None = None

    def registered(self) -> None:
        """Remember the kubelet socket we just registered with."""
        self._registered_with = socket_identity(self._path)

    def kubelet_restarted(self) -> bool:
        """True when a kubelet socket exists and is not the one we registered with."""
        current = socket_identity(self._path)
        return current is not None and current != self._registered_with
