"""kube-scheduler's extender wire types, decoded once with msgspec, encoded the way Go reads.

Go's ``encoding/json`` matches keys case-insensitively (an exact match preferred), so a
body may say ``nodenames`` for ``NodeNames``. kube-scheduler itself always sends the
exact Go field names with every field present, so the fast path decodes straight into
structs with those names; a body that lacks one of them is decoded again through a
key-folding path. Pods stay plain dicts; Node objects stay raw bytes, echoed unchanged,
with only their name, labels, annotations and resourceVersion read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from vgpu_extender.api.repeats import FeasibleLayouts, NameLists, ScoreLayouts
from vgpu_extender.domain.text import without_format_verbs
from vgpu_extender.services.binding import BindRequest
from vgpu_extender.services.inventory import NodeRef, NodeView
from vgpu_extender.services.preemption import NodeVictims, PreemptOutcome, Victim
from vgpu_extender.services.scheduling import FilterOutcome, Priorities

Raw = msgspec.Raw
_UNSET = msgspec.UNSET


class WireError(ValueError):
    """A body kube-scheduler would never send: the message names the field and value."""


# ---------------------------------------------------------------------------- structs
class _Meta(msgspec.Struct, rename={"resource_version": "resourceVersion"}, gc=False):
    name: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    resource_version: str = ""


class _Status(msgspec.Struct, gc=False):
    # Quantities are strings from an API server; anything else is read as its text,
    # so one odd Node never fails a whole request.
    capacity: dict[str, Any] | None = None
    allocatable: dict[str, Any] | None = None


class _NodeHead(msgspec.Struct, gc=False):
    metadata: _Meta | None = None
    status: _Status | None = None


class _MetaName(msgspec.Struct, rename={"resource_version": "resourceVersion"}, gc=False):
    name: str = ""
    resource_version: str = ""


class _NodeName(msgspec.Struct, gc=False):
    metadata: _MetaName | None = None


class _NodeList(msgspec.Struct, gc=False):
    items: list[Raw] | None = None


class _ArgsExact(msgspec.Struct, gc=False):
    Pod: dict[str, Any] | msgspec.UnsetType | None = _UNSET
    Nodes: _NodeList | msgspec.UnsetType | None = _UNSET
    NodeNames: Raw | msgspec.UnsetType = _UNSET  # decoded through _NAME_LISTS


_ARGS_EXACT = msgspec.json.Decoder(_ArgsExact)
_TOP = msgspec.json.Decoder(dict[str, Raw])
_NODE_HEAD = msgspec.json.Decoder(_NodeHead)
_NODE_NAME = msgspec.json.Decoder(_NodeName)
_NODE_LIST = msgspec.json.Decoder(_NodeList | None)
_NAMES = msgspec.json.Decoder(list[str])
_ANY = msgspec.json.Decoder()
_ENCODER = msgspec.json.Encoder()
_NAME_LISTS = NameLists()
_SCORE_LAYOUTS = ScoreLayouts()
_FEASIBLE_LAYOUTS = FeasibleLayouts()
_NULL = b"null"


# ---------------------------------------------------------------------------- decoding
@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """The filter/prioritize body: the pod, and its candidates by name or as objects.

    ``raw_nodes`` are the Node objects as received (``nodeCacheCapable: false``), in the
    same order as ``nodes``; ``names`` lists the candidate names in either mode (a tuple
    shared by every request that sent the same list, see ``repeats``), and
    ``names_json`` is the ``NodeNames`` array as received, when there was one.
    """

    pod: dict[str, Any]
    names: Sequence[str]
    nodes: list[NodeRef] | None = None
    raw_nodes: list[Raw] | None = None
    names_json: bytes | None = None

    @property
    def cache_mode(self) -> bool:
        return self.nodes is None


def _fail(exc: Exception, what: str) -> WireError:
    if isinstance(exc, msgspec.ValidationError):
        return WireError(f"{what}: {exc}")
    return WireError(f"{what}: malformed JSON: {exc}")


def fold(keys: Mapping[str, Any], name: str) -> Any:
    """``keys[name]`` as Go finds it: the exact key, else one equal under case folding."""
    if name in keys:
        return keys[name]
    lowered = name.lower()
    for key, value in keys.items():
        if key.lower() == lowered:
            return value
    return None


def _object(body: bytes, what: str) -> dict[str, Raw]:
    try:
        top = _TOP.decode(body)
    except msgspec.ValidationError:
        raise WireError(f"{what}: the body must be a JSON object") from None
    except msgspec.DecodeError as exc:
        raise WireError(f"{what}: malformed JSON: {exc}") from None
    return top


def _pod(raw: Any, what: str) -> dict[str, Any]:
    if raw is None:
        raise WireError(f"{what}: field Pod is missing or null")
    if not isinstance(raw, dict):
        raise WireError(f"{what}: field Pod must be a JSON object, got {_short(raw)}")
    return raw


def _views(items: Sequence[Raw], what: str) -> list[NodeRef]:
    """Name and resourceVersion of each Node object now; labels and annotations later,
    only for the nodes whose version changed (see ``NodeRef``)."""
    views: list[NodeRef] = []
    for position, item in enumerate(items):
        try:
            head = _NODE_NAME.decode(item)
        except msgspec.DecodeError as exc:
            raise _fail(exc, f"{what}: Nodes.items[{position}]") from None
        meta = head.metadata
        if meta is None or not meta.name:
            raise WireError(f"{what}: Nodes.items[{position}].metadata.name is missing")
        views.append(
            NodeRef(
                meta.name,
                meta.resource_version,
                functools.partial(_load_view, item, position, what),
            )
        )
    return views


def _load_view(item: Raw, position: int, what: str) -> NodeView:
    """The inventory-bearing fields of one Node object (called by the service only when
    the object changed); a field of the wrong type is a ``WireError`` naming it."""
    try:
        head = _NODE_HEAD.decode(item)
        meta = head.metadata
    except msgspec.DecodeError as exc:
        raise _fail(exc, f"{what}: Nodes.items[{position}]") from None
    assert meta is not None  # the name was read before
    status = head.status
    return NodeView(
        name=meta.name,
        labels=meta.labels or {},
        annotations=meta.annotations or {},
        resource_version=meta.resource_version,
        allocatable=_quantities(status.allocatable if status is not None else None),
        capacity=_quantities(status.capacity if status is not None else None),
    )


def _quantities(values: dict[str, Any] | None) -> dict[str, str] | None:
    return None if values is None else {key: str(value) for key, value in values.items()}


def _names(raw: Raw | None, what: str) -> tuple[bytes, tuple[str, ...]] | None:
    """The NodeNames array's bytes and names; None for an absent or null field."""
    if raw is None:
        return None
    data = bytes(raw)
    if data == _NULL:
        return None
    try:
        return data, _NAME_LISTS.names(data, _NAMES.decode)
    except msgspec.DecodeError as exc:
        raise _fail(exc, f"{what}: field NodeNames") from None


