"""What operators need from a running app, attached once the runtime is up.

``install(app, settings)`` adds one ASGI middleware. It times the scheduler verbs,
and it follows the app's lifespan: when start-up completes (the index is loaded from
the store) it wraps the scheduling and binding services so they report outcomes,
counts store errors, registers the scrape-time collectors, and starts the event
reporter and, when configured, the leader elector; at shutdown it stops them (giving
the Lease up) before the runtime itself stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request

from vgpu_extender.kube import KubeClient
from vgpu_extender.metrics import AllocationGauges, CountsCollector, Metrics, StateCollector
from vgpu_extender.services import admin
from vgpu_extender.services.binding import BindRequest
from vgpu_extender.services.events import UnschedulableReporter
from vgpu_extender.services.gauge_rows import IndexGaugeRows
from vgpu_extender.services.hooks import ServiceHooks
from vgpu_extender.services.last_good import LastGood
from vgpu_extender.services.leader import LeaderElector, LeaseConfig, default_identity
from vgpu_extender.services.pacing import Pacer
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.scheduling import FilterOutcome
from vgpu_extender.services.store_health import StoreHealth
from vgpu_extender.services.sync import SyncService
from vgpu_extender.settings import Settings

logger = logging.getLogger(__name__)

#: How long shutdown waits for the gauges' first writing to notice it is cut short.
WARMUP_JOIN_S = 5.0


def _write_gauges(gauges: AllocationGauges) -> None:
    try:
        gauges.render()
    except Exception:  # a scrape writes them anyway; the log says why this did not
        logger.warning("metrics: writing the allocation gauges ahead failed", exc_info=True)


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    detail: str


class _FilterReport:
    """Counts each filter answer; hands unschedulable ones to the reporter's worker."""

    def __init__(self, metrics: Metrics, reporter: UnschedulableReporter) -> None:
        self._results = metrics.filter_results
        self._reporter = reporter

    def filtered(self, pod: Mapping[str, Any], total: int, outcome: FilterOutcome) -> None:
        if outcome.error:
            self._results["error"].inc()
        elif outcome.feasible:
            self._results["feasible"].inc()
        else:
            self._results["unschedulable"].inc()
            self._reporter.submit(pod, total, outcome)


class _BindReport:
    def __init__(self, metrics: Metrics) -> None:
        self._success = metrics.bind_total.labels("success")
        self._failure = metrics.bind_total.labels("failure")

    def bound(self, args: BindRequest, error: str) -> None:
        (self._failure if error else self._success).inc()


def reconcile_counts(sync: SyncService | None) -> dict[str, int]:
    """What the reconcile passes fixed so far, by kind (empty when standalone)."""
    if sync is None:
        return {}
    totals = sync.totals
    return {
        "released_gone": totals.released_gone,
        "released_finished": totals.released_finished,
        "released_moved": totals.released_moved,
        "expired": totals.expired,
        "marked_bound": totals.marked_bound,
        "imported": totals.imported,
        "failed": totals.failed,
    }


