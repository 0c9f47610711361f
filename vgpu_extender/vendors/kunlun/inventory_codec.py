"""Kunlunxin inventories as HAMi's scheduler reads them.

- ``kunlun`` from node capacity ``kunlunxin.com/xpu``: XPU ``i`` is ``<node>-kunlun-<i>``,
  100 allocations, 98304 MiB, 100 cores, NUMA 1 for the upper half of the node's XPUs.
- ``XPU`` from node annotation ``hami.io/node-register-xpu``: HAMi's ``DeviceInfo`` JSON.
"""

from __future__ import annotations

from collections.abc import Mapping

from vgpu_extender.domain import Device
from vgpu_extender.vendors import hami_register
from vgpu_extender.vendors.kunlun.request import CARD_MIB, WHOLE_WORD

REGISTER_ANNOTATION = "hami.io/node-register-xpu"
WHOLE_COUNT = 100
CORES = 100


def xpus_from_capacity(
    node_name: str, capacity: Mapping[str, str], resource: str = "kunlunxin.com/xpu"
) -> tuple[Device, ...]:
    total = hami_register.capacity_count(capacity, resource)
    return tuple(
        Device(
            uuid=f"{node_name}-kunlun-{i}",
            index=i,
            count=WHOLE_COUNT,
            memory_mib=CARD_MIB,
            cores=CORES,
            type=WHOLE_WORD,
            numa=1 if i >= total // 2 else 0,
            vendor=WHOLE_WORD,
        )
        for i in range(total)
    )