def _args(
    pod: Any, nodes: _NodeList | None, names: tuple[bytes, tuple[str, ...]] | None, what: str
) -> ExtenderArgs:
    checked = _pod(pod, what)
    if names is not None:
        data, listed = names
        return ExtenderArgs(checked, listed, names_json=data)
    if nodes is None:
        return ExtenderArgs(checked, ())
    items = nodes.items or []
    views = _views(items, what)
    return ExtenderArgs(checked, [v.name for v in views], views, list(items))


def decode_args(body: bytes, *, what: str = "filter") -> ExtenderArgs:
    """ExtenderArgs; raises ``WireError`` naming the field for anything malformed."""
    try:
        exact = _ARGS_EXACT.decode(body)
    except msgspec.DecodeError as exc:
        if isinstance(exc, msgspec.ValidationError) and not body.lstrip().startswith(b"{"):
            raise WireError(f"{what}: the body must be a JSON object") from None
        if isinstance(exc, msgspec.ValidationError):
            # Perhaps a key in another case carries the right type; fold and retry.
            return _decode_args_folded(body, what)
        raise _fail(exc, what) from None
    if _UNSET in (exact.Pod, exact.Nodes, exact.NodeNames):
        return _decode_args_folded(body, what)
    assert not isinstance(exact.Nodes, msgspec.UnsetType)
    assert not isinstance(exact.NodeNames, msgspec.UnsetType)
    return _args(exact.Pod, exact.Nodes, _names(exact.NodeNames, what), what)


