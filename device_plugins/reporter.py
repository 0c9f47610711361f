"""Keeps the node's registration annotation equal to what the agent sees.

The agent rescans every ``rescan_interval_s`` (30 s, as HAMi) and writes the
annotation only when its value changed; health changes are written at once, since
the state wakes the reporter. After a failed write it retries sooner. Each
successful rescan also confirms the annotation (a no-op when nothing changed), so
``last_success`` ages only while discovery or the API server fails: the
``registration_age_seconds`` metric and the readiness probe read it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from device_plugins.device_state import DeviceState, Snapshot
from device_plugins.discovery.base import DiscoveryBackend, DiscoveryError
from device_plugins.inventory import Splitting, register_annotation
from device_plugins.kube import KubeAccessError, KubeGateway

log = logging.getLogger(__name__)


class NodeReporter:
    """Writes one node annotation, skipping writes that would change nothing."""

    def __init__(
        self,
        gateway: KubeGateway,
        *,
        node: str,
        annotation: str,
        splitting: Splitting,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._gateway = gateway
        self._clock = clock
        #: ``clock()`` when the annotation was last written or found current.
        self.last_success: float | None = None
        self._node = node
        self._annotation = annotation
        self._splitting = splitting
        self._written: str | None = None
        self.patches = 0

    def report(self, snapshot: Snapshot) -> bool:
        """Write the annotation for this snapshot if it differs; True when patched."""
        patched = self._write(register_annotation(snapshot.devices, self._splitting))
        self.last_success = self._clock()
        if not patched:
            return False
        log.info(
            "node %s: %s updated (%d devices)", self._node, self._annotation, len(snapshot.devices)
        )
        return True

    def _write(self, value: str) -> bool:
        if value == self._written:
            return False
        if self._written is None:
            node = self._gateway.get_node(self._node)
            if node is None:
                raise KubeAccessError(f"node {self._node} not found", status=404)
            current = ((node.get("metadata") or {}).get("annotations") or {}).get(self._annotation)
            if current == value:
                self._written = value
                return False
        self._gateway.patch_node_annotations(self._node, {self._annotation: value})
        self._written = value
        self.patches += 1
        return True


def rescan(backend: DiscoveryBackend, state: DeviceState) -> bool:
    """Discover again and take the result; True when anything visible changed."""
    return state.replace(backend.discover())


def run_inventory_loop(
    *,
    backend: DiscoveryBackend,
    state: DeviceState,
    reporter: NodeReporter | None,
    stop: threading.Event,
    rescan_interval_s: float,
    retry_interval_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Rescan on a timer and report on every change, until ``stop`` is set."""
    next_scan = clock() + rescan_interval_s
    reported = -1
    retry_at: float | None = None
    while not stop.is_set():
        now = clock()
        rescanned = False
        if now >= next_scan:
            try:
                rescan(backend, state)
                next_scan = now + rescan_interval_s
                rescanned = True
            except DiscoveryError as exc:
                log.error("rescan failed: %s", exc)
                next_scan = now + retry_interval_s
        snapshot = state.snapshot()
        if (
            reporter is not None
            and (snapshot.version != reported or rescanned)
            and (retry_at is None or now >= retry_at)
        ):
            try:
                reporter.report(snapshot)
                reported = snapshot.version
                retry_at = None
            except (KubeAccessError, ValueError) as exc:
                log.error("cannot write the node annotation: %s", exc)
                retry_at = now + retry_interval_s
        wake_at = min(next_scan, retry_at) if retry_at is not None else next_scan
        state.wait_for_change(snapshot.version, max(0.0, wake_at - clock()), stop=stop.is_set)
