"""Everything one extender process runs, built from ``Settings`` and started in order.

Start: migrate the store, rebuild the index from it, register the standalone inventory
(demo or file), start the bind Event recorder and the bound marker, and start the first
sync with Kubernetes in the background (the watches follow it): the server answers
while it runs, and the verbs that place pods wait for it (``not_serving``). Stop: the
recorder and the marker (finishing what they hold), the watches, then the database
engine. Built by the HTTP app's lifespan, never at import.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from vgpu_extender import store
from vgpu_extender.kube import KubeClient, NodeLock
from vgpu_extender.policies import profile_from_settings
from vgpu_extender.services.bind_publisher import KubePublisher, StandalonePublisher
from vgpu_extender.services.bind_store import SqlBindStore
from vgpu_extender.services.binding import BindingService
from vgpu_extender.services.bound_marker import BoundMarker
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.conflicts import ConflictRegistry
from vgpu_extender.services.demo import demo_inventory
from vgpu_extender.services.event_recorder import EventRecorder
from vgpu_extender.services.hooks import ServiceHooks
from vgpu_extender.services.inventory import InventoryService, load_inventory_file
from vgpu_extender.services.pacing import Foreground
from vgpu_extender.services.pod_cache import PodCache
from vgpu_extender.services.preemption import PreemptionService
from vgpu_extender.services.scheduling import SchedulingService
from vgpu_extender.services.sync import SyncService
from vgpu_extender.settings import Settings
from vgpu_extender.store.database import check_writable, wait_for_database
from vgpu_extender.store.sessions import Engine, Sessions
from vgpu_extender.vendors import Vendor, VendorSet, create_vendor_set

logger = logging.getLogger(__name__)


def connect_kube(settings: Settings) -> KubeClient | None:
    """The cluster this process talks to, or None (standalone) when there is none."""
    if settings.standalone:
        return None
    from vgpu_extender.kube.config import load_configuration
    from vgpu_extender.kube.real import RealKubeClient

    kubeconfig = str(settings.kubeconfig) if settings.kubeconfig is not None else None
    configuration = load_configuration(kubeconfig=kubeconfig)
    if configuration is None:
        logger.info("no in-cluster config and no kubeconfig: standalone mode")
        return None
    return RealKubeClient.from_configuration(configuration)


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    sessions: Sessions
    cluster: ClusterState
    inventory: InventoryService
    scheduling: SchedulingService
    binding: BindingService
    preemption: PreemptionService
    kube: KubeClient | None
    events: EventRecorder | None
    marker: BoundMarker | None
    sync: SyncService | None
    #: Running pods whose allocation could not be imported (always empty standalone).
    conflicts: ConflictRegistry
    #: The verbs in flight, marked by the HTTP layer: the background passes give way.
    foreground: Foreground
    #: Where binds do their I/O (store, API server) off the event loop: a plain
    #: executor, whose hand-off costs less than the general-purpose thread pool's.
    binds: ThreadPoolExecutor = field(init=False)

    def __post_init__(self) -> None:
        self.binds = ThreadPoolExecutor(self.settings.bind_workers, thread_name_prefix="vgpu-bind")

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        kube: KubeClient | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        vendor: Vendor | VendorSet | None = None,
        hooks: ServiceHooks | None = None,
    ) -> Runtime:
        """Wire the services; nothing touches the database or the network yet.

        ``vendor`` replaces the vendors the settings name (a vendor defined outside the
        registry, as the test suite's own, or a set of them); ``hooks`` are what the
        services report to (the HTTP layer's metrics and Events)."""
        hooks = hooks if hooks is not None else ServiceHooks()
        if vendor is None:
            vendor = create_vendor_set(settings.vendor, settings.vendor_config)
        cluster = ClusterState(vendor=vendor, profile=profile_from_settings(settings))
        engine = store.make_engine(settings.database_url, pool_size=settings.database_pool_size)
        sessions = store.session_factory(engine)
        pods = PodCache(max_size=settings.filter_cache_size, ttl_s=settings.filter_cache_ttl_s)
        inventory = InventoryService(
            cluster=cluster,
            sessions=sessions,
            split_count=settings.split_count,
            clock=clock,
            kube=kube,
        )
        events = EventRecorder(kube, on_drop=hooks.event_dropped) if kube is not None else None
        conflicts = ConflictRegistry(cluster)
        marker = BoundMarker(engine=engine, clock=clock) if kube is not None else None
        node_lock = (
            NodeLock(kube, timeout=timedelta(seconds=settings.node_lock_timeout_s))
            if kube is not None and settings.hami_node_lock
            else None
        )
        foreground = Foreground()
        sync = (
            SyncService(
                cluster=cluster,
                sessions=sessions,
                inventory=inventory,
                kube=kube,
                reservation_ttl=timedelta(seconds=settings.reservation_ttl_s),
                in_flight=timedelta(seconds=settings.reservation_in_flight_s),
                interval_s=settings.reconcile_interval_s,
                conflicts=conflicts,
                events=events,
                clock=clock,
                foreground=foreground,
            )
            if kube is not None
            else None
        )
        return cls(
            settings=settings,
            engine=engine,
            sessions=sessions,
            cluster=cluster,
            inventory=inventory,
            scheduling=SchedulingService(
                cluster=cluster,
                pod_cache=pods,
                inventory=inventory,
                admit_nodes=kube is None,
                on_filtered=hooks.filtered,
            ),
            binding=BindingService(
                cluster=cluster,
                pod_cache=pods,
                store=SqlBindStore(
                    engine=engine, sessions=sessions, cluster=cluster, marker=marker, clock=clock
                ),
                publisher=(
                    KubePublisher(kube, cluster.vendors.parse_pod)
                    if kube is not None
                    else StandalonePublisher(cluster, persist_node=inventory.persist)
                ),
                events=events,
                success_events=settings.bind_success_events,
                node_lock=node_lock,
                retries=settings.bind_retries,
                check_window_s=settings.bind_check_window_s,
                clock=clock,
                on_bound=hooks.bound,
                on_batch=hooks.bind_batch,
            ),
            preemption=PreemptionService(
                cluster=cluster, sessions=sessions, kube=kube, pod_cache=pods
            ),
            kube=kube,
            events=events,
            marker=marker,
            sync=sync,
            conflicts=conflicts,
            foreground=foreground,
        )

    def start(self) -> None:
        settings = self.settings
        # A server starting alongside (or restarting) gets a bounded while to come up.
        wait_for_database(self.engine, timeout_s=settings.database_startup_timeout_s)
        if settings.migrate_on_start:
            store.migrate(self.engine)
        check_writable(self.engine)
        nodes, pods = self.cluster.load(self.sessions)
        logger.info("index rebuilt from the store: %d nodes, %d pods", nodes, pods)
        vendors = self.cluster.vendors
        if settings.demo:
            self.inventory.register(
                demo_inventory(priority_label=settings.priority_label, vendors=vendors.names),
                source="file",
            )
        if settings.inventory_file is not None:
            inventories = load_inventory_file(
                settings.inventory_file, vendors, split_count=settings.split_count
            )
            self.inventory.register(inventories, source="file")
            logger.info("inventory file: %d nodes", len(inventories))
        if self.events is not None:
            self.events.start()
        if self.marker is not None:
            self.marker.start()
        if self.sync is not None:
            self.sync.start()

    def not_serving(self) -> str:
        """Why pods are not placed yet ("" once they are): with a cluster, until the
        first sync is done, a pod the reconcile has not imported yet may hold devices
        the index shows free."""
        sync = self.sync
        if sync is None or sync.synced:
            return ""
        return (
            "the extender is starting: its first sync with the Kubernetes API is not "
            f"done ({sync.first_sync.describe()})"
        )

    def stop(self) -> None:
        try:
            self.binds.shutdown(wait=True)  # binds under way finish first
            if self.events is not None:
                self.events.stop()  # after the last bind: posts what it queued
            if self.marker is not None:
                self.marker.stop()  # marks what it queued, before the engine goes
            if self.sync is not None:
                self.sync.stop()
            self.inventory.stop()  # nodes a request registered, before the engine goes
        finally:
            self.engine.dispose()
