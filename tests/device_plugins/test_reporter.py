"""The node annotation: written when it changes, not otherwise; rescans and retries."""

from __future__ import annotations

import threading

import pytest

from device_plugins.device_state import DeviceState
from device_plugins.discovery import FakeBackend
from device_plugins.discovery.base import DiscoveryError, HealthEvent
from device_plugins.inventory import Splitting, register_annotation
from device_plugins.kube import KubeAccessError, KubernetesGateway
from device_plugins.reporter import NodeReporter, run_inventory_loop
from tests.device_plugins.conftest import NODE
from tests.device_plugins.harness import eventually
from tests.device_plugins.pods_factory import CONFIG, DEVICES, GPU0
from tests.support.apiserver import FakeApiServer

KEY = CONFIG.register_annotation


def reporter(gateway: KubernetesGateway, splitting: Splitting | None = None) -> NodeReporter:
    return NodeReporter(gateway, node=NODE, annotation=KEY, splitting=splitting or Splitting())


def annotation(api: FakeApiServer) -> str | None:
    value = (api.get_node(NODE)["metadata"].get("annotations") or {}).get(KEY)
    return value if isinstance(value, str) else None


def node_patches(api: FakeApiServer) -> int:
    return sum(1 for method, path in api.requests if method == "PATCH" and "/nodes/" in path)


def test_writes_once_and_again_only_on_change(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str
) -> None:
    state = DeviceState(DEVICES)
    r = reporter(gateway, Splitting(split_count=5, memory_scaling=2.0))
    assert r.report(state.snapshot())
    written = annotation(kube_api)
    assert written == register_annotation(DEVICES, Splitting(5, 2.0))
    assert '"devmem":65536' in written
    assert not r.report(state.snapshot())
    state.apply(HealthEvent(GPU0, False, "Xid 79"))
    assert r.report(state.snapshot())
    assert node_patches(kube_api) == 2


def test_an_equal_value_already_on_the_node_is_not_rewritten(
    kube_api: FakeApiServer, gateway: KubernetesGateway
) -> None:
    value = register_annotation(DEVICES, Splitting())
    kube_api.add_node({"metadata": {"name": NODE, "annotations": {KEY: value}}})
    assert not reporter(gateway).report(DeviceState(DEVICES).snapshot())
    assert node_patches(kube_api) == 0


def test_missing_node_is_an_error(kube_api: FakeApiServer, gateway: KubernetesGateway) -> None:
    with pytest.raises(KubeAccessError, match=f"node {NODE} not found"):
        reporter(gateway).report(DeviceState(DEVICES).snapshot())


class Loop:
    def __init__(self, **kwargs: object) -> None:
        self.stop = threading.Event()
        self.kwargs = kwargs
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        run_inventory_loop(stop=self.stop, **self.kwargs)  # type: ignore[arg-type]

    def __enter__(self) -> Loop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        state = self.kwargs["state"]
        assert isinstance(state, DeviceState)
        state.wake()
        self.thread.join(5)
        assert not self.thread.is_alive()


def test_loop_rescans_reports_and_retries(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str
) -> None:
    backend = FakeBackend(DEVICES[:1])
    state = DeviceState(DEVICES[:1])
    kube_api.fail_next("PATCH", f"/api/v1/nodes/{NODE}$", 500, message="etcd down")
    with Loop(
        backend=backend,
        state=state,
        reporter=reporter(gateway),
        rescan_interval_s=0.02,
        retry_interval_s=0.02,
    ):
        # The first write fails and is retried.
        eventually(lambda: annotation(kube_api), what="the first annotation")
        backend.set_devices(DEVICES)  # a GPU appears: seen at the next rescan
        expected = register_annotation(DEVICES, Splitting())
        eventually(lambda: annotation(kube_api) == expected, what="the rescanned annotation")
        backend.fail_with(DiscoveryError("driver gone"))  # a failed rescan keeps the last list
        calls = backend.discover_calls
        eventually(lambda: backend.discover_calls > calls + 1, what="rescans after a failure")
    assert annotation(kube_api) == expected


def test_loop_without_kubernetes_only_rescans() -> None:
    backend = FakeBackend(DEVICES[:1])
    state = DeviceState(DEVICES[:1])
    with Loop(
        backend=backend, state=state, reporter=None, rescan_interval_s=0.02, retry_interval_s=0.02
    ):
        backend.set_devices(DEVICES)
        eventually(lambda: len(state.snapshot().devices) == 2, what="the rescan")
