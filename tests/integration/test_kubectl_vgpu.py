"""``kubectl-vgpu``, the installed console script, against a real extender on 127.0.0.1:
directly (``--server``, plain and TLS, with and without the admin token) and through an
API server's service proxy.

The project's fake API server has no service proxy, so the proxy here is a small one of
this module's own: it authenticates the kubeconfig's bearer token, answers a Kubernetes
``Status`` for what it refuses, and forwards
``/api/v1/namespaces/{ns}/services/{scheme}:{name}:{port}/proxy/{path}`` to the extender
without the ``Authorization`` header, as kube-apiserver does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.server import (
    RunningExtender,
    free_port,
    place,
    pod_json,
    spawn_tls_demo,
    standalone_settings,
    start_extender,
)
from tests.support.tls import self_signed

TOKEN = "kubectl-Admin-T0ken"
KUBE_TOKEN = "kube-user-t0ken"
BIG = pod_json("big", namespace="ml", mem=30000)


def _script() -> str:
    beside = Path(sys.executable).parent / "kubectl-vgpu"
    found = str(beside) if beside.is_file() else shutil.which("kubectl-vgpu")
    if found is None:
        pytest.skip("the kubectl-vgpu console script is not installed (pip install -e .)")
    return found


@dataclass
class Result:
    code: int
    out: str
    err: str


def kubectl_vgpu(*argv: str, env: dict[str, str] | None = None, stdin: str = "") -> Result:
    """Run the console script as kubectl would; no token or kubeconfig unless given."""
    full_env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("VGPU_ADMIN_TOKEN", "KUBECONFIG", "HTTPS_PROXY", "HTTP_PROXY")
    }
    full_env.update({"NO_PROXY": "127.0.0.1,localhost", "KUBECONFIG": "/nonexistent"})
    full_env.update(env or {})
    done = subprocess.run(
        [_script(), *argv], input=stdin, capture_output=True, text=True, env=full_env, timeout=60
    )
    return Result(done.returncode, done.stdout, done.stderr)


def one_line_error(result: Result, code: int = 1) -> str:
    assert result.code == code, result
    assert result.out == ""
    assert result.err.startswith("kubectl-vgpu: ") and result.err.count("\n") == 1, result.err
    return result.err.removeprefix("kubectl-vgpu: ").strip()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo (two A100 nodes, two T4 nodes) with three pods placed."""
    server = start_extender(standalone_settings(tmp_path_factory.mktemp("kubectl"), demo=True))
    try:
        place(server, pod_json("train-0", namespace="ml", mem=20000, cores=50), "demo-a100-1")
        place(server, pod_json("infer-1", namespace="ml", mem=4000, cores=10), "demo-a100-1")
        place(server, pod_json("notebook", namespace="dev", mem=15000), "demo-t4-1")
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- --server
def test_inspect_lists_every_gpu_and_its_pods(running: RunningExtender) -> None:
    result = kubectl_vgpu("inspect", "--server", running.url)
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert lines[0].split()[:3] == ["NODE", "GPU", "TYPE"]
    # Each GPU's line: the node's name on its first, its memory and cores, its pods.
    rows = {(line[:13].strip(), line.split()[-1]) for line in lines[1:13]}
    assert {
        ("demo-a100-1", "ml/train-0"),
        ("", "ml/infer-1"),
        ("demo-t4-1", "dev/notebook"),
    } <= rows
    assert "20000/81920  50/100    1/10        ok     ml/train-0" in result.out
    assert "Allocated/Total GPU memory: 39000/716800 MiB (5%)" in result.out


def test_inspect_one_node_shows_its_pods(running: RunningExtender) -> None:
    result = kubectl_vgpu("inspect", "demo-a100-1", "--server", running.url)
    assert result.code == 0, result
    assert result.out.startswith("Node:           demo-a100-1\n")
    pods = [line.split() for line in result.out.split("\n\n")[-1].splitlines()]
    assert pods[1:] == [
        ["ml/train-0", "0", "bound", "20000", "50", "0"],
        ["ml/infer-1", "1", "bound", "4000", "10", "0"],
    ]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_inspect_prints_the_admin_apis_objects(running: RunningExtender, output: str) -> None:
    every = kubectl_vgpu("inspect", "-o", output, "--server", running.url)
    one = kubectl_vgpu("inspect", "demo-t4-1", f"--output={output}", "--server", running.url)
    load = json.loads if output == "json" else yaml.safe_load
    assert load(every.out) == running.client.get("/api/v1/nodes?devices=true").json()
    assert load(one.out) == running.client.get("/api/v1/nodes/demo-t4-1").json()


