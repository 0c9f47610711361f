"""The agent's own, narrow access to the Kubernetes API.

A device plugin runs on every node with little RBAC (get/patch its node, list and
patch pods on its node), so it does not share the extender's client. Objects come
back as plain decoded JSON; :mod:`device_plugins.pods` reads the few fields used.
Patches are JSON merge patches, where ``None`` deletes an annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

KubeObject = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"


class KubeAccessError(RuntimeError):
    """A Kubernetes call failed; ``status`` is the HTTP status when an answer came."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubeGateway(Protocol):
    """What the agent needs from the API server, and nothing more."""

    def get_node(self, name: str) -> KubeObject | None: ...

    def patch_node_annotations(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        """Merge-patch; with ``resource_version`` the server refuses (409) a stale write."""
        ...

    def pods_on_node(self, node: str) -> list[KubeObject]: ...

    def get_pod(self, namespace: str, name: str) -> KubeObject | None: ...

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> KubeObject: ...


def _annotation_patch(
    annotations: Mapping[str, str | None], resource_version: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"annotations": dict(annotations)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"metadata": metadata}


class KubernetesGateway:
    """:class:`KubeGateway` over the official client, without model parsing."""

    def __init__(self, api_client: client.ApiClient, *, timeout_s: float = 10.0) -> None:
        self._core = client.CoreV1Api(api_client)
        self._timeout = timeout_s

    @classmethod
    def from_config(cls, kubeconfig: Path | None = None) -> KubernetesGateway:
        """In-cluster credentials when running in a pod, else the kubeconfig file."""
        configuration = client.Configuration()
        try:
            if kubeconfig is None:
                try:
                    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                except config.ConfigException:
                    config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    config_file=str(kubeconfig), client_configuration=configuration
                )
        except (config.ConfigException, OSError) as exc:
            where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster or default kubeconfig"
            raise KubeAccessError(f"cannot load Kubernetes credentials ({where}): {exc}") from exc
        return cls(client.ApiClient(configuration))

    def _call(self, what: str, method: Any, *args: Any, **kwargs: Any) -> KubeObject | None:
        """Call an API method raw; ``None`` on 404, ``KubeAccessError`` otherwise."""
        try:
            response = method(
                *args, _preload_content=False, _request_timeout=self._timeout, **kwargs
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeAccessError(
                f"{what}: HTTP {exc.status} {exc.body or exc.reason}", status=exc.status
            ) from exc
        except Exception as exc:  # urllib3 connection errors and the like
            raise KubeAccessError(f"{what}: {exc}") from exc
        body = json.loads(response.data)
        if not isinstance(body, dict):
            raise KubeAccessError(f"{what}: the API server answered {body!r}, not an object")
        return body

    def _must(self, what: str, result: KubeObject | None) -> KubeObject:
        if result is None:
            raise KubeAccessError(f"{what}: not found", status=404)
        return result

    def get_node(self, name: str) -> KubeObject | None:
        return self._call(f"get node {name}", self._core.read_node, name)

    def patch_node_annotations(
        self,
        name: str,
        annotations: Mapping[str, str | None],
        *,
        resource_version: str | None = None,
    ) -> KubeObject:
        what = f"patch node {name}"
        return self._must(
            what,
            self._call(
                what,
                self._core.patch_node,
                name,
                _annotation_patch(annotations, resource_version),
                _content_type=MERGE_PATCH,
            ),
        )

    def pods_on_node(self, node: str) -> list[KubeObject]:
        what = f"list pods on node {node}"
        body = self._must(
            what,
            self._call(
                what, self._core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}"
            ),
        )
        items = body.get("items") or []
        if not isinstance(items, list):
            raise KubeAccessError(f"{what}: 'items' is {items!r}, not a list")
        return [item for item in items if isinstance(item, dict)]

    def get_pod(self, namespace: str, name: str) -> KubeObject | None:
        return self._call(
            f"get pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace
        )

    def patch_pod_annotations(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> KubeObject:
        what = f"patch pod {namespace}/{name}"
        return self._must(
            what,
            self._call(
                what,
                self._core.patch_namespaced_pod,
                name,
                namespace,
                _annotation_patch(annotations),
                _content_type=MERGE_PATCH,
            ),
        )
