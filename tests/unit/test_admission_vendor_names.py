"""The webhook writes what the vendor says it admits with (``Vendor.admission``), not
NVIDIA's settings read by attribute name."""

from __future__ import annotations

import dataclasses
from typing import Any

from vgpu_extender.services import admission
from vgpu_extender.vendors import AdmissionNames, create_vendor
from vgpu_extender.vendors.nvidia import NvidiaConfig, NvidiaVendor


class _OtherDefaults(NvidiaVendor):
    """NVIDIA's resources, with other admission defaults."""

    @property
    def admission(self) -> AdmissionNames:
        return dataclasses.replace(
            super().admission, exclusive_cores="200", priority_env="OTHER_PRIORITY"
        )


def _pod() -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/priority": "1"}
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]},
    }


def _patch(vendor: Any) -> list[dict[str, Any]]:
    decision = admission.decide(_pod(), vendor=vendor, scheduler_name="vgpu-scheduler")
    assert decision.allowed, decision.message
    return list(decision.patch)


CORES = "/spec/containers/0/resources/limits/nvidia.com~1gpucores"
ENV = "/spec/containers/0/env"


def _written(patch: list[dict[str, Any]]) -> tuple[object, object]:
    by_path = {op["path"]: op["value"] for op in patch}
    return by_path.get(CORES), by_path.get(ENV)


def test_nvidia_admits_with_hamis_defaults() -> None:
    cores, env = _written(_patch(create_vendor("nvidia")))
    assert cores == "100"
    assert env == [{"name": "CUDA_TASK_PRIORITY", "value": "1"}]


def test_a_vendor_gives_its_own_defaults() -> None:
    cores, env = _written(_patch(_OtherDefaults(NvidiaConfig())))
    assert cores == "200"
    assert env == [{"name": "OTHER_PRIORITY", "value": "1"}]


def test_a_name_the_vendor_does_not_manage_plays_no_role() -> None:
    names = admission.ResourceNames.of(create_vendor("nvidia"))
    assert names.cores == "nvidia.com/gpucores" and names.priority_env == "CUDA_TASK_PRIORITY"

    class Unmanaged(NvidiaVendor):
        @property
        def admission(self) -> AdmissionNames:
            return dataclasses.replace(super().admission, cores="example.com/not-ours")

    assert admission.ResourceNames.of(Unmanaged(NvidiaConfig())).cores is None
