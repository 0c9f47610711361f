"""Response and request models of the admin API, so the OpenAPI schema documents them.

The read models of ``services.admin`` are dataclasses with computed properties; the
models here read them by attribute (``from_attributes``). Memory is in MiB, cores in
percent of one GPU (100 is a whole GPU), ratios between 0 and 1. The scheduler verbs
do not use these: they keep their msgspec wire types.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vgpu_extender.api.nesting import Shallow
from vgpu_extender.services.admin import NodeReport
from vgpu_extender.services.admin_actions import NODE_NAME_LIMIT, WhatIf
from vgpu_extender.services.allocation_queries import AllocationRow, AllocationState
from vgpu_extender.services.events import reason_of


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class ErrorOut(BaseModel):
    detail: str = Field(description="What was wrong, naming the field or object and value.")


# --------------------------------------------------------------------------- nodes
class PodShareOut(_Out):
    uid: str
    namespace: str
    name: str
    state: Literal["reserved", "bound"]
    memory_mib: int
    cores: int
    containers: list[int] = Field(description="Indices of the pod's containers on this GPU.")
    label: str = Field(
        default="", description="The vendor's name for the share (an Ascend vNPU template)."
    )


class DeviceOut(_Out):
    uuid: str
    index: int
    vendor: str = Field(description="The vendor word: NVIDIA, or an Ascend chip (Ascend910B3).")
    type: str
    numa: int
    mode: str
    healthy: bool
    cordoned: bool = Field(description="Takes no new pod (hami.io/device-cordon).")
    memory_mib: int
    memory_used_mib: int
    memory_free_mib: int
    cores: int
    cores_used: int
    cores_free: int
    slots: int = Field(description="Allocations the GPU may hold (split count).")
    slots_used: int
    slots_free: int
    fragment_mib: int = Field(description="Free memory a pod asking for a whole GPU cannot use.")
    pods: list[PodShareOut]


class NodeOut(_Out):
    name: str
    labels: dict[str, str]
    problem: str = Field(description="Why the node takes no new pod; empty when it can.")
    gpus: int
    healthy_gpus: int
    cordoned_gpus: int
    memory_mib: int
    memory_used_mib: int
    memory_free_mib: int
    cores: int
    cores_used: int
    cores_free: int
    allocations: int = Field(description="Pods holding a GPU of this node.")
    fragmentation: float = Field(
        description="Share of the free memory of healthy, uncordoned GPUs that sits on GPUs "
        "already shared or full, so a pod asking for a whole GPU cannot use it (0..1)."
    )
    devices: list[DeviceOut] | None = Field(
        default=None, description="Per GPU, with the pods on it (one node, or ?devices=true)."
    )

    @classmethod
    def of(cls, report: NodeReport, *, devices: bool) -> NodeOut:
        out = cls.model_validate(report)
        if not devices:
            out.devices = None
        return out


class SummaryOut(_Out):
    nodes: int
    nodes_with_problems: int
    gpus: int
    unhealthy_gpus: int
    cordoned_gpus: int
    memory_mib: int
    memory_used_mib: int
    memory_free_mib: int
    memory_utilisation: float
    cores: int
    cores_used: int
    cores_utilisation: float
    slots: int
    slots_used: int
    pods: int = Field(description="Pods holding GPUs.")
    pending_reservations: int = Field(description="Pods reserved at bind, not bound yet.")
    fragmentation: float
    conflicts: int = Field(
        description="Running pods whose allocation could not be imported without "
        "over-committing a GPU (GET /api/v1/conflicts); their GPUs take no new pod."
    )


# --------------------------------------------------------------------------- conflicts
class PodRefOut(_Out):
    uid: str
    namespace: str
    name: str


class ConflictOut(_Out):
    pod: PodRefOut = Field(description="The running pod whose allocation is not recorded.")
    node: str
    devices: list[str] = Field(description="GPU UUIDs it does not fit on; they take no new pod.")
    held_by: list[PodRefOut] = Field(
        description="The pods the store gives those GPUs to (empty: the pod alone exceeds one)."
    )
    reason: str = Field(description="The first misfit's reason code, e.g. insufficient gpumem.")
    message: str
    since: datetime = Field(description="When it was first found.")
    seen: datetime = Field(description="When it was last found again (reconcile, pod watch).")


# --------------------------------------------------------------------------- allocations
class AllocationOut(BaseModel):
    pod_uid: str
    namespace: str
    pod: str
    node: str
    device_uuid: str
    container_index: int
    init: bool
    memory_mib: int
    cores: int
    state: Literal["reserved", "bound"]
    created_at: datetime
    bound_at: datetime | None

    @classmethod
    def of(cls, row: AllocationRow) -> AllocationOut:
        return cls.model_validate(
            {
                "pod_uid": row.pod_uid,
                "namespace": row.namespace,
                "pod": row.pod_name,
                "node": row.node,
                "device_uuid": row.device_uuid,
                "container_index": row.container_index,
                "init": row.init,
                "memory_mib": row.memory_mib,
                "cores": row.cores,
                "state": row.state.value,
                "created_at": row.created_at,
                "bound_at": row.bound_at,
            }
        )


class AllocationPageOut(BaseModel):
    items: list[AllocationOut]
    total: int = Field(description="Matches in all pages.")
    offset: int
    limit: int


class GrantOut(_Out):
    uuid: str
    memory_mib: int
    cores: int


class ContainerOut(BaseModel):
    index: int
    init: bool
    devices: list[GrantOut]


class PodOut(BaseModel):
    uid: str
    namespace: str
    name: str
    node: str
    state: Literal["reserved", "bound"] = Field(description="bound once every row is bound.")
    containers: list[ContainerOut]

    @classmethod
    def of(cls, rows: list[AllocationRow]) -> PodOut:
        """One pod from its allocation rows (at least one)."""
        containers: dict[int, ContainerOut] = {}
        for row in rows:
            container = containers.setdefault(
                row.container_index,
                ContainerOut(index=row.container_index, init=row.init, devices=[]),
            )
            container.devices.append(
                GrantOut(uuid=row.device_uuid, memory_mib=row.memory_mib, cores=row.cores)
            )
        bound = all(row.state is AllocationState.BOUND for row in rows)
        first = rows[0]
        return cls(
            uid=first.pod_uid,
            namespace=first.namespace,
            name=first.pod_name,
            node=first.node,
            state="bound" if bound else "reserved",
            containers=[containers[i] for i in sorted(containers)],
        )


# --------------------------------------------------------------------------- what-if
class WhatIfIn(BaseModel):
    pod: Annotated[dict[str, Any], Shallow] = Field(
        description="A Pod object, as `kubectl get pod -o json` shows it."
    )
    nodes: list[str] | None = Field(
        default=None, description="Candidate nodes; all registered nodes when absent."
    )
    detail: int = Field(
        default=10, ge=0, le=100, description="For how many of the best nodes to choose devices."
    )


class PlacementOut(BaseModel):
    node: str
    score: int = Field(ge=0, le=10, description="The prioritize score, 0..10.")
    containers: list[list[GrantOut]] | None = Field(
        description="Devices per container (init containers first); null beyond `detail`."
    )


class RejectionOut(BaseModel):
    reason: str
    message: str
    unresolvable: bool = Field(description="Preempting pods on the node could not help.")


class WhatIfOut(BaseModel):
    managed: bool = Field(description="Whether the pod asks for a managed resource at all.")
    feasible: list[PlacementOut] = Field(description="Best first.")
    rejected: dict[str, RejectionOut]

    @classmethod
    def of(cls, result: WhatIf) -> WhatIfOut:
        return cls(
            managed=result.managed,
            feasible=[
                PlacementOut(
                    node=p.node,
                    score=p.score,
                    containers=None
                    if p.containers is None
                    else [[GrantOut.model_validate(g) for g in grants] for grants in p.containers],
                )
                for p in result.fits
            ],
            rejected={
                node: RejectionOut(
                    reason=reason_of(r.message(result.wording), result.wording),
                    message=r.message(result.wording),
                    unresolvable=r.unresolvable,
                )
                for node, r in sorted(result.rejected.items())
            },
        )


# --------------------------------------------------------------------------- changes
class InventoryNodeIn(BaseModel):
    name: str = Field(max_length=NODE_NAME_LIMIT)
    labels: dict[str, str] = Field(default_factory=dict)
    devices: Annotated[list[dict[str, Any]], Shallow] = Field(
        description="Devices as in the hami.io/node-nvidia-register annotation (JSON form)."
    )


class InventoryIn(BaseModel):
    """The ``--inventory`` file's document."""

    nodes: list[InventoryNodeIn]


