"""The device plugin side of kubelet's v1beta1 API, served on a unix socket.

``DevicePluginService`` answers kubelet's calls from the shared ``DeviceState`` and
an allocator; ``PluginServer`` owns the gRPC server and its socket file. A new
``PluginServer`` is made for each (re-)registration, because kubelet deletes every
socket in its folder when it restarts.
"""

from __future__ import annotations

import logging
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any, Protocol

import grpc

from device_plugins.device_state import DeviceState, Snapshot
from device_plugins.errors import AllocationError
from device_plugins.hami_core import ContainerAllocation
from device_plugins.kubelet_api import HEALTHY, UNHEALTHY, pb, pb_grpc
from device_plugins.metrics import RESULT_ERROR, RESULT_OK
from device_plugins.replicas import preferred_replicas, replica_ids

log = logging.getLogger(__name__)

_STATUS = {
    AllocationError.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    AllocationError.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    AllocationError.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    AllocationError.FAILED: grpc.StatusCode.FAILED_PRECONDITION,
}


class ServerError(RuntimeError):
    """The plugin socket could not be served."""


class Allocator(Protocol):
    """Hands out one container's devices for ``Allocate``."""

    def allocate(self, device_ids: Sequence[str]) -> ContainerAllocation:
        """Raises ``AllocationError`` with a message for kubelet."""
        ...

    def preferred_uuids(self, size: int) -> Sequence[str]:
        """GPUs the pod being admitted was given for a container of ``size`` devices."""
        ...


def list_response(snapshot: Snapshot, split: int) -> Any:
    """``split`` replicas per GPU, sharing its health and NUMA node."""
    devices: list[Any] = []
    for device in snapshot.devices:
        topology = (
            pb.TopologyInfo(nodes=[pb.NUMANode(ID=device.numa)])
            if device.numa is not None
            else None
        )
        health = HEALTHY if device.healthy else UNHEALTHY
        devices.extend(
            pb.Device(ID=rid, health=health, topology=topology)
            for rid in replica_ids(device.uuid, split)
        )
    return pb.ListAndWatchResponse(devices=devices)


