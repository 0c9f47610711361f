"""The mutating admission webhook's decision for one pod (AdmissionReview v1).

For a pod that asks for a managed resource (in any container, init containers too):

- deny any privileged container in it, whether or not that container asks for a GPU
  (an init container, a sidecar): a privileged container sees every GPU of the node,
  so no share of the pod holds and other tenants' GPUs are open to it. Nothing skips
  this check, ``hami.io/webhook: ignore`` included;
- deny what could never run as asked: ``spec.nodeName`` already set (the pod skips
  the scheduler, so no GPU share would ever be recorded), any request the
  extender cannot read (a percentage or cores over 100, a count of 0 with memory, a
  malformed quantity or policy annotation), and a container no node of the inventory
  could hold even empty (more devices than any node has, more memory or cores than
  any device has; a percentage of memory always fits), naming the largest there is.
  With no device known yet (no node registered), nothing is refused for size;
- set ``schedulerName`` to ours, unless the pod names some other scheduler;
- apply HAMi's defaults, so HAMi's device plugin and HAMi-core see what HAMi's own
  webhook would have written: a container that gives memory or cores but no count
  gets one GPU; one that gives a bare count (or 100 % of memory) gets ``gpucores:
  100``, an exclusive GPU; ``nvidia.com/priority`` becomes ``CUDA_TASK_PRIORITY``.

Pods that ask for no managed resource, and (privileged check aside) pods labelled or
annotated ``hami.io/webhook: ignore``, pass untouched.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu_extender.domain import ContainerRequest, RequestError
from vgpu_extender.domain.text import without_format_verbs
from vgpu_extender.services.largest import Largest
from vgpu_extender.vendors import Vendor, VendorSet

IGNORE_KEY = "hami.io/webhook"
IGNORE_VALUE = "ignore"
#: Schedulers whose pods the webhook takes over (HAMi's force-overwrite default).
REPLACEABLE_SCHEDULERS = frozenset({"", "default-scheduler"})
#: Init containers first: the order of ``PodRequest.containers``.
_KINDS = ("initContainers", "containers")
#: Every kind of container a pod can run; ephemeral ones (``kubectl debug``) are
#: added later through their own subresource, but a pod may arrive with them.
_ALL_KINDS = (*_KINDS, "ephemeralContainers")
_STATUS_REASONS = {400: "BadRequest", 403: "Forbidden"}


@dataclass(frozen=True, slots=True)
class ResourceNames:
    """The vendor's resource names the defaults are written with (None: not defaulted)."""

    managed: frozenset[str]
    count: str | None = None
    memory: str | None = None
    percent: str | None = None
    cores: str | None = None
    priority: str | None = None
    exclusive_cores: str = "100"
    priority_env: str | None = None

    @classmethod
    def of(cls, vendor: Vendor) -> ResourceNames:
        """What the vendor says it admits with (``Vendor.admission``); a name it does
        not manage is no role (the checks and ``schedulerName`` still apply)."""
        given = vendor.admission

        def name(value: str | None) -> str | None:
            return value if value in vendor.resource_names else None

        return cls(
            managed=vendor.resource_names,
            count=name(given.count),
            memory=name(given.memory),
            percent=name(given.memory_percent),
            cores=name(given.cores),
            priority=name(given.priority),
            exclusive_cores=given.exclusive_cores,
            priority_env=given.priority_env,
        )


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    message: str = ""
    patch: tuple[dict[str, Any], ...] = field(default=())