class InventoryChangeOut(BaseModel):
    registered: list[str]
    removed: list[str] = Field(description="Nodes left out of the document, now forgotten.")


class CordonOut(BaseModel):
    node: str
    device: str
    cordoned: list[str] = Field(description="Every cordoned GPU of the node after the change.")


# --------------------------------------------------------------------------- health
class HealthOut(BaseModel):
    status: Literal["ok"]


class CheckOut(BaseModel):
    ok: bool
    detail: str


class ReadyOut(BaseModel):
    ready: bool
    checks: dict[str, CheckOut]


# --------------------------------------------------------------------------- gpushare
class GpusharePodOut(BaseModel):
    name: str
    namespace: str
    usedGPU: int  # noqa: N815 - gpushare's JSON field names


class GpushareDeviceOut(BaseModel):
    id: int
    uuid: str
    totalGPU: int  # noqa: N815
    usedGPU: int  # noqa: N815
    pods: list[GpusharePodOut]


class GpushareNodeOut(BaseModel):
    name: str
    totalGPU: int  # noqa: N815
    usedGPU: int  # noqa: N815
    devs: list[GpushareDeviceOut]

    @classmethod
    def of(cls, report: NodeReport) -> GpushareNodeOut:
        return cls(
            name=report.name,
            totalGPU=report.memory_mib,
            usedGPU=report.memory_used_mib,
            devs=[
                GpushareDeviceOut(
                    id=d.index,
                    uuid=d.uuid,
                    totalGPU=d.memory_mib,
                    usedGPU=d.memory_used_mib,
                    pods=[
                        GpusharePodOut(name=p.name, namespace=p.namespace, usedGPU=p.memory_mib)
                        for p in d.pods
                    ],
                )
                for d in report.devices
            ],
        )