def allocation_message(allocation: ContainerAllocation) -> Any:
    return pb.ContainerAllocateResponse(
        envs=dict(allocation.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
    )


class DevicePluginService:
    """Kubelet's view of this node's devices.

    Implements every method of the ``DevicePlugin`` service, so it needs no base
    class; ``add_DevicePluginServicer_to_server`` only looks the methods up.
    """

    def __init__(
        self,
        *,
        state: DeviceState,
        split_count: int,
        allocator: Allocator,
        stopping: threading.Event,
        poll_s: float = 1.0,
        on_allocate: Callable[[str, float], None] = lambda result, seconds: None,
    ) -> None:
        """``on_allocate`` hears each ``Allocate``'s result and duration (the metrics)."""
        self._on_allocate = on_allocate
        self._state = state
        self._split = split_count
        self._allocator = allocator
        self._stopping = stopping
        self._poll_s = poll_s

    def GetDevicePluginOptions(  # noqa: N802 - gRPC method name
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        return pb.DevicePluginOptions(
            pre_start_required=False, get_preferred_allocation_available=True
        )

    def ListAndWatch(  # noqa: N802 - gRPC method name
        self, request: Any, context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """The full list now, then the full list again after every visible change."""
        cancelled = threading.Event()

        def on_done() -> None:
            cancelled.set()
            self._state.wake()

        context.add_callback(on_done)
        snapshot = self._state.snapshot()
        sent = list_response(snapshot, self._split)
        yield sent

        def done() -> bool:
            return cancelled.is_set() or self._stopping.is_set()

        while not done():
            snapshot = self._state.wait_for_change(snapshot.version, self._poll_s, stop=done)
            if done():
                return
            message = list_response(snapshot, self._split)
            if message != sent:
                sent = message
                yield message

    def GetPreferredAllocation(  # noqa: N802 - gRPC method name
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        responses = []
        for item in request.container_requests:
            try:
                wanted = self._allocator.preferred_uuids(item.allocation_size)
            except AllocationError as exc:
                log.debug("no preferred GPUs for this request: %s", exc)
                wanted = ()
            chosen = preferred_replicas(
                list(item.available_deviceIDs),
                list(item.must_include_deviceIDs),
                item.allocation_size,
                wanted_uuids=wanted,
            )
            responses.append(pb.ContainerPreferredAllocationResponse(deviceIDs=chosen))
        return pb.PreferredAllocationResponse(container_responses=responses)

    def Allocate(  # noqa: N802 - gRPC method name
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        started = time.perf_counter()
        result = RESULT_ERROR
        try:
            responses = []
            for item in request.container_requests:
                try:
                    allocation = self._allocator.allocate(list(item.devices_ids))
                except AllocationError as exc:
                    log.error("Allocate %s failed: %s", list(item.devices_ids), exc)
                    result = exc.code
                    context.abort(_STATUS[exc.code], str(exc))
                responses.append(allocation_message(allocation))
            result = RESULT_OK
            return pb.AllocateResponse(container_responses=responses)
        finally:
            # context.abort raises, so failures are counted here too.
            self._on_allocate(result, time.perf_counter() - started)

    def PreStartContainer(  # noqa: N802 - gRPC method name
        self, request: Any, context: grpc.ServicerContext
    ) -> Any:
        return pb.PreStartContainerResponse()


def remove_stale_socket(path: Path) -> None:
    """Delete a socket left by an earlier run; refuse to delete anything else."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ServerError(f"{path} exists and is not a socket; refusing to replace it")
    path.unlink()


def answers(socket_path: Path, timeout: float) -> bool:
    """Whether a device plugin answers on the socket (HAMi dials itself the same way)."""
    with grpc.insecure_channel(f"unix:{socket_path}") as channel:
        try:
            pb_grpc.DevicePluginStub(channel).GetDevicePluginOptions(
                pb.Empty(), timeout=timeout, wait_for_ready=True
            )
        except grpc.RpcError:
            return False
    return True


class PluginServer:
    """One gRPC server on the plugin socket, started once and stopped once."""

    def __init__(
        self,
        socket_path: Path,
        service_factory: Callable[[threading.Event], DevicePluginService],
        *,
        on_stop: Callable[[], None] = lambda: None,
        max_workers: int = 8,
    ) -> None:
        """``on_stop`` runs when stopping, to wake the streams blocked on device changes."""
        self.socket_path = socket_path
        self._factory = service_factory
        self._on_stop = on_stop
        self._max_workers = max_workers
        self._stopping = threading.Event()
        self._server: grpc.Server | None = None
        self._inode: int | None = None

    def start(self, *, check_timeout: float = 5.0) -> None:
        """Serve, then check the socket answers; kubelet must find us before Register."""
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_socket(self.socket_path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._max_workers))
        pb_grpc.add_DevicePluginServicer_to_server(self._factory(self._stopping), server)
        if server.add_insecure_port(f"unix:{self.socket_path}") == 0:
            raise ServerError(f"cannot listen on {self.socket_path}")
        server.start()
        self._server = server
        self._inode = self.socket_path.stat().st_ino
        if not answers(self.socket_path, check_timeout):
            self.stop()
            raise ServerError(f"the plugin does not answer on {self.socket_path}")
        log.info("serving the device plugin API on %s", self.socket_path)

    def socket_present(self) -> bool:
        """False once someone (kubelet restarting) removed or replaced our socket."""
        try:
            return self.socket_path.stat().st_ino == self._inode
        except FileNotFoundError:
            return False

    def stop(self, grace: float = 1.0) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        self._on_stop()
        server.stop(grace).wait()
        if self.socket_present():
            self.socket_path.unlink(missing_ok=True)
        log.info("stopped serving on %s", self.socket_path)
