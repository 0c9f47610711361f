"""The bind's publisher port, both ways: over the Kubernetes API, and without one.

``KubePublisher`` reads the pod a bind names (when filter has not seen it) and posts
its Binding, HAMi's annotations riding on it. ``StandalonePublisher`` publishes
nothing: without Kubernetes the committed rows, written bound, are the whole bind,
and the pod must have been seen at filter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vgpu_extender import store
from vgpu_extender.domain import PodRequest, RequestError
from vgpu_extender.kube import KubeClient, KubeError, KubeObject
from vgpu_extender.kube import objects as kobj
from vgpu_extender.services.bind_ports import BindError, BindRequest
from vgpu_extender.services.cluster import ClusterState


class KubePublisher:
    """``BindPublisher`` over the API server; ``parse`` is the vendor's pod parser."""

    claims_on_arrival = True
    bound_at_commit = False

    def __init__(self, kube: KubeClient, parse: Callable[[KubeObject], PodRequest]) -> None:
        self._kube = kube
        self._parse = parse

    def pod_request(self, args: BindRequest, cached: PodRequest | None) -> PodRequest:
        if cached is not None:
            # Seen at filter moments ago, by UID. A pod bound meanwhile (a retried bind
            # after a timeout) is caught by the store, which refuses a second allocation
            # for the UID, and by the API server's 409 on the Binding: no read needed.
            return cached
        try:
            pod = self._kube.get_pod(args.namespace, args.pod_name)
        except KubeError as exc:
            raise BindError(f"bind {args.key}: cannot read the pod: {exc}") from None
        if pod is None:
            raise BindError(f"bind {args.key}: pod not found")
        if kobj.uid(pod) != args.uid:
            raise BindError(
                f"bind {args.key}: pod has UID {kobj.uid(pod)}, not {args.uid} "
                "(deleted and created again)"
            )
        bound_to = kobj.node_name(pod)
        if bound_to:
            raise BindError(f"bind {args.key}: pod is already bound to node {bound_to}")
        try:
            return self._parse(pod)
        except RequestError as exc:
            raise BindError(f"bind {args.key}: {exc}") from None

    def prepare(self, args: BindRequest) -> None:
        """Nothing: nodes come from the API server, and the store has them already."""

    def post_binding(self, args: BindRequest, annotations: Mapping[str, str] | None) -> None:
        if annotations is None:
            self._kube.bind_pod(args.namespace, args.pod_name, args.uid, args.node)
            return
        # The annotations ride on the Binding: the pod gets them with its node.
        self._kube.bind_pod(
            args.namespace, args.pod_name, args.uid, args.node, annotations=annotations
        )

    def read_pod(self, args: BindRequest) -> KubeObject | None:
        return self._kube.get_pod(args.namespace, args.pod_name)

    def annotate(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        self._kube.patch_pod_annotations(args.namespace, args.pod_name, annotations)


class StandalonePublisher:
    """``BindPublisher`` without Kubernetes: nothing is published; the pod is the one
    filter saw, and a bind writes its node's row first (a request may have registered
    the node moments ago: ``persist_node``)."""

    claims_on_arrival = False
    bound_at_commit = True

    def __init__(
        self, cluster: ClusterState, *, persist_node: Callable[[str], None] = lambda _node: None
    ) -> None:
        self._cluster = cluster
        self._persist_node = persist_node

    def pod_request(self, args: BindRequest, cached: PodRequest | None) -> PodRequest:
        with self._cluster.lock:
            held = self._cluster.index.allocation(args.uid)
        if held is not None:  # standalone binds are final: the pod is bound
            raise BindError(
                f"bind {args.key}: pod {args.uid} already has bound allocations on node "
                f"{held.assignment.node}"
            )
        if cached is None:
            raise BindError(
                f"bind {args.key}: pod UID {args.uid} was not seen at filter (or too long "
                "ago) and there is no Kubernetes API to read it from"
            )
        return cached

    def prepare(self, args: BindRequest) -> None:
        try:
            self._persist_node(args.node)
        except store.StoreError as exc:
            raise BindError(
                f"bind {args.key}: node {args.node} not yet in the store: {exc}"
            ) from None

    def post_binding(self, args: BindRequest, annotations: Mapping[str, str] | None) -> None:
        """Nothing to publish: the rows committed bound are the bind."""

    def read_pod(self, args: BindRequest) -> KubeObject | None:
        # Never asked: nothing posted, so no outcome is ever unknown.
        raise KubeError("there is no Kubernetes API to read the pod from")

    def annotate(self, args: BindRequest, annotations: Mapping[str, str]) -> None:
        """Nothing to annotate."""