@dataclass
class Operations:
    """Metrics, readiness and the background helpers of one app."""

    settings: Settings
    metrics: Metrics = field(default_factory=Metrics)
    runtime: Runtime | None = None
    elector: LeaderElector | None = None
    reporter: UnschedulableReporter | None = None
    store_health: StoreHealth | None = None
    gauges: AllocationGauges | None = None
    gauges_warmup: threading.Thread | None = None

    # ----------------------------------------------------------------- life cycle
    def hooks(self, kube: KubeClient | None) -> ServiceHooks:
        """What the services report to (metrics, the Events of unschedulable pods),
        given to them when the runtime is built."""
        metrics = self.metrics
        self.reporter = UnschedulableReporter(
            kube=kube, on_counts=metrics.count_rejections, on_drop=metrics.events_dropped.inc
        )
        return ServiceHooks(
            filtered=_FilterReport(metrics, self.reporter),
            bound=_BindReport(metrics),
            bind_batch=metrics.bind_batch_size.observe,
            event_dropped=metrics.events_dropped.inc,
        )

    def attach(self, runtime: Runtime) -> None:
        """Called once the runtime has started (the index is loaded from the store):
        the store probe, the collectors, the Events' worker and the leader election."""
        metrics = self.metrics
        settings = self.settings
        health = StoreHealth(
            runtime.engine,
            interval_s=settings.store_probe_interval_s,
            unready_after=settings.store_unready_after,
            ready_after=settings.store_ready_after,
            on_error=metrics.store_errors.inc,
        )
        health.start()
        self.store_health = health
        metrics.store_available.set_function(lambda: 1.0 if health.available else 0.0)
        # Devices and grants from the index; the pods' names, which only the store has,
        # read once per pod (left out while it cannot be reached).
        gauges = AllocationGauges(
            IndexGaugeRows(runtime.cluster, runtime.sessions, health),
            paced=lambda: Pacer(check_every=1, foreground=runtime.foreground).tick,
        )
        metrics.set_allocation_gauges(gauges)
        # Every node's lines written once now, in the background and paced (17-20 s at
        # 10,000 nodes), so that scrapes find them written; a scrape that comes sooner
        # waits for it.
        self.gauges = gauges
        self.gauges_warmup = threading.Thread(
            target=_write_gauges, args=(gauges,), name="vgpu-metrics-warmup", daemon=True
        )
        self.gauges_warmup.start()
        metrics.add_collector(
            StateCollector(
                cluster=runtime.cluster,
                ready=lambda: all(check.ok for check in self.readiness().values()),
                reserved_since=LastGood[Sequence[datetime]](
                    lambda: admin.reserved_since(runtime.sessions),
                    (),
                    health=health,
                    what="metrics: reservations",
                ),
                reservation_ttl_s=settings.reservation_ttl_s,
                leader_elect=settings.leader_elect,
            )
        )
        conflicts = runtime.conflicts
        metrics.import_conflicts.set_function(lambda: float(len(conflicts)))
        metrics.add_collector(
            CountsCollector(
                "vgpu_extender_reconcile_fixes",
                "Allocations the reconcile passes changed (or failed to), by kind",
                "kind",
                lambda: reconcile_counts(runtime.sync),
            )
        )
        if self.reporter is not None:  # made with the hooks the runtime was built with
            self.reporter.start()
        if settings.leader_elect and runtime.kube is not None:
            self.elector = LeaderElector(
                kube=runtime.kube,
                config=LeaseConfig(
                    namespace=settings.leader_lease_namespace,
                    name=settings.leader_lease_name,
                    identity=settings.leader_identity or default_identity(),
                    duration_s=settings.leader_lease_duration_s,
                ),
            )
            self.elector.start()
            elector = self.elector
            metrics.leader.set_function(lambda: 1.0 if elector.status().leading else 0.0)
        self.runtime = runtime

    def detach(self) -> None:
        """Stop the helpers (the Lease is given up) before the runtime stops."""
        self.runtime = None
        if self.elector is not None:
            self.elector.stop()
            self.elector = None
            self.metrics.leader.set_function(lambda: 0.0)
        if self.reporter is not None:
            self.reporter.stop()
            self.reporter = None
        if self.store_health is not None:
            self.store_health.stop()
            self.store_health = None
            self.metrics.store_available.set_function(lambda: 0.0)
        self.metrics.import_conflicts.set_function(lambda: 0.0)
        self.metrics.remove_collectors()
        if self.gauges is not None:
            self.gauges.close()
            self.gauges = None
        if self.gauges_warmup is not None:
            self.gauges_warmup.join(timeout=WARMUP_JOIN_S)
            self.gauges_warmup = None

    # ----------------------------------------------------------------- readiness
    def readiness(self) -> dict[str, Check]:
        """Each check that must pass before this replica should get traffic."""
        runtime = self.runtime
        checks = {
            "index": Check(True, "loaded from the store")
            if runtime is not None
            else Check(False, "not loaded from the store yet")
        }
        if self.store_health is not None:
            store = self.store_health.status()
            checks["store"] = Check(store.available, store.detail)
        if runtime is not None and runtime.sync is not None:
            sync = runtime.sync
            checks["cluster"] = (
                Check(True, "reconciled with the API server")
                if sync.synced
                else Check(
                    False,
                    f"first sync with the API server not done yet ({sync.first_sync.describe()})",
                )
            )
            checked = runtime.sync.startup_checked
            checks["reservations"] = Check(
                checked,
                "reservations left by an earlier process settled"
                if checked
                else "start-up check of reservations against the API server not done yet",
            )
        if self.settings.leader_elect:
            if self.elector is None:
                checks["leader"] = Check(
                    False, "leader election needs the Kubernetes API; this replica is standalone"
                )
            else:
                status = self.elector.status()
                checks["leader"] = Check(status.leading, status.detail)
        return checks


def install(app: FastAPI, settings: Settings) -> Operations:
    """Give ``app`` its metrics, readiness and background helpers."""
    operations = Operations(settings=settings)
    app.state.operations = operations
    return operations


async def get_operations(request: Request) -> Operations:
    operations: Operations = request.app.state.operations
    return operations


OperationsDep = Annotated[Operations, Depends(get_operations)]
