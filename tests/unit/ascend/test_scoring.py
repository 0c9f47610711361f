"""The 910 network bonus: ten times, per container, the share of its NPUs on its
largest ring; 0 when an NPU has no NetworkID."""

from __future__ import annotations

import pytest

from vgpu_extender.domain import Device
from vgpu_extender.vendors.ascend.scoring import network_score


def _npu(uuid: str, network: int | None) -> Device:
    info = () if network is None else (("NetworkID", network),)
    return Device(uuid, custom_info=info)


@pytest.mark.parametrize(
    ("containers", "want"),
    [
        ([[_npu("a", 0), _npu("b", 0)]], 10.0),
        ([[_npu("a", 0), _npu("b", 1)]], 5.0),
        ([[_npu("a", 0), _npu("b", 1), _npu("c", 1), _npu("d", 1)]], 7.5),
        ([[_npu("a", 0)], [_npu("b", 1), _npu("c", 0)]], 15.0),
        ([[], [_npu("a", 1)]], 10.0),
        ([[_npu("a", 0), _npu("b", None)]], 0.0),
        ([[_npu("a", 0)], [_npu("b", None)]], 0.0),
        ([], 0.0),
    ],
)
def test_network_score(containers: list[list[Device]], want: float) -> None:
    assert network_score(containers) == pytest.approx(want)
