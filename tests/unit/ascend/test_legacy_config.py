"""HAMi v2.6's chip table, as its ConfigMap had it: the 910B3 chip under the CommonWord
``Ascend910B`` (resource ``huawei.com/Ascend910B``, node key
``hami.io/node-register-Ascend910B``) and the 910A entry with the ``chipName: 910B``
typo, both fixed in v2.7 (#1315). An operator pointing us at that ConfigMap keeps its
spellings."""

from __future__ import annotations

import json

from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.ascend import ascend_vendors

V26_VNPUS = [
    {
        "chipName": "910B",
        "commonWord": "Ascend910A",
        "resourceName": "huawei.com/Ascend910A",
        "resourceMemoryName": "huawei.com/Ascend910A-memory",
        "memoryAllocatable": 32768,
        "memoryCapacity": 32768,
        "aiCore": 30,
        "templates": [
            {"name": "vir02", "memory": 2184, "aiCore": 2},
            {"name": "vir04", "memory": 4369, "aiCore": 4},
            {"name": "vir08", "memory": 8738, "aiCore": 8},
            {"name": "vir16", "memory": 17476, "aiCore": 16},
        ],
    },
    {
        "chipName": "910B3",
        "commonWord": "Ascend910B",
        "resourceName": "huawei.com/Ascend910B",
        "resourceMemoryName": "huawei.com/Ascend910B-memory",
        "memoryAllocatable": 65536,
        "memoryCapacity": 65536,
        "aiCore": 20,
        "aiCPU": 7,
        "templates": [
            {"name": "vir05_1c_16g", "memory": 16384, "aiCore": 5, "aiCPU": 1},
            {"name": "vir10_3c_32g", "memory": 32768, "aiCore": 10, "aiCPU": 3},
        ],
    },
]


def test_the_v26_spelling_is_served_as_configured() -> None:
    a910, b910 = ascend_vendors({"vnpus": V26_VNPUS})
    assert (a910.name, a910.chip.chip_name) == ("Ascend910A", "910B")
    assert b910.name == "Ascend910B"
    assert b910.inventory_annotation == "hami.io/node-register-Ascend910B"
    assert b910.resource_names == {"huawei.com/Ascend910B", "huawei.com/Ascend910B-memory"}
    # The v2.6 plugin's registration (ascend-device-plugin issue #5) decodes, ring rule on.
    value = json.dumps(
        [
            {
                "id": f"Ascend910B-{i}",
                "count": 4,
                "devmem": 65536,
                "devcore": 20,
                "type": "Ascend910B",
                "health": True,
            }
            for i in range(2)
        ]
    )
    devices = b910.decode_node(NodeFacts("node-a", annotations={b910.inventory_annotation: value}))
    assert devices is not None
    assert [(d.uuid, d.vendor, d.count) for d in devices] == [
        ("Ascend910B-0", "Ascend910B", 4),
        ("Ascend910B-1", "Ascend910B", 4),
    ]
    assert b910.share.group_key == "NetworkID"
    pod = {
        "metadata": {"uid": "u"},
        "spec": {
            "containers": [
                {
                    "name": "m",
                    "resources": {
                        "limits": {
                            "huawei.com/Ascend910B": "1",
                            "huawei.com/Ascend910B-memory": "16384",
                        }
                    },
                }
            ]
        },
    }
    (container,) = b910.parse_pod(pod).containers
    assert (container.vendor, container.count, container.memory_mib) == ("Ascend910B", 1, 16384)
