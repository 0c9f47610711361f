"""The node agent's codecs come through the vendor seam and agree with the extender's."""

from __future__ import annotations

import pytest

from device_plugins import vendor as seam
from vgpu_extender.domain import DeviceGrant
from vgpu_extender.vendors.nvidia import allocation_codec
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

GRANTS = (
    (DeviceGrant(uuid="GPU-a", memory_mib=1024, cores=30, vendor=""),),  # gets the word
    (),
    (DeviceGrant(uuid="GPU-b", memory_mib=2048, cores=0, vendor="NVIDIA"),),
)


def test_the_bind_phase_is_the_one_the_extender_writes() -> None:
    assert seam.BIND_PHASE_ALLOCATING == allocation_codec.BIND_PHASE_ALLOCATING


@pytest.mark.parametrize("word", ["NVIDIA", "ACME"])
def test_the_remaining_containers_are_encoded_as_the_extender_encodes_them(word: str) -> None:
    vendor = seam.nvidia(NvidiaConfig(vendor_word=word))
    encoded = seam.encode_containers(vendor, GRANTS, node="node-1")
    assert encoded == allocation_codec.encode_containers(GRANTS, vendor=word)
    assert encoded.startswith(f"GPU-a,{word},1024,30:;;")


def test_the_assignment_decodes_back() -> None:
    vendor = seam.nvidia()
    value = seam.encode_containers(vendor, GRANTS, node="node-1")
    decoded = vendor.decode_assignment(value, init=(True, False, False))
    assert [[grant.uuid for grant in container] for container in decoded] == [
        ["GPU-a"],
        [],
        ["GPU-b"],
    ]
