"""The node agent and the extender together, over the wires they share.

The Ascend agent discovers a 910B3 node from recorded ``npu-smi`` output, registers it on
the Node (HAMi's ``hami.io/node-register-Ascend910B3``, ``hami-vnpu-core`` and the
handshake) in the test API server, and serves kubelet over real gRPC on a unix socket.
The extender (``VGPU_VENDOR=ascend``, the real app over HTTP with the real Kubernetes
client) learns the node from that registration, answers the handshake, filters and
binds pods; the agent's Allocate then answers each pod the environment HAMi's Ascend
plugin would, from the annotations the extender wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from device_plugins.ascend.agent import AscendAgent
from device_plugins.kube import KubernetesGateway
from device_plugins.kubelet_api import pb
from tests.device_plugins.ascend.support import b3_agent
from tests.device_plugins.conftest import NODE
from tests.device_plugins.harness import TIMEOUT, RunningAgent, eventually, quick_settings
from tests.device_plugins.kubelet import FakeKubelet
from tests.support.apiserver import FakeApiServer
from tests.support.server import (
    RunningExtender,
    args,
    bind_args,
    pod_json,
    serve,
    standalone_settings,
)
from vgpu_extender.api import create_app
from vgpu_extender.kube.real import RealKubeClient

CW = "Ascend910B3"
PHASE = "hami.io/bind-phase"


@pytest.fixture
def agent(short_dir: Path, gateway: KubernetesGateway, node: str, tmp_path: Path) -> AscendAgent:
    settings = quick_settings(short_dir, tmp_path, discovery="npu-smi")
    return b3_agent(settings, gateway, tmp_path)


@pytest.fixture
def extender(kube_api: FakeApiServer, tmp_path: Path) -> Iterator[RunningExtender]:
    (tmp_path / "extender").mkdir()
    kube = RealKubeClient.from_configuration(kube_api.configuration())
    running = serve(
        create_app(standalone_settings(tmp_path / "extender", vendor="ascend"), kube=kube)
    )
    try:
        yield running
    finally:
        running.stop()
        kube.close()


def _pod(name: str, count: int, memory: int | None, **annotations: str) -> dict[str, Any]:
    pod = pod_json(name, gpus=None, annotations=annotations or None)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    limits[f"huawei.com/{CW}"] = str(count)
    if memory is not None:
        limits[f"huawei.com/{CW}-memory"] = str(memory)
    return pod


def _allocate(kubelet: FakeKubelet, device_ids: list[str]) -> dict[str, str]:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)]
    )
    answer = kubelet.plugin().Allocate(request, timeout=TIMEOUT).container_responses[0]
    return dict(answer.envs)


def _schedule(running: RunningExtender, kube_api: FakeApiServer, pod: dict[str, Any]) -> list[str]:
    """filter then bind, as kube-scheduler does; the chips the pod was given."""
    kube_api.add_pod(pod)
    assert running.verb("/filter", args(pod, [NODE]))["NodeNames"] == [NODE]
    assert running.verb("/bind", bind_args(pod, NODE)) == {"Error": ""}
    allocation = running.runtime.cluster.index.allocation(pod["metadata"]["uid"])
    assert allocation is not None
    return [grant.uuid for grant in allocation.assignment.containers[0]]


def test_the_agent_registers_the_extender_binds_and_the_agent_answers_each_pod(
    agent: AscendAgent,
    kubelet: FakeKubelet,
    kube_api: FakeApiServer,
    extender: RunningExtender,
) -> None:
    with RunningAgent(agent):
        kubelet.next_registration()
        index = extender.runtime.cluster.index
        eventually(lambda: NODE in index and bool(index.inventory(NODE).devices), what="node")
        devices = index.inventory(NODE).devices
        healthy = [d for d in devices if d.healthy]
        assert {d.vendor for d in devices} == {CW} and len(devices) == 8
        # The extender answered the agent's report.
        handshake = f"hami.io/node-handshake-{CW}"
        eventually(
            lambda: (
                (kube_api.get_node(NODE)["metadata"]["annotations"] or {})
                .get(handshake, "")
                .startswith("Requesting_")
            ),
            what="the handshake answered",
        )

        # A template vNPU: the agent names the template for Ascend's runtime.
        (chip,) = _schedule(extender, kube_api, _pod("vnpu", 1, 16384))
        assert chip in {d.uuid for d in healthy}
        envs = _allocate(kubelet, [f"{chip}-0"])
        physical = chip.rsplit("-", 1)[1]
        assert envs == {"ASCEND_VISIBLE_DEVICES": physical, "ASCEND_VNPU_SPECS": "vir05_1c_16g"}
        assert kube_api.get_pod("default", "vnpu")["metadata"]["annotations"][PHASE] == "success"

        # Two whole cards in one ring: both visible, no template.
        pair = _schedule(extender, kube_api, _pod("pair", 2, 65536))
        envs = _allocate(kubelet, [f"{uuid}-0" for uuid in pair])
        visible = sorted(envs["ASCEND_VISIBLE_DEVICES"].split(","))
        assert visible == sorted(uuid.rsplit("-", 1)[1] for uuid in pair)
        assert "ASCEND_VNPU_SPECS" not in envs
        rings = {d.custom("NetworkID") for d in devices if d.uuid in pair}
        assert len(rings) == 1