def test_top_puts_the_freest_node_first(running: RunningExtender) -> None:
    result = kubectl_vgpu("top", "--server", running.url)
    assert result.code == 0, result
    names = [line.split()[0] for line in result.out.splitlines()[1:5]]
    assert names == ["demo-a100-2", "demo-a100-1", "demo-t4-2", "demo-t4-1"]
    assert result.out.splitlines()[2].split()[1] == str(327680 - 24000)
    data = json.loads(kubectl_vgpu("top", "-o", "json", "--server", running.url).out)
    assert [n["name"] for n in data["nodes"]] == names
    assert data["summary"] == running.client.get("/api/v1/summary").json()


def test_top_by_fragmentation(running: RunningExtender) -> None:
    result = kubectl_vgpu("top", "--sort-by", "fragmentation", "--server", running.url)
    assert result.code == 0, result
    nodes = running.client.get("/api/v1/nodes").json()
    expected = [n["name"] for n in sorted(nodes, key=lambda n: (-n["fragmentation"], n["name"]))]
    assert [line.split()[0] for line in result.out.splitlines()[1:5]] == expected
    assert expected[:2] == ["demo-a100-1", "demo-t4-1"]  # not the order by free memory


def test_whatif_from_stdin_says_where_and_why_not(running: RunningExtender) -> None:
    result = kubectl_vgpu("whatif", "-f", "-", "--server", running.url, stdin=yaml.safe_dump(BIG))
    assert result.code == 0, result
    expected = running.client.post("/api/v1/whatif", json={"pod": BIG}).json()
    best = expected["feasible"][0]
    assert result.out.startswith(f"Pod ml/big would go to {best['node']} (score ")
    grant = best["containers"][0][0]
    assert f"  container 0: {grant['uuid']} (30000 MiB, 0% cores)" in result.out
    rejected = {line.split()[0] for line in result.out.split("\n\n")[1].splitlines()[1:]}
    assert rejected == {"demo-t4-1", "demo-t4-2"} == set(expected["rejected"])


def test_whatif_from_a_file_as_json(running: RunningExtender, tmp_path: Path) -> None:
    (tmp_path / "pod.json").write_text(json.dumps(BIG))
    result = kubectl_vgpu(
        "whatif",
        "-f",
        str(tmp_path / "pod.json"),
        "--node",
        "demo-t4-2",
        "-o",
        "json",
        "--server",
        running.url,
    )
    assert result.code == 0, result
    answer = json.loads(result.out)
    assert answer["feasible"] == [] and list(answer["rejected"]) == ["demo-t4-2"]


def test_whatif_never_reserves(running: RunningExtender) -> None:
    before = running.client.get("/api/v1/summary").json()
    kubectl_vgpu("whatif", "-f", "-", "--server", running.url, stdin=json.dumps(BIG))
    assert running.client.get("/api/v1/summary").json() == before


def test_an_unknown_node(running: RunningExtender) -> None:
    result = kubectl_vgpu("inspect", "ghost", "--server", running.url)
    assert one_line_error(result) == "node 'ghost' is not registered"


def test_nothing_listening() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    message = one_line_error(kubectl_vgpu("top", "--server", url))
    assert message == f"cannot connect to the extender at {url}: connection refused"


def test_not_a_pod(running: RunningExtender) -> None:
    result = kubectl_vgpu("whatif", "-f", "-", "--server", running.url, stdin="kind: Service\n")
    assert one_line_error(result, 2) == "stdin holds a Service, not a Pod"


# --------------------------------------------------------------------------- token
@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningExtender]:
    """The demo with an admin token: its reads need the token."""
    settings = standalone_settings(tmp_path_factory.mktemp("guarded"), demo=True, admin_token=TOKEN)
    server = start_extender(settings)
    yield server
    server.stop()