def decide(
    pod: object,
    *,
    vendor: Vendor | VendorSet,
    scheduler_name: str,
    operation: str = "CREATE",
    names: ResourceNames | None = None,
    largest: Largest | Callable[[], Largest | None] | None = None,
) -> Decision:
    """Allow, deny or mutate one pod; ``largest`` is what the inventory's biggest node
    and devices hold (None: unknown, no refusal for size), or how to find it: asked only
    for a pod that asks for devices (it reads the cluster under its lock). With several
    vendors, each ask is defaulted and named with its own vendor's resource names;
    ``names`` (tests) stands for every vendor's."""
    if operation != "CREATE":
        return Decision(True, f"operation {operation}: nothing to do")
    if not isinstance(pod, Mapping):
        return Decision(False, "request.object must be a Pod object")
    vendors = VendorSet.of(vendor)
    by_word = {member.name: names or ResourceNames.of(member) for member in vendors.members}
    primary = by_word[vendors.primary.name]
    managed = primary.managed if names is not None else vendors.resource_names

    def names_of(ask: ContainerRequest) -> ResourceNames:
        return by_word.get(ask.vendor, primary)

    metadata = _mapping(pod.get("metadata"))
    spec = _mapping(pod.get("spec"))
    containers = list(_containers(spec))
    if not any(_asks(c, managed) for _path, c in containers):
        return Decision(True, "asks for no managed resource")
    privileged = _privileged(spec)
    if privileged is not None:
        return privileged
    for key in ("labels", "annotations"):
        if _mapping(metadata.get(key)).get(IGNORE_KEY) == IGNORE_VALUE:
            return Decision(True, f"{key[:-1]} {IGNORE_KEY}={IGNORE_VALUE}: left alone")
    current = spec.get("schedulerName") or ""
    if current not in REPLACEABLE_SCHEDULERS and current != scheduler_name:
        return Decision(True, f"scheduled by {current!r}: left alone")
    node = spec.get("nodeName")
    if node:
        return Decision(
            False,
            f"spec.nodeName is already set ({node!r}): the pod would skip the scheduler, "
            "so its GPU share would never be allocated; leave nodeName empty",
        )
    try:
        request = vendors.parse_pod(pod)
    except RequestError as exc:
        return Decision(False, f"the pod can never be scheduled: {exc}")
    if callable(largest) and request.managed:
        largest = largest()
    if isinstance(largest, Largest):
        for parsed in request.device_containers:
            too_big = _too_big(parsed, largest, names_of(parsed))
            if too_big:
                return Decision(False, f"the pod can never be scheduled: {too_big}")
    patch: list[dict[str, Any]] = []
    if current != scheduler_name:
        patch.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler_name})
    for (path, container), parsed in zip(containers, request.containers, strict=False):
        patch.extend(_defaults(path, container, [(ask, names_of(ask)) for ask in parsed.asks]))
    return Decision(True, "", tuple(patch))


def response(uid: str, decision: Decision, *, api_version: str, code: int = 403) -> dict[str, Any]:
    """The AdmissionReview answer for ``decision``; ``code`` is a refusal's status
    (403: the pod is refused; 400: the review itself could not be read)."""
    answer: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if decision.patch:
        answer["patchType"] = "JSONPatch"
        answer["patch"] = base64.b64encode(json.dumps(list(decision.patch)).encode()).decode()
    if not decision.allowed:
        reason = _STATUS_REASONS.get(code, "Forbidden")
        answer["status"] = {"code": code, "reason": reason, "message": decision.message}
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": answer}


# --------------------------------------------------------------------------- internals
def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _privileged(spec: Mapping[str, Any]) -> Decision | None:
    """The refusal of a GPU pod with a privileged container of any kind, if it has one."""
    for path, container in _containers(spec, _ALL_KINDS):
        if _mapping(container.get("securityContext")).get("privileged") is True:
            return Decision(
                False,
                f"container {container.get('name')!r} ({path}) is privileged in a pod that "
                "asks for a GPU: a privileged container sees every GPU of the node, so the "
                "pod's share cannot be enforced and other pods' GPUs are open to it; drop "
                "securityContext.privileged (hami.io/webhook: ignore does not skip this)",
            )
    return None


