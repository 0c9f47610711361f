"""The cluster the dashboard is shown: an inventory file and pods placed through the
real verbs (filter, then bind, over HTTP), on an extender served by uvicorn on
127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.server import (
    RunningExtender,
    place,
    pod_json,
    standalone_settings,
    start_extender,
)

TOKEN = "dashboard-s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
A100 = 81920
T4 = 15360
H100 = 81559


def _device(node: str, index: int, model: str, mem: int, *, health: bool = True) -> dict[str, Any]:
    return {
        "id": f"GPU-{node}-{index}",
        "index": index,
        "count": 10,
        "devmem": mem,
        "devcore": 100,
        "type": model,
        "mode": "hami-core",
        "health": health,
    }


#: Three nodes of three GPU models; one T4 reports itself unhealthy.
INVENTORY = {
    "nodes": [
        {
            "name": "gpu-a100-1",
            "labels": {"zone": "a"},
            "devices": [_device("gpu-a100-1", i, "NVIDIA-A100-SXM4-80GB", A100) for i in range(4)],
        },
        {
            "name": "gpu-h100-1",
            "labels": {"zone": "b"},
            "devices": [_device("gpu-h100-1", i, "NVIDIA-H100-80GB-HBM3", H100) for i in range(2)],
        },
        {
            "name": "gpu-t4-1",
            "labels": {"zone": "a"},
            "devices": [
                _device("gpu-t4-1", 0, "NVIDIA-Tesla-T4", T4),
                _device("gpu-t4-1", 1, "NVIDIA-Tesla-T4", T4, health=False),
            ],
        },
    ]
}
NODES = [node["name"] for node in INVENTORY["nodes"]]

#: Pods placed before the page opens: (name, namespace, node, memory MiB, cores %).
PODS = [
    ("train-0", "ml", "gpu-a100-1", 40000, 50),
    ("train-1", "ml", "gpu-a100-1", 20000, 30),
    ("infer-0", "serving", "gpu-h100-1", 8000, 20),
    ("notebook", "dev", "gpu-t4-1", 4000, 10),
]


def start_cluster(tmp: Path, **settings: Any) -> RunningExtender:
    """The extender on the inventory above, with the admin token set and the pods
    placed; ``settings`` override (``open_reads``)."""
    inventory = tmp / "inventory.json"
    inventory.write_text(json.dumps(INVENTORY))
    running = start_extender(
        standalone_settings(tmp, inventory_file=inventory, admin_token=TOKEN, **settings)
    )
    running.client.headers.update(AUTH)
    for name, namespace, node, mem, cores in PODS:
        place(running, pod_json(name, namespace=namespace, mem=mem, cores=cores), node)
    return running
