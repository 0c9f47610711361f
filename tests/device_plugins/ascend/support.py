"""The recorded npu-smi outputs, a runner that answers with them, and bound Ascend pods."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from device_plugins.ascend.agent import AscendAgent, build_agent
from device_plugins.ascend.discovery import AscendBackend, NpuSmiSource
from device_plugins.ascend.flavour import AscendFlavour, resolve_flavour
from device_plugins.ascend.settings import AscendSettings
from device_plugins.discovery.base import DiscoveryError
from device_plugins.kube import KubeGateway
from device_plugins.settings import DevicePluginSettings
from tests.device_plugins.conftest import NODE
from tests.device_plugins.pods_factory import set_lock
from tests.support.apiserver import FakeApiServer
from vgpu_extender.domain import DeviceGrant, PodAssignment
from vgpu_extender.vendors.ascend.allocation_codec import (
    HAMI_CORE,
    VNPU_MODE_ANNOTATION,
    runtime_annotation,
    runtime_info,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "npu-smi"
B3 = "910b3"
P310 = "310p"


def fixture(node_kind: str, command: str) -> str:
    """``command`` is ``info`` or ``info-m``."""
    return (FIXTURES / f"{node_kind}-{command}.txt").read_text()


class RecordedNpuSmi:
    """Answers ``npu-smi info`` and ``npu-smi info -m`` from the recorded files."""

    def __init__(self, node_kind: str) -> None:
        self.node_kind = node_kind
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str]) -> str:
        self.calls.append(list(args))
        if list(args[1:]) == ["info"]:
            return fixture(self.node_kind, "info")
        if list(args[1:]) == ["info", "-m"]:
            return fixture(self.node_kind, "info-m")
        raise DiscoveryError(f"unexpected npu-smi call {args}")


def source(node_kind: str, node: str = NODE) -> NpuSmiSource:
    return NpuSmiSource(node, run=RecordedNpuSmi(node_kind))


def backend(node_kind: str, **ascend: Any) -> tuple[AscendBackend, AscendFlavour]:
    src = source(node_kind)
    flavour = resolve_flavour(src.scan(), AscendSettings(**ascend))
    return AscendBackend(src, flavour.chip), flavour


def b3_agent(settings: DevicePluginSettings, gateway: KubeGateway, tmp_path: Path) -> AscendAgent:
    """The agent of a recorded 910B3 node, its HAMi-core folders under ``tmp_path``."""
    chips, flavour = backend(B3)
    ascend = AscendSettings(core_dir=tmp_path / "core", shared_region=tmp_path / "shared")
    return build_agent(settings, ascend, gateway=gateway, backend=chips, flavour=flavour)


def uuid(physical_id: int, node: str = NODE) -> str:
    return f"{node}-npu-{physical_id}"


def bound_pod(
    api: FakeApiServer,
    flavour: AscendFlavour,
    name: str,
    containers: Sequence[Sequence[DeviceGrant]],
    *,
    hami_core: bool = False,
    lock: bool = True,
    bind_time: int = 1_700_000_000,
) -> dict[str, Any]:
    """A Pending pod with the extender's Ascend bind annotations (and the node lock)."""
    word = flavour.chip.common_word
    grants = tuple(
        tuple(DeviceGrant(g.uuid, g.memory_mib, g.cores, vendor=word) for g in c)
        for c in containers
    )
    assignment = PodAssignment(node=NODE, containers=grants, init=(False,) * len(grants))
    annotations = flavour.vendor.bind_annotations(assignment, bind_time=bind_time)
    if hami_core:
        annotations[VNPU_MODE_ANNOTATION] = HAMI_CORE
        annotations[runtime_annotation(flavour.chip)] = runtime_info(
            grants, flavour.chip, hami_core=True
        )
    pod = api.add_pod(
        {
            "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
            "spec": {
                "nodeName": NODE,
                "containers": [{"name": f"c{i}"} for i in range(len(grants))],
            },
            "status": {"phase": "Pending"},
        }
    )
    if lock:
        set_lock(api, f"2026-08-01T06:00:00Z,ml,{name}")
    return pod
