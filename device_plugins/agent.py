"""The node agent: discovery, health, node annotation and kubelet's API, together.

Threads: one follows the backend's health events, one rescans and writes the node
annotation, and the caller's thread serves kubelet: it starts the gRPC server,
registers, and watches for a kubelet restart (new ``kubelet.sock``) or the loss of
our socket, after which it serves and registers again. ``stop`` ends everything.
A small HTTP server (``status_server``) exports the metrics and answers kubelet's
liveness and readiness probes from what these threads last did.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from device_plugins.allocate import PodAllocator
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import DiscoveryBackend
from device_plugins.hami_core import HamiCoreConfig
from device_plugins.inventory import Splitting
from device_plugins.kube import KubeGateway
from device_plugins.metrics import AgentMetrics, AgentView
from device_plugins.registration import KubeletWatch, RegistrationError, register
from device_plugins.reporter import NodeReporter, run_inventory_loop
from device_plugins.server import DevicePluginService, PluginServer, ServerError
from device_plugins.settings import DevicePluginSettings
from device_plugins.status_server import StatusServer
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


class AgentStartError(RuntimeError):
    """The agent cannot start; the message names the setting to change."""


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
        self.metrics = AgentMetrics()
        self.status_server: StatusServer | None = None
        # Liveness: the kubelet loop's last round, and the inventory thread.
        self._loop_tick = time.monotonic()
        self._inventory_thread: threading.Thread | None = None
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
        self.metrics.watch(
            AgentView(
                devices=lambda: self.state.snapshot().devices,
                registered=self.registered.is_set,
                last_report=lambda: self.reporter.last_success if self.reporter else None,
            )
        )

    def live(self) -> str | None:
        """None while the agent's loops run; the liveness probe's reason otherwise."""
        stalled = time.monotonic() - self._loop_tick
        if stalled > self.settings.live_stall_s:
            return f"the kubelet loop has not run for {stalled:.0f} s"
        thread = self._inventory_thread
        if thread is not None and not thread.is_alive() and not self.stop_event.is_set():
            return "the inventory loop stopped"
        return None

    def ready(self) -> str | None:
        """None once registered with kubelet and the node annotation is recent."""
        if not self.registered.is_set():
            return "not registered with kubelet"
        if self.reporter is None:
            return None
        last = self.reporter.last_success
        if last is None:
            return "the node annotation has not been written yet"
        age = time.monotonic() - last
        if age > self.settings.ready_report_max_age_s:
            return f"the node annotation was last confirmed {age:.0f} s ago"
        return None

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
            on_allocate=self.metrics.observe_allocate,
        )

    def run(self) -> None:
        """Discover, then serve kubelet until stopped.

        Raises ``AgentStartError`` when the metrics address cannot be served and
        ``DiscoveryError`` when discovery fails at start.
        """
        self._loop_tick = time.monotonic()
        self._start_status_server()
        try:
            self.state.replace(self.backend.discover())
            self._run_loops()
        finally:
            if self.status_server is not None:
                self.status_server.stop()

    def _start_status_server(self) -> None:
        bind = self.settings.metrics_bind
        if bind is None:
            return
        server = StatusServer(
            bind, metrics=self.metrics.exposition, live=self.live, ready=self.ready
        )
        try:
            server.start()
        except OSError as exc:
            raise AgentStartError(
                f"cannot serve metrics on {self.settings.metrics_address!r} "
                f"(VGPU_DP_METRICS_ADDRESS / --metrics-address): {exc.strerror or exc}; "
                "choose a free host:port, or 'off'"
            ) from exc
        self.status_server = server

    def _run_loops(self) -> None:
        inventory = threading.Thread(target=self._inventory, name="inventory", daemon=True)
        threads = [threading.Thread(target=self._health, name="health", daemon=True), inventory]
        for thread in threads:
            thread.start()
        self._inventory_thread = inventory  # watched by liveness only once started
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
                self._loop_tick = time.monotonic()
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
