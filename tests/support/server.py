"""The extender served for real: uvicorn on 127.0.0.1, port 0, in a thread.

``start_extender(settings, kube=...)`` returns a running server with an httpx client;
the ``extender`` fixture is a factory that stops every server it started. Tests talk
to it over real HTTP, exactly as kube-scheduler would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from fastapi import FastAPI

from vgpu_extender.api import create_app
from vgpu_extender.kube import KubeClient
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.settings import Settings

STARTUP_TIMEOUT_S = 30.0


@dataclass
class RunningExtender:
    """A started extender: its app, base URL and an HTTP client bound to it."""

    app: FastAPI
    url: str
    server: uvicorn.Server
    thread: threading.Thread
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = httpx.Client(base_url=self.url, timeout=30.0)

    @property
    def runtime(self) -> Runtime:
        runtime: Runtime = self.app.state.runtime
        return runtime

    def post(self, path: str, body: bytes | str | Any) -> httpx.Response:
        """POST a raw body (bytes/str, sent as is) or a value encoded as JSON."""
        if isinstance(body, str):
            body = body.encode()
        elif not isinstance(body, bytes):
            body = msgspec.json.encode(body)
        return self.client.post(path, content=body, headers={"Content-Type": "application/json"})

    def verb(self, path: str, body: bytes | str | Any) -> Any:
        """POST and decode, asserting what kube-scheduler requires: exactly HTTP 200."""
        response = self.post(path, body)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(STARTUP_TIMEOUT_S)


def serve(app: FastAPI) -> RunningExtender:
    """Run ``app`` under uvicorn on a free loopback port until ``stop()``."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="extender-under-test", daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)
        if not thread.is_alive():
            raise RuntimeError("the extender did not start (see the log above)")
    port = server.servers[0].sockets[0].getsockname()[1]
    return RunningExtender(app, f"http://127.0.0.1:{port}", server, thread)


def start_extender(settings: Settings, *, kube: KubeClient | None = None) -> RunningExtender:
    return serve(create_app(settings, kube=kube))


def standalone_settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Standalone settings on a fresh SQLite file; ``overrides`` win."""
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'extender.db'}",
        "kube_mode": "off",
        "reconcile_interval_s": 3600.0,
    }
    values.update(overrides)
    return Settings(**values)


StartExtender = Callable[..., RunningExtender]


@pytest.fixture
def extender(tmp_path: Path) -> Iterator[StartExtender]:
    """Start extenders with ``extender(kube=None, **settings)``; all stop after the test."""
    started: list[RunningExtender] = []

    def start(*, kube: KubeClient | None = None, **overrides: Any) -> RunningExtender:
        running = start_extender(standalone_settings(tmp_path, **overrides), kube=kube)
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        running.stop()


# ---------------------------------------------------------------------------- bodies
def pod_json(
    name: str,
    *,
    uid: str | None = None,
    namespace: str = "default",
    gpus: int | None = 1,
    mem: int | None = None,
    cores: int | None = None,
    priority: int | None = None,
    annotations: dict[str, str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    """A Pod as the API server stores it, with one container asking for GPUs."""
    limits: dict[str, str] = {}
    if gpus is not None:
        limits["nvidia.com/gpu"] = str(gpus)
    if mem is not None:
        limits["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        limits["nvidia.com/gpucores"] = str(cores)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}"}
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "resources": {"limits": limits, "requests": limits}}],
        "schedulerName": "vgpu-scheduler",
    }
    if priority is not None:
        spec["priority"] = priority
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def node_json(
    name: str,
    *,
    gpus: int = 2,
    mem: int = 16384,
    model: str = "NVIDIA-Tesla T4",
    labels: dict[str, str] | None = None,
    register: str | None = None,
) -> dict[str, Any]:
    """A Node carrying the device plugin's registration annotation (JSON form)."""
    if register is None:
        register = msgspec.json.encode(
            [
                {
                    "id": f"GPU-{name}-{i}",
                    "index": i,
                    "count": 10,
                    "devmem": mem,
                    "devcore": 100,
                    "type": model,
                    "mode": "hami-core",
                    "health": True,
                }
                for i in range(gpus)
            ]
        ).decode()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": {"hami.io/node-nvidia-register": register},
        },
        "status": {"allocatable": {"nvidia.com/gpu": str(gpus * 10)}},
    }


def args(pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """ExtenderArgs with ``nodeCacheCapable: true``."""
    return {"Pod": pod, "Nodes": None, "NodeNames": names}


def bind_args(pod: dict[str, Any], node: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "PodName": meta["name"],
        "PodNamespace": meta["namespace"],
        "PodUID": meta["uid"],
        "Node": node,
    }


def place(running: RunningExtender, pod: dict[str, Any], node: str) -> None:
    """filter then bind, as kube-scheduler does; asserts the bind succeeded."""
    running.verb("/filter", args(pod, [node]))
    assert running.verb("/bind", bind_args(pod, node)) == {"Error": ""}
