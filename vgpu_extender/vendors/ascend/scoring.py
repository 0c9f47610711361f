"""The Ascend 910 topology bonus HAMi adds to a node's score (``ScoreNode``).

For each container, the share of its NPUs that sit on the one HCCS ring (NetworkID)
holding most of them, summed over the containers and weighted by 10. It is 0 when any
NPU has no NetworkID (310P, or a plugin before v2.7). The bonus is added raw, so it helps
a node under binpack and counts against it under spread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from vgpu_extender.domain import Device
from vgpu_extender.vendors.ascend.share import NETWORK_ID

#: HAMi's ``Ascend910NetworkWeight``.
NETWORK_WEIGHT = 10


def network_score(containers: Sequence[Sequence[Device]]) -> float:
    """The bonus for the NPUs each container was given (containers without NPUs add 0)."""
    total = 0.0
    for devices in containers:
        if not devices:
            continue
        networks = [device.custom(NETWORK_ID) for device in devices]
        if any(network is None for network in networks):
            return 0.0
        largest = max(Counter(networks).values())
        total += largest / len(devices)
    return total * NETWORK_WEIGHT
