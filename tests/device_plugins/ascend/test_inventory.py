"""The Ascend registration: devices as the plugin registers them, decoded back by the
scheduler's vendor, the hami-vnpu-core mode and the handshake value."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from device_plugins.ascend.flavour import resolve_flavour
from device_plugins.ascend.inventory import node_annotations, to_devices
from device_plugins.ascend.reporter import AscendNodeReporter
from device_plugins.ascend.settings import AscendSettings
from device_plugins.device_state import DeviceState
from device_plugins.discovery.base import DiscoveryError
from device_plugins.kube import KubernetesGateway
from tests.device_plugins.ascend.support import B3, P310, backend, source, uuid
from tests.device_plugins.conftest import NODE
from tests.support.apiserver import FakeApiServer
from vgpu_extender.vendors import NodeFacts
from vgpu_extender.vendors.ascend.handshake import check_health

NOW = datetime(2026, 8, 21, 10, 0, 0)
HANDSHAKE = re.compile(r"^Reported_\d{4}\.\d{2}\.\d{2} \d{2}:\d{2}:\d{2}$")


def test_910b3_chips_register_slots_allocatable_memory_and_network_ids() -> None:
    b3, flavour = backend(B3)
    devices = to_devices(b3.discover(), flavour)
    assert [(d.uuid, d.index) for d in devices] == [(uuid(i), i) for i in range(8)]
    assert {(d.count, d.memory_mib, d.cores, d.type, d.numa) for d in devices} == {
        (4, 65536, 20, "Ascend910B3", 0)
    }
    assert [d.custom("NetworkID") for d in devices] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [d.healthy for d in devices] == [True] * 5 + [False] + [True] * 2


def test_the_register_annotation_is_the_plugins_json() -> None:
    b3, flavour = backend(B3)
    value = node_annotations(b3.discover(), flavour, now=NOW)["hami.io/node-register-Ascend910B3"]
    assert value.startswith(
        '[{"id":"node-a-npu-0","count":4,"devmem":65536,"devcore":20,"type":"Ascend910B3",'
        '"health":true,"custominfo":{"NetworkID":0}},{"id":"node-a-npu-1","index":1,'
    )
    assert '{"id":"node-a-npu-5","index":5,"count":4,"devmem":65536,"devcore":20,' in value
    assert '"type":"Ascend910B3","custominfo":{"NetworkID":1}}' in value  # no health: false


@pytest.mark.parametrize("core_mode", [False, True])
@pytest.mark.parametrize("kind", [B3, P310])
def test_the_annotations_decode_back_to_the_same_devices(kind: str, core_mode: bool) -> None:
    chips, flavour = backend(kind, hami_vnpu_core=core_mode)
    devices = to_devices(chips.discover(), flavour)
    annotations = node_annotations(chips.discover(), flavour, now=NOW)
    assert annotations["hami-vnpu-core"] == ("true" if core_mode else "false")
    assert flavour.vendor.decode_node(NodeFacts("node-a", annotations=annotations)) == devices
    assert {d.mode for d in devices} == {"hami-core" if core_mode else "vnpu"}


def test_310p_chips_have_seven_slots_and_no_network_id() -> None:
    chips, flavour = backend(P310)
    devices = to_devices(chips.discover(), flavour)
    assert flavour.chip.common_word == "Ascend310P"
    assert {(d.count, d.memory_mib, d.cores, d.custom_info) for d in devices} == {(7, 21527, 8, ())}
    core, core_flavour = backend(P310, hami_vnpu_core=True, vdevice_count=16)
    assert {(d.count, d.cores) for d in to_devices(core.discover(), core_flavour)} == {(16, 100)}


def test_the_handshake_is_reported_one_second_ahead_in_the_plugins_format() -> None:
    chips, flavour = backend(B3)
    value = node_annotations(chips.discover(), flavour, now=NOW)[
        "hami.io/node-handshake-Ascend910B3"
    ]
    assert HANDSHAKE.match(value)
    assert value == "Reported_2026.08.21 10:00:01"
    # The scheduler then asks for a refresh.
    assert check_health(value, NOW, allocatable=0) == (True, True)


def test_a_chip_table_file_picks_the_chip_and_its_core_mode(tmp_path: Path) -> None:
    table = tmp_path / "device-config.yaml"
    table.write_text(
        "vnpus:\n"
        "  hamiVnpuCore: true\n"
        "  configs:\n"
        "  - {commonWord: Ascend910B, chipName: 910B3, resourceName: huawei.com/Ascend910B,\n"
        "     resourceMemoryName: huawei.com/Ascend910B-memory, memoryAllocatable: 65536,\n"
        "     aiCore: 20, templates: [{name: vir05_1c_16g, memory: 16384, aiCore: 5}]}\n"
    )
    flavour = resolve_flavour(source(B3).scan(), AscendSettings(config_file=table))
    assert (flavour.chip.common_word, flavour.count, flavour.core_mode) == ("Ascend910B", 4, True)
    assert flavour.resource_name == "huawei.com/Ascend910B"
    assert flavour.socket_name == "Ascend910B.sock"
    with pytest.raises(DiscoveryError, match="chip '310P3' is not in the Ascend chip table"):
        resolve_flavour(source(P310).scan(), AscendSettings(config_file=table))
    table.write_text("vnpus: [{commonWord: 'bad word'}]\n")
    with pytest.raises(DiscoveryError, match=r"chip table .* is invalid: vnpus\[0\]\.commonWord"):
        resolve_flavour(source(B3).scan(), AscendSettings(config_file=table))


def test_the_reporter_writes_every_round(
    kube_api: FakeApiServer, gateway: KubernetesGateway, node: str
) -> None:
    chips, flavour = backend(B3)
    times = iter([NOW, datetime(2026, 8, 21, 10, 0, 30)])
    reporter = AscendNodeReporter(gateway, node=NODE, flavour=flavour, now=lambda: next(times))
    state = DeviceState(chips.discover())
    assert reporter.report(state.snapshot())
    first = dict(kube_api.get_node(NODE)["metadata"]["annotations"])
    assert first["hami.io/node-handshake-Ascend910B3"] == "Reported_2026.08.21 10:00:01"
    assert first["hami-vnpu-core"] == "false"
    # The scheduler answers; the next round (nothing else changed) reports again.
    kube_api.cluster.patch(
        "nodes",
        "",
        NODE,
        {"metadata": {"annotations": {"hami.io/node-handshake-Ascend910B3": "Requesting_x"}}},
    )
    assert reporter.report(state.snapshot())
    second = kube_api.get_node(NODE)["metadata"]["annotations"]
    assert second["hami.io/node-handshake-Ascend910B3"] == "Reported_2026.08.21 10:00:31"
    assert second["hami.io/node-register-Ascend910B3"] == first["hami.io/node-register-Ascend910B3"]
    assert reporter.patches == 2 and reporter.last_success is not None
