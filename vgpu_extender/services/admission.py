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
  100``, an exclusive GPU; ``nvidia.com/priority`` becomes ``CUDA_TASK_PRIORITY``;
- apply each vendor's own admission (``Vendor.admit``, HAMi's ``MutateAdmission``),
  container by container: Ascend rounds memory to a template in limits and requests,
  pairs 910C NPUs, sets the runtime class, and refuses what HAMi refuses, with HAMi's
  message as the whole refusal (clients match it). A vendor may add pod annotations
  (MetaX sGPU's default QoS policy, Moore Threads' GPU count): one the pod already has
  is kept. The pod is read for the size check as the admission leaves it.

Pods that ask for no managed resource get only what a vendor adds to every container
(Ascend's ``ASCEND_VISIBLE_DEVICES=""`` of an ``overwriteEnv`` chip, so a pod that asks
for no NPU sees none); they, and (privileged check aside) pods labelled or annotated
``hami.io/webhook: ignore``, are otherwise left untouched.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from vgpu_extender.domain import ContainerRequest, RequestError
from vgpu_extender.domain.text import without_format_verbs
from vgpu_extender.services.largest import Largest
from vgpu_extender.vendors import Vendor, VendorSet
from vgpu_extender.vendors.base import ContainerAdmission

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
    ignored = next((key for key in ("labels", "annotations") if _ignored(metadata, key)), None)
    current = spec.get("schedulerName") or ""
    foreign = current not in REPLACEABLE_SCHEDULERS and current != scheduler_name
    if not any(_asks(c, managed) for _path, c in containers):
        if ignored is not None or foreign:
            return Decision(True, "asks for no managed resource")
        try:
            admitted = _admissions(containers, vendors, pod)
        except RequestError:
            admitted = []  # a refusal needs an ask; none here
        env_only = [[ContainerAdmission(env=a.env) for a in found if a.env] for found in admitted]
        return Decision(
            True, "asks for no managed resource", tuple(_vendor_ops(containers, env_only))
        )
    privileged = _privileged(spec)
    if privileged is not None:
        return privileged
    if ignored is not None:
        return Decision(True, f"{ignored[:-1]} {IGNORE_KEY}={IGNORE_VALUE}: left alone")
    if foreign:
        return Decision(True, f"scheduled by {current!r}: left alone")
    node = spec.get("nodeName")
    if node:
        return Decision(
            False,
            f"spec.nodeName is already set ({node!r}): the pod would skip the scheduler, "
            "so its GPU share would never be allocated; leave nodeName empty",
        )
    try:
        admissions = _admissions(containers, vendors, pod)
    except RequestError as exc:
        return Decision(False, str(exc))
    as_admitted = _admitted_pod(pod, containers, admissions)
    admitted_containers = list(_containers(_mapping(as_admitted.get("spec"))))
    try:
        request = vendors.parse_pod(as_admitted)
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
    defaults = [
        _defaults(container, [(ask, names_of(ask)) for ask in parsed.asks])
        for (_path, container), parsed in zip(admitted_containers, request.containers, strict=False)
    ]
    while len(defaults) < len(containers):
        defaults.append(ContainerAdmission())
    changes = [[*found, default] for found, default in zip(admissions, defaults, strict=True)]
    patch.extend(_vendor_ops(containers, changes))
    runtime_class = next(
        (a.runtime_class_name for found in admissions for a in found if a.runtime_class_name),
        "",
    )
    if runtime_class and not spec.get("runtimeClassName"):
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": runtime_class})
    patch.extend(_annotation_ops(pod, _pod_annotations(pod, admissions)))
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


def _ignored(metadata: Mapping[str, Any], key: str) -> bool:
    return _mapping(metadata.get(key)).get(IGNORE_KEY) == IGNORE_VALUE


def _admissions(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    vendors: VendorSet,
    pod: Mapping[str, Any],
) -> list[list[ContainerAdmission]]:
    """Every vendor's admission of each container (what it changes), in order; raises
    the first vendor's ``RequestError``."""
    found: list[list[ContainerAdmission]] = []
    for _path, container in containers:
        changes: list[ContainerAdmission] = []
        for member in vendors.members:
            admitted = member.admit(container, pod)
            if admitted is not None:
                changes.append(admitted)
        if any(a.uses for a in changes):
            # What a vendor gives a container that does not use it (Ascend's "no NPU"
            # env) must not hide the devices of a vendor the container does use.
            changes = [a if a.uses else replace(a, env=()) for a in changes]
        found.append(changes)
    return found


