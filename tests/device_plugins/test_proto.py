"""The committed gRPC modules match the proto, and the proto matches kubelet's wire API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from device_plugins.api.generate import GENERATED, PROTO, generate, source_root
from device_plugins.kubelet_api import pb

_VERSION_LINES = re.compile(
    r"^(# Protobuf Python Version: .*|GRPC_GENERATED_VERSION = .*|\s+\d+,)$", re.MULTILINE
)


def test_regenerating_gives_the_committed_files(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools (a test dependency) is not installed")
    fresh = generate(tmp_path)
    committed_dir = source_root() / PROTO.parent
    for path in fresh:
        committed = (committed_dir / path.name).read_text()
        regenerated = path.read_text()
        if committed != regenerated:
            # Another grpcio-tools release stamps other version numbers; nothing else may differ.
            assert _VERSION_LINES.sub("", committed) == _VERSION_LINES.sub("", regenerated), (
                f"{path.name} is stale: run `python -m device_plugins.api.generate`"
            )
    assert sorted(p.name for p in fresh) == sorted(GENERATED)


def test_services_and_method_paths() -> None:
    file = pb.DESCRIPTOR
    assert file.package == "v1beta1"
    methods = {
        f"/{service.full_name}/{method.name}": (
            method.input_type.name,
            method.output_type.name,
            method.server_streaming,
        )
        for service in file.services_by_name.values()
        for method in service.methods
    }
    assert methods == {
        "/v1beta1.Registration/Register": ("RegisterRequest", "Empty", False),
        "/v1beta1.DevicePlugin/GetDevicePluginOptions": ("Empty", "DevicePluginOptions", False),
        "/v1beta1.DevicePlugin/ListAndWatch": ("Empty", "ListAndWatchResponse", True),
        "/v1beta1.DevicePlugin/GetPreferredAllocation": (
            "PreferredAllocationRequest",
            "PreferredAllocationResponse",
            False,
        ),
        "/v1beta1.DevicePlugin/Allocate": ("AllocateRequest", "AllocateResponse", False),
        "/v1beta1.DevicePlugin/PreStartContainer": (
            "PreStartContainerRequest",
            "PreStartContainerResponse",
            False,
        ),
    }


# Every message, field name and number of kubelet's v1beta1 API (device-plugin.md §1).
WIRE = {
    "DevicePluginOptions": {"pre_start_required": 1, "get_preferred_allocation_available": 2},
    "RegisterRequest": {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4},
    "ListAndWatchResponse": {"devices": 1},
    "Device": {"ID": 1, "health": 2, "topology": 3},
    "TopologyInfo": {"nodes": 1},
    "NUMANode": {"ID": 1},
    "PreferredAllocationRequest": {"container_requests": 1},
    "ContainerPreferredAllocationRequest": {
        "available_deviceIDs": 1,
        "must_include_deviceIDs": 2,
        "allocation_size": 3,
    },
    "PreferredAllocationResponse": {"container_responses": 1},
    "ContainerPreferredAllocationResponse": {"deviceIDs": 1},
    "AllocateRequest": {"container_requests": 1},
    "ContainerAllocateRequest": {"devices_ids": 1},
    "AllocateResponse": {"container_responses": 1},
    "ContainerAllocateResponse": {
        "envs": 1,
        "mounts": 2,
        "devices": 3,
        "annotations": 4,
        "cdi_devices": 5,
    },
    "Mount": {"container_path": 1, "host_path": 2, "read_only": 3},
    "DeviceSpec": {"container_path": 1, "host_path": 2, "permissions": 3},
    "CDIDevice": {"name": 1},
    "PreStartContainerRequest": {"devices_ids": 1},
    "PreStartContainerResponse": {},
    "Empty": {},
}


@pytest.mark.parametrize("message", sorted(WIRE))
def test_message_fields_and_numbers(message: str) -> None:
    descriptor = pb.DESCRIPTOR.message_types_by_name[message]
    assert {f.name: f.number for f in descriptor.fields} == WIRE[message]


def test_bytes_on_the_wire() -> None:
    # Field 1 (ID), length 5, "GPU-0"; field 2 (health), length 7, "Healthy".
    device = pb.Device(ID="GPU-0", health="Healthy")
    assert device.SerializeToString() == b"\n\x05GPU-0\x12\x07Healthy"