class GpushareInspectOut(BaseModel):
    """gpushare-scheduler-extender's inspect answer; amounts in MiB of GPU memory."""

    nodes: list[GpushareNodeOut]
    error: str | None = None


# --------------------------------------------------------------------------- webhook
class AdmissionRequestIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    uid: str = Field(min_length=1)
    operation: str = "CREATE"
    namespace: str | None = None
    object: Annotated[dict[str, Any], Shallow] | None = None


class AdmissionReviewIn(BaseModel):
    model_config = ConfigDict(extra="allow")

    apiVersion: Literal["admission.k8s.io/v1", "admission.k8s.io/v1beta1"]  # noqa: N815
    kind: Literal["AdmissionReview"]
    request: AdmissionRequestIn


class AdmissionStatusOut(BaseModel):
    code: int
    reason: str
    message: str


class AdmissionResponseOut(BaseModel):
    uid: str
    allowed: bool
    patchType: Literal["JSONPatch"] | None = None  # noqa: N815
    patch: str | None = Field(default=None, description="Base64 of a JSON Patch.")
    status: AdmissionStatusOut | None = None


class AdmissionReviewOut(BaseModel):
    apiVersion: str  # noqa: N815
    kind: Literal["AdmissionReview"]
    response: AdmissionResponseOut
