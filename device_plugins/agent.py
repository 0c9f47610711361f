"""The node agent: discovery, health, node annotation and kubelet's API, together.

Threads: one follows the backend's health events, one rescans and writes the node
annotation, and the caller's thread serves kubelet: it starts the gRPC server,
registers, and watches for a kubelet restart (new ``kubelet.sock``) or the loss of
our socket, after which it serves and registers again. ``stop`` ends everything.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from device_plugins.allocate import PodAllocator
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import DiscoveryBackend
from device_plugins.hami_core import HamiCoreConfig
from device_plugins.inventory import Splitting
from device_plugins.kube import KubeGateway
from device_plugins.registration import KubeletWatch, RegistrationError, register
from device_plugins.reporter import NodeReporter, run_inventory_loop
from device_plugins.server import DevicePluginService, PluginServer, ServerError
from device_plugins.settings import DevicePluginSettings
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

log = logging.getLogger(__name__)


def splitting_from(settings: DevicePluginSettings) -> Splitting:
    return Splitting(
        split_count=settings.split_count,
        memory_scaling=settings.memory_scaling,
        core_scaling=settings.core_scaling,
    )


def hami_config_from(settings: DevicePluginSettings) -> HamiCoreConfig:
    return HamiCoreConfig(
        hook_path=settings.hook_path,
        lock_dir=settings.vgpu_lock_dir,
        memory_scaling=settings.memory_scaling,
        disable_core_limit=settings.disable_core_limit,
        libcuda_log_level=settings.libcuda_log_level,
    )


@dataclass
class AgentStatus:
    """What the agent has done so far; read by tests and logs."""

    registrations: int = 0
    registration_failures: int = 0
    serving: bool = False


class DevicePluginAgent:
    """Runs until ``stop`` is set; build it with the backend and gateway to use."""

    def __init__(
        self,
        settings: DevicePluginSettings,
        *,
        backend: DiscoveryBackend,
        gateway: KubeGateway | None,
        config: NvidiaConfig | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.gateway = gateway
        self.config = config or NvidiaConfig(count_resource=settings.resource_name)
        self.state = DeviceState()
        self.status = AgentStatus()
        self.registered = threading.Event()
        self.stop_event = threading.Event()
        self.allocator = PodAllocator(
            gateway,
            node=settings.node_name,
            state=self.state,
            hami=hami_config_from(settings),
            config=self.config,
        )
        self.reporter = (
            NodeReporter(
                gateway,
                node=settings.node_name,
                annotation=self.config.register_annotation,
                splitting=splitting_from(settings),
            )
            if gateway is not None
            else None
        )

    def stop(self) -> None:
        """Ask every loop to end; ``run`` returns once they have."""
        self.stop_event.set()
        self.state.wake()

    def _service(self, stopping: threading.Event) -> DevicePluginService:
        return DevicePluginService(
            state=self.state,
            split_count=self.settings.split_count,
            allocator=self.allocator,
            stopping=stopping,
        )

    def run(self) -> None:
        """Discover, then serve kubelet until stopped. Raises ``DiscoveryError`` at start."""
        self.state.replace(self.backend.discover())
        threads = [
            threading.Thread(target=self._health, name="health", daemon=True),
            threading.Thread(target=self._inventory, name="inventory", daemon=True),
        ]
        for thread in threads:
            thread.start()
        try:
            self._serve_kubelet()
        finally:
            self.stop()
            for thread in threads:
                thread.join(timeout=10)
            self.backend.close()

    def _health(self) -> None:
        try:
            self.backend.watch_health(self.stop_event, self.state.apply)
        except Exception:
            # Without health checks the plugin still serves; say so loudly.
            log.exception("the %s health watcher stopped", self.backend.name)

    def _inventory(self) -> None:
        try:
            self._inventory_loop()
        except Exception:
            log.exception("the inventory loop stopped; the node annotation is no longer updated")

    def _inventory_loop(self) -> None:
        run_inventory_loop(
            backend=self.backend,
            state=self.state,
            reporter=self.reporter,
            stop=self.stop_event,
            rescan_interval_s=self.settings.rescan_interval_s,
            retry_interval_s=self.settings.retry_interval_s,
        )

    def _start_and_register(self, watch: KubeletWatch) -> PluginServer | None:
        """Serve on a fresh socket, then register; None (and logged) on failure."""
        server = PluginServer(self.settings.plugin_socket, self._service, on_stop=self.state.wake)
        try:
            server.start(check_timeout=self.settings.register_timeout_s)
        except ServerError as exc:
            log.error("%s", exc)
            return None
        try:
            register(
                self.settings.kubelet_socket,
                endpoint=self.settings.socket_name,
                resource_name=self.settings.resource_name,
                timeout=self.settings.register_timeout_s,
            )
        except RegistrationError as exc:
            log.error("%s; retrying in %.0f s", exc, self.settings.retry_interval_s)
            self.status.registration_failures += 1
            server.stop()
            return None
        watch.registered()
        self.status.registrations += 1
        self.registered.set()
        log.info("registered %s with kubelet", self.settings.resource_name)
        return server

    def _serve_kubelet(self) -> None:
        watch = KubeletWatch(self.settings.kubelet_socket)
        server: PluginServer | None = None
        try:
            while not self.stop_event.is_set():
                if server is None:
                    server = self._start_and_register(watch)
                    self.status.serving = server is not None
                    if server is None:
                        self.stop_event.wait(self.settings.retry_interval_s)
                        continue
                if watch.kubelet_restarted() or not server.socket_present():
                    log.warning("kubelet restarted or our socket is gone; registering again")
                    self.registered.clear()
                    server.stop()
                    server = None
                    continue
                self.stop_event.wait(self.settings.kubelet_watch_interval_s)
        finally:
            if server is not None:
                server.stop()
            self.status.serving = False
