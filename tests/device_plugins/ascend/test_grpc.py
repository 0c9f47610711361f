"""The Ascend agent over real gRPC on unix sockets, driven by the test kubelet, with pods
bound by the extender's Ascend vendor in the test API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from device_plugins.ascend.agent import AscendAgent, build_agent
from device_plugins.ascend.discovery import AscendBackend, NpuSmiSource
from device_plugins.ascend.flavour import AscendFlavour
from device_plugins.ascend.settings import AscendSettings
from device_plugins.kube import KubernetesGateway
from device_plugins.kubelet_api import pb
from device_plugins.settings import DevicePluginSettings
from tests.device_plugins.ascend.support import (
    B3,
    RecordedNpuSmi,
    b3_agent,
    backend,
    bound_pod,
    uuid,
)
from tests.device_plugins.conftest import NODE
from tests.device_plugins.harness import TIMEOUT, RunningAgent, eventually, quick_settings
from tests.device_plugins.kubelet import FakeKubelet
from tests.device_plugins.pods_factory import annotations_of, lock_of
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors import NodeFacts

CW = "Ascend910B3"
TO_ALLOCATE = f"hami.io/{CW}-devices-to-allocate"
PHASE = "hami.io/bind-phase"


@pytest.fixture
def settings(short_dir: Path, tmp_path: Path) -> DevicePluginSettings:
    return quick_settings(short_dir, tmp_path, discovery="npu-smi")


@pytest.fixture
def flavour() -> AscendFlavour:
    return backend(B3)[1]


@pytest.fixture
def agent(
    settings: DevicePluginSettings, gateway: KubernetesGateway, node: str, tmp_path: Path
) -> AscendAgent:
    return b3_agent(settings, gateway, tmp_path)


@pytest.fixture
def running(agent: AscendAgent, kubelet: FakeKubelet) -> Iterator[RunningAgent]:
    with RunningAgent(agent) as running:
        kubelet.next_registration()
        yield running


def allocate(kubelet: FakeKubelet, device_ids: list[str]) -> Any:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)]
    )
    return kubelet.plugin().Allocate(request, timeout=TIMEOUT).container_responses[0]


def mounts(response: Any) -> list[tuple[str, str, bool]]:
    return [(m.host_path, m.container_path, m.read_only) for m in response.mounts]


def test_registers_the_chips_resource_and_lists_chips_times_slots(
    agent: AscendAgent, kubelet: FakeKubelet
) -> None:
    with RunningAgent(agent):
        registration = kubelet.next_registration()
        assert registration.socket_existed
        assert (registration.request.resource_name, registration.request.endpoint) == (
            "huawei.com/Ascend910B3",
            "Ascend910B3.sock",
        )
        listed = {device.ID: device.health for device in kubelet.next_list().devices}
    assert set(listed) == {f"{uuid(p)}-{i}" for p in range(8) for i in range(4)}
    assert {listed[f"{uuid(5)}-{i}"] for i in range(4)} == {"Unhealthy"}
    assert {h for rid, h in listed.items() if not rid.startswith(uuid(5))} == {"Healthy"}


def test_the_running_agent_registers_the_node(
    running: RunningAgent, kube_api: FakeApiServer, flavour: AscendFlavour
) -> None:
    def annotations() -> dict[str, str] | None:
        found = kube_api.get_node(NODE)["metadata"].get("annotations") or {}
        return found if f"hami.io/node-handshake-{CW}" in found else None

    written = eventually(annotations, what="the node registration")
    assert written["hami-vnpu-core"] == "false"
    assert written[f"hami.io/node-handshake-{CW}"].startswith("Reported_")
    devices = flavour.vendor.decode_node(NodeFacts("node-a", annotations=written))
    assert devices is not None and [d.uuid for d in devices] == [uuid(i) for i in range(8)]


def test_a_hard_split_vnpu_gets_its_template(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer, flavour: AscendFlavour
) -> None:
    bound_pod(kube_api, flavour, "vnpu", [[DeviceGrant(uuid(2), 16384, 0)]])
    assert annotations_of(kube_api, "vnpu")[f"huawei.com/{CW}"] == (
        f'[{{"UUID":"{uuid(2)}","temp":"vir05_1c_16g","memory":16384}}]'
    )
    answer = allocate(kubelet, [f"{uuid(2)}-1"])
    assert dict(answer.envs) == {
        "ASCEND_VISIBLE_DEVICES": "2",
        "ASCEND_VNPU_SPECS": "vir05_1c_16g",
    }
    assert mounts(answer) == []
    after = annotations_of(kube_api, "vnpu")
    assert (after[TO_ALLOCATE], after[PHASE]) == (";", "success")
    assert lock_of(kube_api) is None


def test_whole_cards_get_their_physical_ids_and_no_template(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer, flavour: AscendFlavour
) -> None:
    bound_pod(
        kube_api,
        flavour,
        "whole",
        [[DeviceGrant(uuid(7), 65536, 0), DeviceGrant(uuid(6), 65536, 0)]],
    )
    answer = allocate(kubelet, [f"{uuid(6)}-0", f"{uuid(7)}-3"])
    assert dict(answer.envs) == {"ASCEND_VISIBLE_DEVICES": "7,6"}
    assert annotations_of(kube_api, "whole")[PHASE] == "success"


def test_a_hami_core_pod_gets_the_limiter(
    running: RunningAgent,
    kubelet: FakeKubelet,
    kube_api: FakeApiServer,
    flavour: AscendFlavour,
    tmp_path: Path,
) -> None:
    pod = bound_pod(kube_api, flavour, "soft", [[DeviceGrant(uuid(1), 8192, 30)]], hami_core=True)
    answer = allocate(kubelet, [f"{uuid(1)}-2"])
    assert dict(answer.envs) == {
        "ASCEND_VISIBLE_DEVICES": "1",
        "NPU_MEM_QUOTA": "8192",
        "NPU_PRIORITY": "30",
        "NPU_GLOBAL_SHM_PATH": "/hami-shared-region/1_global_registry",
        "NPU_LOCAL_SHM_PATH": "/hami-vnpu-shmem/vnpu_local_shmem",
    }
    own = tmp_path / "hook" / "containers" / f"{pod['metadata']['uid']}_c0"
    assert mounts(answer) == [
        ("/usr/local/bin/npu-smi", "/usr/local/bin/npu-smi", True),
        ("/etc/ascend_install.info", "/etc/ascend_install.info", True),
        ("/usr/local/Ascend/driver/lib64/driver", "/usr/local/Ascend/driver/lib64/driver", True),
        ("/usr/local/Ascend/driver/version.info", "/usr/local/Ascend/driver/version.info", True),
        (str(tmp_path / "core"), "/hami-vnpu-core", True),
        (str(tmp_path / "core" / "ld.so.preload"), "/etc/ld.so.preload", True),
        (str(tmp_path / "shared"), "/hami-shared-region", False),
        (str(own), "/hami-vnpu-shmem", False),
    ]
    assert own.is_dir()


def test_a_device_number_mismatch_fails_the_pod_and_releases_the_lock(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer, flavour: AscendFlavour
) -> None:
    bound_pod(
        kube_api, flavour, "two", [[DeviceGrant(uuid(0), 65536, 0), DeviceGrant(uuid(1), 65536, 0)]]
    )
    with pytest.raises(grpc.RpcError) as caught:
        allocate(kubelet, [f"{uuid(0)}-0"])
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(
        "device number not matched: annotation has 2, request has 1"
    )
    assert annotations_of(kube_api, "two")[PHASE] == "failed"
    assert lock_of(kube_api) is None


def test_containers_are_popped_in_order(
    running: RunningAgent, kubelet: FakeKubelet, kube_api: FakeApiServer, flavour: AscendFlavour
) -> None:
    bound_pod(
        kube_api,
        flavour,
        "pair",
        [[DeviceGrant(uuid(0), 16384, 0)], [DeviceGrant(uuid(3), 32768, 0)]],
    )
    preferred = kubelet.plugin().GetPreferredAllocation(
        pb.PreferredAllocationRequest(
            container_requests=[
                pb.ContainerPreferredAllocationRequest(
                    available_deviceIDs=[f"{uuid(p)}-{i}" for p in (2, 0, 3) for i in range(4)],
                    allocation_size=1,
                )
            ]
        ),
        timeout=TIMEOUT,
    )
    assert list(preferred.container_responses[0].deviceIDs) == [f"{uuid(0)}-0"]
    first = allocate(kubelet, [f"{uuid(0)}-0"])
    assert first.envs["ASCEND_VNPU_SPECS"] == "vir05_1c_16g"
    middle = annotations_of(kube_api, "pair")
    assert middle[TO_ALLOCATE] == f";{uuid(3)},{CW},32768,0:;"
    assert middle[PHASE] == "allocating"
    assert lock_of(kube_api) == "2026-08-01T06:00:00Z,ml,pair"
    second = allocate(kubelet, [f"{uuid(3)}-1"])
    assert dict(second.envs) == {"ASCEND_VISIBLE_DEVICES": "3", "ASCEND_VNPU_SPECS": "vir10_3c_32g"}
    done = annotations_of(kube_api, "pair")
    assert (done[TO_ALLOCATE], done[PHASE]) == (";;", "success")
    assert done[f"hami.io/{CW}-devices-allocated"] == (
        f"{uuid(0)},{CW},16384,0:;{uuid(3)},{CW},32768,0:;"
    )
    assert lock_of(kube_api) is None


def test_a_chip_npu_smi_reports_failed_is_listed_unhealthy_at_the_next_rescan(
    settings: DevicePluginSettings,
    gateway: KubernetesGateway,
    node: str,
    kubelet: FakeKubelet,
    flavour: AscendFlavour,
) -> None:
    recorded = RecordedNpuSmi(B3)
    failing = False

    def npu_smi(args: Any) -> str:
        text = recorded(args)
        if failing and list(args[1:]) == ["info"]:
            # NPU 2's health column turns from OK to Alarm.
            lines = text.splitlines(keepends=True)
            row = next(i for i, line in enumerate(lines) if line.startswith("| 2     910B3"))
            lines[row] = lines[row].replace("| OK            |", "| Alarm         |")
            text = "".join(lines)
        return text

    chips = AscendBackend(NpuSmiSource(NODE, run=npu_smi), flavour.chip)
    fast = settings.model_copy(update={"rescan_interval_s": 0.05})
    agent = build_agent(fast, AscendSettings(), gateway=gateway, backend=chips, flavour=flavour)
    with RunningAgent(agent):
        kubelet.next_registration()
        first = {d.ID: d.health for d in kubelet.next_list().devices}
        assert first[f"{uuid(2)}-0"] == "Healthy"
        failing = True
        update = {d.ID: d.health for d in kubelet.next_list().devices}
    assert {update[f"{uuid(2)}-{i}"] for i in range(4)} == {"Unhealthy"}
    assert update[f"{uuid(3)}-0"] == "Healthy"