def _admitted_pod(
    pod: Mapping[str, Any],
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    admissions: Sequence[Sequence[ContainerAdmission]],
) -> Mapping[str, Any]:
    """The pod as the vendors' admissions leave its resources and annotations (a copy;
    ``pod`` itself when nothing changes), for reading its request."""
    added = _pod_annotations(pod, admissions)
    if not added and not any(a.limits or a.requests for found in admissions for a in found):
        return pod
    result: dict[str, Any] = copy.deepcopy(dict(pod))
    if added:
        metadata = result.get("metadata")
        if not isinstance(metadata, dict):
            metadata = result["metadata"] = {}
        if not isinstance(metadata.get("annotations"), dict):
            metadata["annotations"] = {}
        metadata["annotations"].update(added)
    spec = result["spec"]
    for (path, _container), found in zip(containers, admissions, strict=True):
        _, _, kind, position = path.split("/")
        container = spec[kind][int(position)]
        if not isinstance(container, dict):
            continue
        resources = container.get("resources")
        if not isinstance(resources, dict):
            resources = container["resources"] = {}
        for key, attr in (("limits", "limits"), ("requests", "requests")):
            values = {k: v for a in found for k, v in getattr(a, attr).items()}
            if not values:
                continue
            if not isinstance(resources.get(key), dict):
                resources[key] = {}
            resources[key].update(values)
    return result


def _defaults(
    container: Mapping[str, Any],
    asks: Sequence[tuple[ContainerRequest, ResourceNames]],
) -> ContainerAdmission:
    """HAMi's defaults for one container, for each of its asks (one per vendor) with
    that vendor's names: the limits and environment to add."""
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
    return ContainerAdmission(limits=add, env=tuple(env.items()))


def _vendor_ops(
    containers: Sequence[tuple[str, Mapping[str, Any]]],
    changes: Sequence[Sequence[ContainerAdmission]],
) -> list[dict[str, Any]]:
    """JSON Patch operations for every container's changes, merged: one operation per
    key, and a missing parent (``resources``, ``limits``, ``env``) created once with
    everything that goes in it."""
    ops: list[dict[str, Any]] = []
    for (path, container), found in zip(containers, changes, strict=True):
        limits = {k: v for a in found for k, v in a.limits.items()}
        requests = {k: v for a in found for k, v in a.requests.items()}
        ops.extend(_resource_ops(path, container, limits, requests))
        env: dict[str, str] = {}
        for admitted in found:
            for name, value in admitted.env:
                env.setdefault(name, value)
        ops.extend(_env_ops(path, container, env))
    return ops


def _resource_ops(
    path: str,
    container: Mapping[str, Any],
    limits: Mapping[str, str],
    requests: Mapping[str, str],
) -> list[dict[str, Any]]:
    wanted = {key: dict(values) for key, values in (("limits", limits), ("requests", requests))}
    wanted = {key: values for key, values in wanted.items() if values}
    if not wanted:
        return []
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return [{"op": "add", "path": f"{path}/resources", "value": wanted}]
    ops: list[dict[str, Any]] = []
    for key, values in wanted.items():
        if not isinstance(resources.get(key), Mapping):
            ops.append({"op": "add", "path": f"{path}/resources/{key}", "value": values})
            continue
        ops.extend(
            {"op": "add", "path": f"{path}/resources/{key}/{_escape(name)}", "value": value}
            for name, value in values.items()
        )
    return ops


def _env_ops(
    path: str, container: Mapping[str, Any], env: Mapping[str, str]
) -> list[dict[str, Any]]:
    current = container.get("env")
    if not isinstance(current, Sequence) or isinstance(current, str):
        if not env:
            return []
        return [
            {
                "op": "add",
                "path": f"{path}/env",
                "value": [{"name": name, "value": value} for name, value in env.items()],
            }
        ]
    present = {e.get("name") for e in current if isinstance(e, Mapping)}
    return [
        {"op": "add", "path": f"{path}/env/-", "value": {"name": name, "value": value}}
        for name, value in env.items()
        if name not in present
    ]


def _pod_annotations(
    pod: Mapping[str, Any], admissions: Sequence[Sequence[ContainerAdmission]]
) -> dict[str, str]:
    """The pod annotations every vendor's admission writes, container by container (of
    two naming one key the later wins, as HAMi's webhook walks them): a default only
    where the pod has no value of its own, a set value wherever the pod's differs."""
    present = _mapping(_mapping(pod.get("metadata")).get("annotations"))
    wanted: dict[str, str] = {}
    for found in admissions:
        for admitted in found:
            for key, value in admitted.pod_annotations.items():
                if key not in present:
                    wanted[key] = value
            for key, value in admitted.pod_annotations_set.items():
                if present.get(key) != value:
                    wanted[key] = value
    return wanted


def _annotation_ops(pod: Mapping[str, Any], added: Mapping[str, str]) -> list[dict[str, Any]]:
    """JSON Patch operations writing ``added`` (``add`` replaces a member the object
    has, RFC 6902); a missing ``metadata.annotations`` is created once with all of
    them."""
    if not added:
        return []
    metadata = pod.get("metadata")
    if not isinstance(metadata, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": added}}]
    if not isinstance(metadata.get("annotations"), Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": added}]
    return [
        {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
        for key, value in added.items()
    ]


def _escape(key: str) -> str:
    """A JSON Pointer token (RFC 6901): ``~`` and ``/`` escaped."""
    return key.replace("~", "~0").replace("/", "~1")