def _too_big(container: ContainerRequest, largest: Largest, names: ResourceNames) -> str:
    """Why no node could hold ``container`` even empty ("" when one could).

    The text has no ``%`` (node names and device types come from the nodes)."""
    if not container.wants_devices:
        return ""
    devices, memory, cores = largest.devices, largest.memory_mib, largest.cores
    problem = ""
    if container.count > devices.value:
        problem = (
            f"{names.count or 'device count'}: {container.count} exceeds the most devices "
            f"any node has ({devices.value}, node {devices.node})"
        )
    elif container.memory_mib > memory.value:
        problem = (
            f"{names.memory or 'device memory'}: {container.memory_mib} exceeds the largest "
            f"device ({memory.value} MiB, {memory.type} on node {memory.node})"
        )
    elif container.cores > cores.value:
        problem = (
            f"{names.cores or 'device cores'}: {container.cores} exceeds the most cores of "
            f"any device ({cores.value}, {cores.type} on node {cores.node})"
        )
    return without_format_verbs(f"container {container.name!r}: {problem}") if problem else ""


def _containers(
    spec: Mapping[str, Any], kinds: Sequence[str] = _KINDS
) -> list[tuple[str, Mapping[str, Any]]]:
    """(JSON pointer, container) for every container of ``kinds``, init containers
    first: the order of ``PodRequest.containers``."""
    found: list[tuple[str, Mapping[str, Any]]] = []
    for kind in kinds:
        items = spec.get(kind)
        if isinstance(items, Sequence) and not isinstance(items, str):
            found.extend(
                (f"/spec/{kind}/{i}", c if isinstance(c, Mapping) else {})
                for i, c in enumerate(items)
            )
    return found


def _resources(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    resources = _mapping(container.get("resources"))
    return _mapping(resources.get("limits")), _mapping(resources.get("requests"))


def _asks(container: Mapping[str, Any], managed: frozenset[str]) -> bool:
    limits, requests = _resources(container)
    return any(name in limits or name in requests for name in managed)


def _given(container: Mapping[str, Any], name: str | None) -> bool:
    if name is None:
        return False
    limits, requests = _resources(container)
    return name in limits or name in requests


def _defaults(
    path: str,
    container: Mapping[str, Any],
    asks: Sequence[tuple[ContainerRequest, ResourceNames]],
) -> list[dict[str, Any]]:
    """JSON Patch operations writing HAMi's defaults into one container, for each of its
    asks (one per vendor) with that vendor's names."""
    add: dict[str, str] = {}
    env: dict[str, str] = {}
    for parsed, names in asks:
        if parsed.count > 0:
            if names.count is not None and not _given(container, names.count):
                add[names.count] = str(parsed.count)
            exclusive = parsed.exclusive and not _given(container, names.cores)
            if names.cores is not None and exclusive:
                add[names.cores] = names.exclusive_cores
        if parsed.priority is not None and names.priority is not None and names.priority_env:
            env.setdefault(names.priority_env, str(parsed.priority))
    ops = _add_limits(path, container, add)
    for name, value in env.items():
        ops.extend(_add_env(path, container, name, value))
    return ops


def _add_limits(
    path: str, container: Mapping[str, Any], add: Mapping[str, str]
) -> list[dict[str, Any]]:
    if not add:
        return []
    if not isinstance(container.get("resources"), Mapping):
        return [{"op": "add", "path": f"{path}/resources", "value": {"limits": dict(add)}}]
    if not isinstance(container["resources"].get("limits"), Mapping):
        return [{"op": "add", "path": f"{path}/resources/limits", "value": dict(add)}]
    return [
        {"op": "add", "path": f"{path}/resources/limits/{_escape(name)}", "value": value}
        for name, value in add.items()
    ]


def _add_env(
    path: str, container: Mapping[str, Any], name: str, value: str
) -> list[dict[str, Any]]:
    env = container.get("env")
    entry = {"name": name, "value": value}
    if not isinstance(env, Sequence) or isinstance(env, str):
        return [{"op": "add", "path": f"{path}/env", "value": [entry]}]
    if any(isinstance(e, Mapping) and e.get("name") == name for e in env):
        return []
    return [{"op": "add", "path": f"{path}/env/-", "value": entry}]


def _escape(key: str) -> str:
    """A JSON Pointer token (RFC 6901): ``~`` and ``/`` escaped."""
    return key.replace("~", "~0").replace("/", "~1")