def _decode_args_folded(body: bytes, what: str) -> ExtenderArgs:
    top = _object(body, what)
    pod_raw, nodes_raw, names_raw = (fold(top, k) for k in ("Pod", "Nodes", "NodeNames"))
    try:
        pod = _ANY.decode(pod_raw) if pod_raw is not None else None
    except msgspec.DecodeError as exc:
        raise _fail(exc, f"{what}: field Pod") from None
    names = _names(names_raw, what)
    try:
        nodes = _NODE_LIST.decode(nodes_raw) if nodes_raw is not None else None
    except msgspec.DecodeError as exc:
        raise _fail(exc, f"{what}: field Nodes") from None
    return _args(pod, nodes, names, what)


def _string_field(top: Mapping[str, Raw], name: str, what: str) -> str:
    raw = fold(top, name)
    if raw is None:
        return ""
    try:
        value = _ANY.decode(raw)
    except msgspec.DecodeError as exc:
        raise _fail(exc, f"{what}: field {name}") from None
    if value is None:
        return ""  # Go leaves the zero value for null
    if not isinstance(value, str):
        raise WireError(f"{what}: field {name} must be a string, got {_short(value)}")
    return value


def decode_bind(body: bytes) -> BindRequest:
    """ExtenderBindingArgs. Missing fields read as empty, as in Go; the service names them."""
    top = _object(body, "bind")
    return BindRequest(
        pod_name=_string_field(top, "PodName", "bind"),
        namespace=_string_field(top, "PodNamespace", "bind"),
        uid=_string_field(top, "PodUID", "bind"),
        node=_string_field(top, "Node", "bind"),
    )


@dataclass(frozen=True, slots=True)
class PreemptArgs:
    """The preemptor and the candidates; ``full_pods`` when the victims came as pod
    objects (``nodeCacheCapable: false``), so the answer names them so too."""

    pod: dict[str, Any]
    candidates: dict[str, NodeVictims]
    full_pods: bool = False


def _pdb(entry: Mapping[str, Any], where: str) -> int:
    value = fold(entry, "NumPDBViolations")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"preempt: {where}.NumPDBViolations must be an integer, got {value!r}")
    return value


def _victim(item: Any, where: str, *, full: bool) -> Victim:
    if not isinstance(item, Mapping):
        raise WireError(f"preempt: {where} must be a JSON object, got {_short(item)}")
    if not full:
        uid = fold(item, "UID")
        if not isinstance(uid, str) or not uid:
            raise WireError(f"preempt: {where}.UID must be a non-empty string, got {uid!r}")
        return Victim(uid)
    meta = item.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    if not isinstance(uid, str) or not uid:
        raise WireError(f"preempt: {where}.metadata.uid must be a non-empty string, got {uid!r}")
    spec = item.get("spec")
    priority = spec.get("priority") if isinstance(spec, Mapping) else None
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise WireError(f"preempt: {where}.spec.priority must be an integer, got {priority!r}")
    return Victim(uid, priority, item)


def _victim_map(value: Any, field: str, *, full: bool) -> dict[str, NodeVictims]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WireError(f"preempt: field {field} must be a JSON object, got {_short(value)}")
    out: dict[str, NodeVictims] = {}
    for node, entry in value.items():
        where = f"{field}[{node!r}]"
        if entry is None:
            out[node] = NodeVictims(())
            continue
        if not isinstance(entry, Mapping):
            raise WireError(f"preempt: {where} must be a JSON object, got {_short(entry)}")
        pods = fold(entry, "Pods") or []
        if not isinstance(pods, list):
            raise WireError(f"preempt: {where}.Pods must be an array, got {_short(pods)}")
        victims = tuple(
            _victim(item, f"{where}.Pods[{i}]", full=full) for i, item in enumerate(pods)
        )
        out[node] = NodeVictims(victims, _pdb(entry, where))
    return out


def decode_preempt(body: bytes) -> PreemptArgs:
    """ExtenderPreemptionArgs in either mode (full victim pods or UIDs)."""
    top = _object(body, "preempt")
    try:
        decoded = {key: _ANY.decode(raw) for key, raw in top.items()}
    except msgspec.DecodeError as exc:
        raise _fail(exc, "preempt") from None
    pod = _pod(fold(decoded, "Pod"), "preempt")
    meta = fold(decoded, "NodeNameToMetaVictims")
    candidates = _victim_map(meta, "NodeNameToMetaVictims", full=False)
    objects = fold(decoded, "NodeNameToVictims")
    full = _victim_map(objects, "NodeNameToVictims", full=True)
    for node, victims in full.items():
        candidates.setdefault(node, victims)
    return PreemptArgs(pod, candidates, full_pods=meta is None and objects is not None)


