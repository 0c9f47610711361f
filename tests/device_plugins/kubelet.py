"""A test kubelet: serves ``Registration`` and drives the plugin as kubelet does.

On ``Register`` it checks the version, the resource name and that ``endpoint`` is a
file name, notes whether the plugin's socket already existed, dials it, calls
``GetDevicePluginOptions`` (failing the registration if that fails, as kubelet
does) and then reads ``ListAndWatch`` into a queue on a thread.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from device_plugins.kubelet_api import pb, pb_grpc

CALL_TIMEOUT = 5.0


@dataclass
class Registration:
    request: Any
    socket_existed: bool
    options: Any


class _Registrar(pb_grpc.RegistrationServicer):
    def __init__(self, kubelet: FakeKubelet) -> None:
        self.kubelet = kubelet

    def Register(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.version != "v1beta1":
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"unsupported version {request.version}"
            )
        domain, _, name = request.resource_name.partition("/")
        if not domain or not name or domain.endswith("kubernetes.io"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad resource {request.resource_name}")
        if "/" in request.endpoint:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "endpoint must be a file name")
        plugin_socket = self.kubelet.folder / request.endpoint
        existed = plugin_socket.exists()
        try:
            options = self.kubelet.connect(plugin_socket)
        except grpc.RpcError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"cannot reach the plugin: {exc}")
        self.kubelet.registrations.put(Registration(request, existed, options))
        return pb.Empty()


class FakeKubelet:
    """``start`` it on ``<folder>/kubelet.sock``; ``stop`` it like a kubelet going down."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = folder / "kubelet.sock"
        self.registrations: queue.Queue[Registration] = queue.Queue()
        self.lists: queue.Queue[Any] = queue.Queue()
        self.stream_ends: queue.Queue[grpc.StatusCode] = queue.Queue()
        self._server: grpc.Server | None = None
        self._channel: grpc.Channel | None = None
        self._stream: Any = None
        self._lock = threading.Lock()

    def start(self) -> FakeKubelet:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_RegistrationServicer_to_server(_Registrar(self), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def connect(self, plugin_socket: Path) -> Any:
        """Dial the plugin, ask its options, start reading ``ListAndWatch``."""
        with self._lock:
            self._close_plugin()
            channel = grpc.insecure_channel(f"unix:{plugin_socket}")
            stub = pb_grpc.DevicePluginStub(channel)
            options = stub.GetDevicePluginOptions(pb.Empty(), timeout=CALL_TIMEOUT)
            stream = stub.ListAndWatch(pb.Empty())
            self._channel, self._stream = channel, stream
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()
        return options

    def _read(self, stream: Any) -> None:
        """Queue every list; note how the stream ended (kubelet treats any end, even a
        clean one, as the plugin disconnecting)."""
        try:
            for response in stream:
                self.lists.put(response)
        except grpc.RpcError as exc:
            self.stream_ends.put(exc.code())
        else:
            self.stream_ends.put(grpc.StatusCode.OK)

    def plugin(self) -> Any:
        """A stub on the plugin's current connection, for Allocate and friends."""
        with self._lock:
            if self._channel is None:
                raise RuntimeError("no plugin registered")
            return pb_grpc.DevicePluginStub(self._channel)

    def next_registration(self, timeout: float = CALL_TIMEOUT) -> Registration:
        return self.registrations.get(timeout=timeout)

    def next_list(self, timeout: float = CALL_TIMEOUT) -> Any:
        return self.lists.get(timeout=timeout)

    def _close_plugin(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._channel is not None:
            self._channel.close()
        self._stream = self._channel = None

    def stop(self, *, clean_folder: bool = False) -> None:
        """Go down; with ``clean_folder`` delete every socket, as a restarting kubelet does."""
        with self._lock:
            self._close_plugin()
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
        if clean_folder:
            for entry in os.scandir(self.folder):
                if stat.S_ISSOCK(os.lstat(entry.path).st_mode):
                    os.unlink(entry.path)
