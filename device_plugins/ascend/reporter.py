"""The NVIDIA agent's node reporter, writing the Ascend plugin's annotations instead.

The cadence is the shared one (``run_inventory_loop``: every rescan and at once on a
health change). Unlike NVIDIA's inventory, every round is written, even when the chips
did not change: the handshake must answer the scheduler's ``Requesting_…`` each time,
as HAMi's plugin does on every registration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.ascend.inventory import node_annotations
from device_plugins.device_state import Snapshot
from device_plugins.inventory import Splitting
from device_plugins.kube import KubeGateway
from device_plugins.reporter import NodeReporter

log = logging.getLogger(__name__)


class AscendNodeReporter(NodeReporter):
    def __init__(
        self,
        gateway: KubeGateway,
        *,
        node: str,
        flavour: AscendFlavour,
        now: Callable[[], datetime] = datetime.now,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(
            gateway,
            node=node,
            annotation=flavour.vendor.inventory_annotation,
            splitting=Splitting(split_count=flavour.count),
            clock=clock,
        )
        self._flavour = flavour
        self._now = now
        self._inventory: str | None = None

    def report(self, snapshot: Snapshot) -> bool:
        """Write the registration for this snapshot; always patches."""
        annotations = node_annotations(snapshot.devices, self._flavour, now=self._now())
        self._gateway.patch_node_annotations(self._node, annotations)
        self.patches += 1
        self.last_success = self._clock()
        inventory = annotations[self._flavour.vendor.inventory_annotation]
        if inventory != self._inventory:
            self._inventory = inventory
            log.info(
                "node %s: %s updated (%d chips)",
                self._node,
                self._flavour.vendor.inventory_annotation,
                len(snapshot.devices),
            )
        return True
