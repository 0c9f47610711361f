"""An extender with a small open-file limit and short read timeouts, and hostile clients for it.

Shared by the connection-limit tests and ``benchmarks/connection_flood.py``. The extender
runs as ``serve`` does, in a process whose open-file limit is 1,024, so that 1,200 hostile
connections would exhaust it without the caps. Hostile clients come from loopback
addresses other than 127.0.0.1 (127.0.0.2 and up), which the caps treat as any remote
client; the scheduler's client is on 127.0.0.1, which has the headroom.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path
from typing import IO

import msgspec

from tests.support.server import ExtenderProcess, args, node_json, pod_json, spawn_extender

ROOT = Path(__file__).resolve().parents[2]
FILE_LIMIT = 1024
HEADER_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 2.0
KEEPALIVE_TIMEOUT_S = 3.0
PER_CLIENT = 64
HEADROOM = 16
NODES = ["node-a", "node-b"]

LAUNCHER = (
    "import resource; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FILE_LIMIT}, {FILE_LIMIT})); "
    "from vgpu_extender.cli import main; main()"
)


def spawn_limited(tmp: Path, header_timeout_s: float = HEADER_TIMEOUT_S) -> ExtenderProcess:
    """A standalone extender on SQLite with two 2-GPU nodes, the caps above and
    ``FILE_LIMIT`` open files; its log is ``tmp / "extender.log"``."""
    inventory = tmp / "inventory.json"
    nodes = []
    for name in NODES:
        node = node_json(name, gpus=2)
        register = node["metadata"]["annotations"]["hami.io/node-nvidia-register"]
        nodes.append({"name": name, "labels": {}, "devices": json.loads(register)})
    inventory.write_text(json.dumps({"nodes": nodes}))
    env = {
        "VGPU_DATABASE_URL": f"sqlite:///{tmp / 'extender.db'}",
        "VGPU_HEADER_TIMEOUT_S": str(header_timeout_s),
        "VGPU_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S),
        "VGPU_KEEPALIVE_TIMEOUT_S": str(KEEPALIVE_TIMEOUT_S),
        "VGPU_MAX_CONNECTIONS_PER_CLIENT": str(PER_CLIENT),
        "VGPU_LOOPBACK_HEADROOM": str(HEADROOM),
        "VGPU_LOG_LEVEL": "INFO",
    }
    running = spawn_extender(
        env=env,
        log=tmp / "extender.log",
        entry=LAUNCHER,
        args=["--standalone", "--inventory", str(inventory)],
    )
    # Only 127.0.0.1 from here on: the probe's pooled connection would count.
    running.client.close()
    return running


def port_of(extender: ExtenderProcess) -> int:
    return int(extender.url.rsplit(":", 1)[1])


def filter_body() -> bytes:
    """A one-GPU filter for both nodes, as kube-scheduler sends it."""
    return msgspec.json.encode(args(pod_json("probe", gpus=1, mem=1000), NODES))


def start_flood(
    port: int, *, silent: int, slowloris: int, duration_s: int, errors: IO[str]
) -> subprocess.Popen[str]:
    """``tests.support.connection_flood`` against ``port``, once every connection was
    attempted (it printed ``ready``); stop it with SIGTERM, its last line is what it saw."""
    flood = subprocess.Popen(
        [
            *(sys.executable, "-m", "tests.support.connection_flood", "127.0.0.1", str(port)),
            *("--silent", str(silent), "--slowloris", str(slowloris)),
            *("--duration", str(duration_s)),
        ],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        # Its own stderr: one inherited from the caller may be a pipe nobody drains by
        # then, and a blocked write would stall the flood past its stop.
        stderr=errors,
        text=True,
    )
    assert flood.stdout is not None
    ready, _, _ = select.select([flood.stdout], [], [], 20.0)
    line = flood.stdout.readline().strip() if ready else ""
    if line != "ready":
        flood.kill()
        flood.wait()
        raise RuntimeError(f"the flood did not start (it printed {line!r})")
    return flood