def test_without_the_token_a_guarded_extender_refuses(guarded: RunningExtender) -> None:
    message = one_line_error(kubectl_vgpu("inspect", "--server", guarded.url))
    assert message == (
        f"the extender at {guarded.url} answered 401: missing bearer token: send "
        "'Authorization: Bearer <admin_token>'; give the extender's admin token with "
        "--token or VGPU_ADMIN_TOKEN"
    )


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_the_token_is_sent_and_never_shown(guarded: RunningExtender, how: str) -> None:
    argv = ["top", "--server", guarded.url]
    env = {"VGPU_ADMIN_TOKEN": TOKEN} if how == "environment" else {}
    result = kubectl_vgpu(*argv, *(["--token", TOKEN] if how == "flag" else []), env=env)
    assert result.code == 0, result
    assert result.out.splitlines()[1].startswith("demo-a100-1")
    assert TOKEN not in result.out + result.err


def test_a_wrong_token_is_refused_without_echoing_it(guarded: RunningExtender) -> None:
    result = kubectl_vgpu("top", "--server", guarded.url, "--token", "not-it")
    assert "answered 401: wrong bearer token" in one_line_error(result)
    assert "not-it" not in result.err


# --------------------------------------------------------------------------- TLS
@pytest.fixture(scope="module")
def tls_extender(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """An extender process serving HTTPS with a self-signed certificate for 127.0.0.1."""
    directory = tmp_path_factory.mktemp("kubectl-tls")
    cert, key = self_signed(directory, "tls")
    process, url = spawn_tls_demo(directory, cert, key, token=TOKEN)
    try:
        yield url, cert
    finally:
        process.stop()


def test_tls_with_the_ca(tls_extender: tuple[str, Path]) -> None:
    url, cert = tls_extender
    result = kubectl_vgpu(
        "inspect",
        "demo-t4-2",
        "--server",
        url,
        "--ca-file",
        str(cert),
        env={"VGPU_ADMIN_TOKEN": TOKEN},
    )
    assert result.code == 0, result
    assert result.out.startswith("Node:           demo-t4-2\n")


def test_tls_without_the_ca_is_refused_unless_told_to_skip(tls_extender: tuple[str, Path]) -> None:
    url, _cert = tls_extender
    refused = one_line_error(kubectl_vgpu("top", "--server", url, "--token", TOKEN))
    assert refused.startswith(f"cannot connect to the extender at {url}: ")
    assert "CERTIFICATE_VERIFY_FAILED" in refused
    skipped = kubectl_vgpu("top", "--server", url, "--token", TOKEN, "--insecure-skip-tls-verify")
    assert skipped.code == 0, skipped


# --------------------------------------------------------------------------- proxy
_PROXY_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/services/([^/]+)/proxy(/.*)?$")


class ServiceProxy(ThreadingHTTPServer):
    """kube-apiserver's ``services/proxy`` for one Service that points at ``target``."""

    daemon_threads = True

    def __init__(self, target: str, service: tuple[str, str, str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.target = target
        self.service = service  # namespace, scheme, name, port
        #: method, path and the headers received, for each request forwarded.
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ProxyHandler(BaseHTTPRequestHandler):
    server: ServiceProxy

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._proxy()

    def do_POST(self) -> None:
        self._proxy()

    def _proxy(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path, _, query = self.path.partition("?")
        if self.headers.get("Authorization") != f"Bearer {KUBE_TOKEN}":
            return self._status(401, "Unauthorized", "Unauthorized")
        match = _PROXY_PATH.match(path)
        if match is None:
            return self._status(404, "NotFound", "the server could not find the requested resource")
        namespace, target, rest = match.group(1), match.group(2), match.group(3) or "/"
        scheme, name, port = [*target.split(":"), "", ""][:3]
        if (namespace, scheme, name, port) != self.server.service:
            return self._status(404, "NotFound", f'services "{name}" not found')
        # What kube-apiserver forwards: the request, less the credentials it consumed.
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "host")
        }
        answer = httpx.request(
            self.command,
            f"{self.server.target}{rest}" + (f"?{query}" if query else ""),
            headers=headers,
            content=body,
        )
        self.server.seen.append((self.command, self.path, dict(self.headers.items())))
        self._send(answer.status_code, answer.content, answer.headers.get("content-type", ""))

    def _status(self, code: int, reason: str, message: str) -> None:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        self._send(code, json.dumps(status).encode(), "application/json")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def proxy_to(extender: RunningExtender) -> Iterator[ServiceProxy]:
    proxy = ServiceProxy(extender.url, ("vgpu-system", "http", "vgpu-extender", "http"))
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


@pytest.fixture
def proxy(running: RunningExtender) -> Iterator[ServiceProxy]:
    yield from proxy_to(running)


@pytest.fixture
def guarded_proxy(guarded: RunningExtender) -> Iterator[ServiceProxy]:
    yield from proxy_to(guarded)


def kubeconfig_for(path: Path, server: str, token: str = KUBE_TOKEN) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kind", "cluster": {"server": server}}],
                "users": [{"name": "me", "user": {"token": token}}],
                "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "me"}}],
                "current-context": "kind",
            }
        )
    )
    return path