# ---------------------------------------------------------------------------- encoding
def encode_filter(args: ExtenderArgs | None, outcome: FilterOutcome) -> bytes:
    """ExtenderFilterResult in the request's mode (names, or the Node objects as received)."""
    result: dict[str, Any] = {"Nodes": None, "NodeNames": None}
    if args is not None and not args.cache_mode and args.raw_nodes is not None:
        keep = set(outcome.feasible)
        result["Nodes"] = {
            "metadata": {},
            "items": [
                raw for raw, name in zip(args.raw_nodes, args.names, strict=True) if name in keep
            ],
        }
    failed = _all_failed(outcome)
    if result["Nodes"] is None and not outcome.error:
        result["NodeNames"] = _feasible_names(args, outcome.feasible, failed)
    result["FailedNodes"] = failed
    result["FailedAndUnresolvableNodes"] = outcome.unresolvable
    result["Error"] = without_format_verbs(outcome.error)
    return _ENCODER.encode(result)


def _all_failed(outcome: FilterOutcome) -> dict[str, str]:
    """``FailedNodes`` lists the unresolvable nodes too: kube-scheduler 1.20 reads only
    this map (``FailedAndUnresolvableNodes`` came in 1.21, and gives its own entries
    precedence), so without them its message would name no reason for those nodes."""
    if not outcome.unresolvable:
        return outcome.failed
    if not outcome.failed:
        return outcome.unresolvable
    return {**outcome.failed, **outcome.unresolvable}


def _feasible_names(
    args: ExtenderArgs | None, feasible: list[str], failed: Mapping[str, str]
) -> list[str] | Raw:
    """Feasible names keep the input order, so when every candidate passed they are the
    array received, echoed as is rather than encoded again, and when a few failed, the
    candidates' array with those cut out (``repeats.FeasibleLayouts``)."""
    if args is None or args.names_json is None:
        return feasible
    if len(feasible) == len(args.names):
        return Raw(args.names_json)
    cut = _FEASIBLE_LAYOUTS.encode(args.names, feasible, failed.keys())
    return feasible if cut is None else Raw(cut)


class HostPriority(msgspec.Struct, gc=False):
    Host: str
    Score: int


def encode_priorities(priorities: Priorities) -> bytes:
    """HostPriorityList: integer scores (Go rejects ``5.0``), hosts scored 0 left out
    (kube-scheduler gives a host missing from the answer 0, the same)."""
    laid_out = _SCORE_LAYOUTS.encode(priorities.hosts, priorities.scores)
    if laid_out is not None:
        return laid_out
    scores = priorities.scores.tolist()
    return _ENCODER.encode(
        [
            HostPriority(host, score)
            for host, score in zip(priorities.hosts, scores, strict=False)
            if score
        ]
    )


def encode_bind(error: str) -> bytes:
    return _ENCODER.encode({"Error": without_format_verbs(error)})


def encode_preempt(outcome: PreemptOutcome, *, full_pods: bool = False) -> bytes:
    """ExtenderPreemptionResult: ``NodeNameToMetaVictims`` (UIDs), the only field Go
    reads, in both modes, never with a null entry or an empty node. With
    ``full_pods`` (victims received as objects, ``nodeCacheCapable: false``) the same
    victims also go as pod objects in ``NodeNameToVictims``, as the request had them
    (Go's decoder skips the key)."""
    nodes = {node: victims for node, victims in outcome.nodes.items() if victims.victims}
    result: dict[str, Any] = {
        "NodeNameToMetaVictims": {
            node: {
                "Pods": [{"UID": v.uid} for v in victims.victims],
                "NumPDBViolations": victims.num_pdb_violations,
            }
            for node, victims in nodes.items()
        }
    }
    if full_pods:
        result["NodeNameToVictims"] = {
            node: {
                "Pods": [v.pod if v.pod is not None else _bare_pod(v.uid) for v in victims.victims],
                "NumPDBViolations": victims.num_pdb_violations,
            }
            for node, victims in nodes.items()
        }
    if outcome.error:
        # Ignored by Go's decoder; there for people.
        result["Error"] = without_format_verbs(outcome.error)
    return _ENCODER.encode(result)


def _bare_pod(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid}}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
