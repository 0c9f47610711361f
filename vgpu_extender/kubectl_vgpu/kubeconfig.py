"""Where the API server is and who we are to it, read from the kubeconfig as kubectl does.

The common cases (a token, a token file, client certificates, basic auth, with the CA
inline or in a file) are read with PyYAML directly: the ``kubernetes`` client's loader
costs about 0.3 s to import, more than the whole command should take. Users whose
credentials come from an ``exec`` plugin or an ``auth-provider`` (EKS, GKE, OIDC) get
that loader, imported only then. Files are found like kubectl finds them:
``--kubeconfig``, else every file of ``$KUBECONFIG`` (the first one to name a cluster,
user or context wins), else ``~/.kube/config``; with none, the Pod's service account.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vgpu_extender.kubectl_vgpu.errors import USAGE, PluginError

_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class ApiServer:
    """How to reach the API server: its URL, the headers that authenticate us, TLS."""

    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    verify: ssl.SSLContext | bool = True


@dataclass(frozen=True)
class _Named:
    """A cluster, user or context entry, and the directory relative paths start from."""

    body: dict[str, Any]
    base: Path


@dataclass
class _Merged:
    current: str | None = None
    clusters: dict[str, _Named] = field(default_factory=dict)
    users: dict[str, _Named] = field(default_factory=dict)
    contexts: dict[str, _Named] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def config_files(explicit: str | None) -> list[Path]:
    """The kubeconfig files to read, in kubectl's order (those that exist)."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise PluginError(f"kubeconfig {explicit} does not exist", USAGE)
        return [path]
    listed = os.environ.get("KUBECONFIG", "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        return [p for p in paths if p.is_file()]
    home = Path("~/.kube/config").expanduser()
    return [home] if home.is_file() else []


def load(explicit: str | None = None, context: str | None = None) -> ApiServer:
    """The API server of ``context`` (default: the current context)."""
    files = config_files(explicit)
    if not files:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and _SERVICE_ACCOUNT.is_dir():
            return _in_cluster()
        raise PluginError(
            "no kubeconfig found (--kubeconfig, $KUBECONFIG or ~/.kube/config); "
            "or give the extender's URL with --server",
            USAGE,
        )
    merged = _merge(files)
    name = context or merged.current
    if not name:
        raise PluginError("the kubeconfig sets no current-context; choose one with --context")
    if name not in merged.contexts:
        raise PluginError(f"context {name!r} is not in the kubeconfig")
    entry = merged.contexts[name].body
    cluster = merged.clusters.get(str(entry.get("cluster", "")))
    if cluster is None:
        raise PluginError(f"context {name!r} names cluster {entry.get('cluster')!r}, not defined")
    user = merged.users.get(str(entry.get("user", "")), _Named({}, cluster.base))
    if "exec" in user.body or "auth-provider" in user.body:
        return _with_kubernetes_loader(explicit, name)
    return _build(name, cluster, user)


def _merge(files: list[Path]) -> _Merged:
    import yaml  # only on the proxy path

    merged = _Merged(files=files)
    for path in files:
        try:
            document = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PluginError(f"kubeconfig {path} cannot be read: {_first_line(exc)}") from None
        if not isinstance(document, dict):
            raise PluginError(f"kubeconfig {path} is not a mapping")
        if merged.current is None and document.get("current-context"):
            merged.current = str(document["current-context"])
        for key, into, inner in (
            ("clusters", merged.clusters, "cluster"),
            ("users", merged.users, "user"),
            ("contexts", merged.contexts, "context"),
        ):
            for item in document.get(key) or []:
                if isinstance(item, dict) and "name" in item:
                    body = item.get(inner) or {}
                    into.setdefault(str(item["name"]), _Named(dict(body), path.parent))
    return merged


def _build(context: str, cluster: _Named, user: _Named) -> ApiServer:
    server = str(cluster.body.get("server", "")).rstrip("/")
    if not server:
        raise PluginError(f"the cluster of context {context!r} has no server URL")
    headers: dict[str, str] = {}
    body = user.body
    token = body.get("token")
    if not token and body.get("tokenFile"):
        token = _read(_path(body["tokenFile"], user.base), "tokenFile").strip()
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif body.get("username") is not None:
        pair = f"{body['username']}:{body.get('password', '')}".encode()
        headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
    if not server.startswith("https://"):
        return ApiServer(server, headers, True)
    return ApiServer(server, headers, _tls(cluster, user))


def insecure(verify: ssl.SSLContext | bool) -> ssl.SSLContext | bool:
    """``verify`` with the server's certificate no longer checked, the client
    certificate (if any) kept: ``--insecure-skip-tls-verify`` must not log a user out."""
    if not isinstance(verify, ssl.SSLContext):
        return False
    verify.check_hostname = False
    verify.verify_mode = ssl.CERT_NONE
    return verify


def _tls(cluster: _Named, user: _Named) -> ssl.SSLContext | bool:
    if cluster.body.get("insecure-skip-tls-verify"):
        context = insecure(ssl.create_default_context())
        assert isinstance(context, ssl.SSLContext)
    elif cluster.body.get("certificate-authority-data"):
        pem = _decode(cluster.body["certificate-authority-data"], "certificate-authority-data")
        context = ssl.create_default_context(cadata=pem.decode())
    elif cluster.body.get("certificate-authority"):
        ca = _path(cluster.body["certificate-authority"], cluster.base)
        try:
            context = ssl.create_default_context(cafile=str(ca))
        except (OSError, ssl.SSLError) as exc:
            raise PluginError(f"certificate-authority {ca}: {_first_line(exc)}") from None
    else:
        context = ssl.create_default_context()
    _client_certificate(context, user)
    return context


def _client_certificate(context: ssl.SSLContext, user: _Named) -> None:
    body = user.body
    cert: bytes | Path | None = None
    key: bytes | Path | None = None
    if body.get("client-certificate-data"):
        cert = _decode(body["client-certificate-data"], "client-certificate-data")
    elif body.get("client-certificate"):
        cert = _path(body["client-certificate"], user.base)
    if body.get("client-key-data"):
        key = _decode(body["client-key-data"], "client-key-data")
    elif body.get("client-key"):
        key = _path(body["client-key"], user.base)
    if cert is None:
        return
    # ``load_cert_chain`` reads files only: inline data goes through a private temporary
    # directory, removed as soon as the context holds the key.
    with tempfile.TemporaryDirectory(prefix="kubectl-vgpu-") as scratch:
        cert_file = _as_file(cert, Path(scratch) / "client.crt")
        key_file = None if key is None else _as_file(key, Path(scratch) / "client.key")
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise PluginError(f"the client certificate cannot be loaded: {exc}") from None


def _as_file(value: bytes | Path, where: Path) -> str:
    if isinstance(value, Path):
        return str(value)
    where.touch(mode=0o600)
    where.write_bytes(value)
    return str(where)


def _in_cluster() -> ApiServer:
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    host = f"[{host}]" if ":" in host else host
    token = _read(_SERVICE_ACCOUNT / "token", "service account token").strip()
    try:
        context = ssl.create_default_context(cafile=str(_SERVICE_ACCOUNT / "ca.crt"))
    except (OSError, ssl.SSLError) as exc:
        raise PluginError(f"the service account's CA: {_first_line(exc)}") from None
    return ApiServer(f"https://{host}:{port}", {"Authorization": f"Bearer {token}"}, context)


def _with_kubernetes_loader(explicit: str | None, context: str) -> ApiServer:
    """exec plugins and auth providers: the ``kubernetes`` client knows them all."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=explicit,
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:  # the loader raises many kinds; all mean the same here
        raise PluginError(f"kubeconfig context {context!r}: {_first_line(exc)}") from None
    headers = {}
    authorization = configuration.api_key.get("authorization")
    if authorization:
        headers["Authorization"] = str(authorization)
    verify: ssl.SSLContext | bool = True
    url = str(configuration.host).rstrip("/")
    if url.startswith("https://"):
        try:
            tls = ssl.create_default_context(
                cafile=(configuration.ssl_ca_cert or None) if configuration.verify_ssl else None
            )
            if configuration.cert_file:
                tls.load_cert_chain(configuration.cert_file, configuration.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise PluginError(f"kubeconfig context {context!r}: {_first_line(exc)}") from None
        verify = tls if configuration.verify_ssl else insecure(tls)
    return ApiServer(url, headers, verify)


def _path(value: object, base: Path) -> Path:
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else base / path


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise PluginError(f"{what} {path} cannot be read: {exc.strerror}") from None


def _decode(value: object, what: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise PluginError(f"the kubeconfig's {what} is not base64") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