PLAIN = ("--service-scheme", "http", "--service-port", "http")


def test_through_the_proxy_the_same_table(
    running: RunningExtender, proxy: ServiceProxy, tmp_path: Path
) -> None:
    config = kubeconfig_for(tmp_path / "config", proxy.url)
    through = kubectl_vgpu("inspect", *PLAIN, env={"KUBECONFIG": str(config)})
    assert through.code == 0, through
    assert through.out == kubectl_vgpu("inspect", "--server", running.url).out
    assert [(method, path) for method, path, _ in proxy.seen] == [
        (
            "GET",
            "/api/v1/namespaces/vgpu-system/services/http:vgpu-extender:http/proxy"
            "/api/v1/nodes?devices=true",
        )
    ]


def test_whatif_through_the_proxy(proxy: ServiceProxy, tmp_path: Path) -> None:
    config = kubeconfig_for(tmp_path / "config", proxy.url)
    result = kubectl_vgpu(
        "whatif", "-f", "-", "--kubeconfig", str(config), *PLAIN, stdin=yaml.safe_dump(BIG)
    )
    assert result.code == 0, result
    assert result.out.startswith("Pod ml/big would go to demo-a100-")
    assert proxy.seen[0][:2] == (
        "POST",
        "/api/v1/namespaces/vgpu-system/services/http:vgpu-extender:http/proxy/api/v1/whatif",
    )


@pytest.mark.parametrize(
    ("argv", "token", "message"),
    [
        (
            (),
            "wrong",
            "the API server answered 401: Unauthorized (your kubeconfig's user needs "
            "`get` on services/proxy in that namespace)",
        ),
        (
            ("--service", "nope"),
            KUBE_TOKEN,
            'the API server answered 404: services "nope" not '
            "found (check --namespace, --service and --port, "
            "and that the extender runs)",
        ),
    ],
    ids=["bad-kube-credentials", "no-such-service"],
)
def test_the_api_servers_refusals(
    proxy: ServiceProxy, tmp_path: Path, argv: tuple[str, ...], token: str, message: str
) -> None:
    config = kubeconfig_for(tmp_path / "config", proxy.url, token)
    result = kubectl_vgpu("top", *PLAIN, *argv, env={"KUBECONFIG": str(config)})
    assert one_line_error(result) == message
    assert token not in result.err


def test_a_guarded_extender_through_the_proxy_reads_with_the_token(
    guarded_proxy: ServiceProxy, tmp_path: Path
) -> None:
    """The API server passes no Authorization header on, so the extender's token goes in
    X-Vgpu-Admin-Token, which the extender accepts for reads."""
    config = kubeconfig_for(tmp_path / "config", guarded_proxy.url)
    result = kubectl_vgpu("top", *PLAIN, env={"KUBECONFIG": str(config), "VGPU_ADMIN_TOKEN": TOKEN})
    assert result.code == 0, result.err
    assert TOKEN not in result.out + result.err
    sent = guarded_proxy.seen[0][2]
    assert sent["Authorization"] == f"Bearer {KUBE_TOKEN}"
    assert sent.get("X-Vgpu-Admin-Token") == TOKEN


def test_a_guarded_extender_through_the_proxy_without_a_token(
    guarded_proxy: ServiceProxy, tmp_path: Path
) -> None:
    """Without the extender's token the read is refused, and the message says what to
    do instead."""
    config = kubeconfig_for(tmp_path / "config", guarded_proxy.url)
    result = kubectl_vgpu("top", *PLAIN, env={"KUBECONFIG": str(config)})
    message = one_line_error(result)
    assert message.startswith("service vgpu-system/vgpu-extender (port http) through the API ")
    assert "answered 401: missing bearer token" in message
    assert "(give --token: it goes there)" in message
    assert "use --server (for instance with kubectl port-forward)" in message
    assert "X-Vgpu-Admin-Token" not in guarded_proxy.seen[0][2]
