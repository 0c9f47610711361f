"""The extender served for real: uvicorn on 127.0.0.1, port 0, in a thread.

``start_extender(settings, kube=...)`` returns a running server with an httpx client;
the ``extender`` fixture is a factory that stops every server it started. Tests talk
to it over real HTTP, exactly as kube-scheduler would.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
import yaml
from fastapi import FastAPI

from vgpu_extender import store
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

    def live_rows(self, pod_uid: str) -> list[store.Allocation]:
        """The pod's live allocation rows in the extender's store."""
        with self.runtime.sessions() as session:
            return store.live_allocations(session, pod_uid=pod_uid)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(STARTUP_TIMEOUT_S)


def serve(app: FastAPI, *, host: str = "127.0.0.1", synced: bool = True) -> RunningExtender:
    """Run ``app`` under uvicorn on a free port of ``host`` (loopback) until ``stop()``;
    with ``synced``, returned once its first sync with Kubernetes (if any) is done and
    the verbs place pods."""
    config = uvicorn.Config(
        app, host=host, port=0, log_level="warning", lifespan="on", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="extender-under-test", daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.01)
        if not thread.is_alive():
            raise RuntimeError("the extender did not start (see the log above)")
    port = server.servers[0].sockets[0].getsockname()[1]
    running = RunningExtender(app, f"http://{host}:{port}", server, thread)
    if synced:
        _wait_synced(running)
    return running


def _wait_synced(running: RunningExtender) -> None:
    sync = running.runtime.sync
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while sync is not None and not sync.synced:
        if time.monotonic() > deadline:
            running.stop()
            raise RuntimeError(f"the first sync never finished: {sync.first_sync.describe()}")
        time.sleep(0.01)


def start_extender(
    settings: Settings, *, kube: KubeClient | None = None, synced: bool = True
) -> RunningExtender:
    return serve(create_app(settings, kube=kube), synced=synced)


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
    """Start extenders with ``extender(kube=None, synced=True, **settings)`` (see
    ``serve``); all stop after the test."""
    started: list[RunningExtender] = []

    def start(
        *, kube: KubeClient | None = None, synced: bool = True, **overrides: Any
    ) -> RunningExtender:
        running = start_extender(
            standalone_settings(tmp_path, **overrides), kube=kube, synced=synced
        )
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


# ---------------------------------------------------------------------------- processes
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_kubeconfig(path: Path, server_url: str) -> Path:
    """A kubeconfig for a test API server (no credentials)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server_url}}],
                "users": [{"name": "test", "user": {}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


@dataclass
class ExtenderProcess:
    """An extender in its own process (``python -m vgpu_extender.cli serve`` or a variant)."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path
    client: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        # One client (and one TLS context, built once) shared by every request and thread.
        self.client = httpx.Client(
            base_url=self.url, timeout=60.0, limits=httpx.Limits(max_connections=32)
        )

    def post(self, path: str, body: Any) -> httpx.Response:
        return self.client.post(path, content=msgspec.json.encode(body))

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"extender exited with {self.process.returncode}:\n{self.log.read_text()}"
                )
            try:
                if self.post("/noop", args_body_probe()).status_code == 200 and self.synced():
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"extender did not answer:\n{self.log.read_text()}")
            time.sleep(0.1)

    def synced(self) -> bool:
        """Whether the verbs place pods: no first sync with Kubernetes waits (readiness'
        ``cluster`` check passes or is absent: standalone, or ``/readyz`` served on
        another port)."""
        response = self.client.get("/readyz")
        if response.status_code not in (200, 503):
            return True
        cluster = response.json().get("checks", {}).get("cluster")
        return cluster is None or bool(cluster.get("ok"))

    def stop(self) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def spawn_extender(
    *,
    env: dict[str, str],
    log: Path,
    entry: str = "from vgpu_extender.cli import main; main()",
    args: Sequence[str] = (),
    wait: bool = True,
) -> ExtenderProcess:
    """Start an extender process on a free port; with ``wait``, until it answers."""
    port = free_port()
    command = [sys.executable, "-c", entry, "serve", "--port", str(port), *args]
    full_env = {
        **os.environ,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        **env,
    }
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    running = ExtenderProcess(process, f"http://127.0.0.1:{port}", log)
    if wait:
        running.wait_ready()
    return running


def spawn_tls_demo(
    directory: Path, cert: Path, key: Path, *, token: str
) -> tuple[ExtenderProcess, str]:
    """The demo extender in a process serving HTTPS with ``cert`` (standalone, SQLite in
    ``directory``, the admin ``token``), once it answers: the process and its URL."""
    process = spawn_extender(
        env={
            "VGPU_TLS_CERT": str(cert),
            "VGPU_TLS_KEY": str(key),
            "VGPU_DEMO": "true",
            "VGPU_KUBE_MODE": "off",
            "VGPU_ADMIN_TOKEN": token,
            "VGPU_DATABASE_URL": f"sqlite:///{directory / 'tls.db'}",
        },
        log=directory / "extender.log",
        wait=False,
    )
    url = process.url.replace("http://", "https://")
    try:
        _wait_https(url, cert, process.log)
    except BaseException:
        process.stop()
        raise
    return process, url


def _wait_https(url: str, cert: Path, log: Path, timeout_s: float = 60.0) -> None:
    verify = ssl.create_default_context(cafile=cert)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", verify=verify, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)  # not ready, or not answering yet
    raise RuntimeError(f"the extender never answered over TLS:\n{log.read_text()}")


def args_body_probe() -> dict[str, Any]:
    return {"Pod": {"metadata": {"name": "probe"}}, "Nodes": None, "NodeNames": []}


class _CrashingKube:
    """The real client, except that the process dies abruptly around ``bind_pod``."""

    def __init__(self, inner: Any, when: str) -> None:
        self._inner = inner
        self._when = when

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def bind_pod(
        self,
        namespace: str,
        name: str,
        uid: str,
        node: str,
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        if self._when == "before-binding":
            os.kill(os.getpid(), signal.SIGKILL)
        self._inner.bind_pod(namespace, name, uid, node, annotations=annotations)
        if self._when == "after-binding":
            os.kill(os.getpid(), signal.SIGKILL)


def crashing_main() -> None:
    """Entry point of an extender killed (SIGKILL) just before or after a Binding.

    ``VGPU_TEST_CRASH`` says when; settings come from the environment as usual.
    """
    from vgpu_extender.kube.config import load_configuration
    from vgpu_extender.kube.real import RealKubeClient

    port = int(sys.argv[sys.argv.index("--port") + 1])
    settings = Settings(port=port)
    configuration = load_configuration(kubeconfig=str(settings.kubeconfig))
    assert configuration is not None
    kube = _CrashingKube(
        RealKubeClient.from_configuration(configuration), os.environ["VGPU_TEST_CRASH"]
    )
    uvicorn.run(create_app(settings, kube=kube), host="127.0.0.1", port=port, log_level="warning")
