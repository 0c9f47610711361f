"""What each command asks the admin API and how its answer is shown."""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from vgpu_extender.kubectl_vgpu import render
from vgpu_extender.kubectl_vgpu.client import AdminClient, Endpoint
from vgpu_extender.kubectl_vgpu.errors import USAGE, PluginError


def run(args: argparse.Namespace) -> str:
    """The command's output, as text ready to print."""
    pod: dict[str, Any] | None = None
    if args.command == "whatif":  # a bad file is a usage error, before any connection
        if not 0 <= args.detail <= 100:
            raise PluginError(f"--detail must be within 0..100, got {args.detail}", USAGE)
        pod = read_pod(args.filename)
    with AdminClient(endpoint(args), timeout_s=args.request_timeout) as client:
        if args.command == "inspect":
            return inspect(client, args.node, args.output)
        if args.command == "top":
            return top(client, args.output, args.sort_by)
        assert pod is not None
        return whatif(client, pod, args.nodes, args.detail, args.output)


# --------------------------------------------------------------------------- where
def endpoint(args: argparse.Namespace) -> Endpoint:
    """``--server``, or the Service through the API server of the kubeconfig."""
    if args.server:
        if not args.server.startswith(("http://", "https://")):
            raise PluginError(f"--server must be an http:// or https:// URL: {args.server}", USAGE)
        return Endpoint.direct(args.server, token=args.token, verify=_verify(args))
    from vgpu_extender.kubectl_vgpu import kubeconfig

    apiserver = kubeconfig.load(args.kubeconfig, args.context)
    verify = (
        kubeconfig.insecure(apiserver.verify) if args.insecure_skip_tls_verify else apiserver.verify
    )
    return Endpoint.through_proxy(
        apiserver.url,
        namespace=args.namespace,
        service=args.service,
        port=str(args.service_port),
        scheme=args.service_scheme,
        headers=apiserver.headers,
        verify=verify,
        token=args.token,
    )


def _verify(args: argparse.Namespace) -> ssl.SSLContext | bool:
    if args.insecure_skip_tls_verify:
        return False
    if args.ca_file:
        try:
            return ssl.create_default_context(cafile=args.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise PluginError(f"--ca-file {args.ca_file}: {exc}", USAGE) from None
    return True


# --------------------------------------------------------------------------- commands
def inspect(client: AdminClient, node: str | None, output: str) -> str:
    if node is None:
        nodes = client.get("/nodes", {"devices": "true"})
        return render.nodes_table(nodes) if output == "table" else render.dump(nodes, output)
    one = client.get(f"/nodes/{quote(node, safe='')}", missing=f"node {node!r} is not registered")
    return render.node_detail(one) if output == "table" else render.dump(one, output)


def top(client: AdminClient, output: str, sort_by: str) -> str:
    nodes = render.by_free_memory(client.get("/nodes"))
    if sort_by == "fragmentation":
        nodes.sort(key=lambda n: (bool(n["problem"]), -n["fragmentation"], n["name"]))
    summary = client.get("/summary")
    if output == "table":
        return render.top_table(nodes, summary)
    return render.dump({"nodes": nodes, "summary": summary}, output)


def whatif(
    client: AdminClient,
    pod: dict[str, Any],
    nodes: list[str] | None,
    detail: int,
    output: str,
) -> str:
    body: dict[str, Any] = {"pod": pod, "detail": detail}
    if nodes:
        body["nodes"] = nodes
    result = client.post("/whatif", body)
    if output != "table":
        return render.dump(result, output)
    meta = pod.get("metadata") or {}
    name = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '(unnamed)'}"
    return render.whatif_text(name, result)


# --------------------------------------------------------------------------- input
def read_pod(filename: str) -> dict[str, Any]:
    """One Pod from a YAML or JSON file (``-``: stdin); a List of one Pod will do."""
    where = "stdin" if filename == "-" else filename
    try:
        text = sys.stdin.read() if filename == "-" else Path(filename).read_text()
    except OSError as exc:
        raise PluginError(f"cannot read {where}: {exc.strerror}", USAGE) from None
    except UnicodeDecodeError:
        raise PluginError(f"{where} is not text", USAGE) from None
    documents = _documents(text, where)
    pods: list[Any] = []
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == "List":
            pods.extend(document.get("items") or [])
        elif document is not None:
            pods.append(document)
    if len(pods) != 1:
        raise PluginError(f"{where} must hold one Pod, it holds {len(pods)} object(s)", USAGE)
    pod = pods[0]
    if not isinstance(pod, dict) or pod.get("kind", "Pod") != "Pod":
        kind = pod.get("kind") if isinstance(pod, dict) else type(pod).__name__
        raise PluginError(f"{where} holds a {kind}, not a Pod", USAGE)
    if not isinstance(pod.get("spec"), dict):
        raise PluginError(f"the Pod in {where} has no spec", USAGE)
    return pod


def _documents(text: str, where: str) -> list[Any]:
    if text.lstrip().startswith("{"):
        try:
            return [json.loads(text)]
        except ValueError:
            pass  # YAML in flow style, perhaps
    import yaml

    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid"
        raise PluginError(f"{where} is not valid YAML or JSON: {first}", USAGE) from None
