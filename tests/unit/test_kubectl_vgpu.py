"""``kubectl-vgpu``: parsing, the kubeconfig, errors and rendering, from canned admin API JSON."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.tls import self_signed
from vgpu_extender import __version__
from vgpu_extender.kubectl_vgpu import cli, commands, kubeconfig, render
from vgpu_extender.kubectl_vgpu.client import AdminClient, Endpoint
from vgpu_extender.kubectl_vgpu.errors import PluginError


# --------------------------------------------------------------------------- canned JSON
def pod_share(name: str, *, namespace: str = "ml", mem: int = 4000, cores: int = 10) -> dict:
    return {
        "uid": f"uid-{name}",
        "namespace": namespace,
        "name": name,
        "state": "bound",
        "memory_mib": mem,
        "cores": cores,
        "containers": [0],
    }


def device(
    index: int,
    *,
    node: str = "n1",
    total: int = 16000,
    pods: list[dict] | None = None,
    healthy: bool = True,
    cordoned: bool = False,
) -> dict:
    pods = pods or []
    used = sum(p["memory_mib"] for p in pods)
    cores = sum(p["cores"] for p in pods)
    return {
        "uuid": f"GPU-{node}-{index}",
        "index": index,
        "type": "NVIDIA-Tesla T4",
        "numa": 0,
        "mode": "hami-core",
        "healthy": healthy,
        "cordoned": cordoned,
        "memory_mib": total,
        "memory_used_mib": used,
        "memory_free_mib": total - used,
        "cores": 100,
        "cores_used": cores,
        "cores_free": 100 - cores,
        "slots": 10,
        "slots_used": len(pods),
        "slots_free": 10 - len(pods),
        "fragment_mib": total - used if pods else 0,
        "pods": pods,
    }


def node(name: str, devices: list[dict], *, problem: str = "", frag: float = 0.0) -> dict:
    return {
        "name": name,
        "labels": {"kubernetes.io/hostname": name},
        "problem": problem,
        "gpus": len(devices),
        "healthy_gpus": sum(d["healthy"] for d in devices),
        "cordoned_gpus": sum(d["cordoned"] for d in devices),
        "memory_mib": sum(d["memory_mib"] for d in devices),
        "memory_used_mib": sum(d["memory_used_mib"] for d in devices),
        "memory_free_mib": sum(d["memory_free_mib"] for d in devices),
        "cores": 100 * len(devices),
        "cores_used": sum(d["cores_used"] for d in devices),
        "cores_free": sum(d["cores_free"] for d in devices),
        "allocations": sum(len(d["pods"]) for d in devices),
        "fragmentation": frag,
        "devices": devices,
    }


def cluster() -> list[dict]:
    return [
        node(
            "n1",
            [device(0, pods=[pod_share("train"), pod_share("infer", mem=2000)]), device(1)],
            frag=0.3,
        ),
        node("n2", [device(0, node="n2", total=40000, cordoned=True), device(1, node="n2")]),
        node("n3", [device(0, node="n3", healthy=False)], problem="node is not ready"),
    ]


SUMMARY = {
    "nodes": 3,
    "nodes_with_problems": 1,
    "gpus": 5,
    "unhealthy_gpus": 1,
    "cordoned_gpus": 1,
    "memory_mib": 104000,
    "memory_used_mib": 6000,
    "memory_free_mib": 98000,
    "memory_utilisation": 0.0577,
    "cores": 500,
    "cores_used": 20,
    "cores_utilisation": 0.04,
    "slots": 50,
    "slots_used": 2,
    "pods": 2,
    "pending_reservations": 1,
    "fragmentation": 0.1,
    "conflicts": 0,
}

WHATIF = {
    "managed": True,
    "feasible": [
        {
            "node": "n2",
            "score": 9,
            "containers": [[{"uuid": "GPU-n2-1", "memory_mib": 3000, "cores": 20}]],
        },
        {"node": "n1", "score": 4, "containers": None},
    ],
    "rejected": {
        "n3": {
            "reason": "node unschedulable",
            "message": "node unschedulable: node is not ready",
            "unresolvable": True,
        },
        "n0": {
            "reason": "insufficient gpumem",
            "message": "insufficient gpumem: need 3000 MiB, best free 1000 MiB",
            "unresolvable": False,
        },
    },
}


# --------------------------------------------------------------------------- parsing
def parse(*argv: str) -> Any:
    return cli.parser().parse_args(list(argv))


def test_the_defaults_point_at_the_deployed_service() -> None:
    args = parse("inspect")
    assert (args.command, args.node, args.output) == ("inspect", None, "table")
    assert (args.namespace, args.service, args.service_port, args.service_scheme) == (
        "vgpu-system",
        "vgpu-extender",
        "https",
        "https",
    )
    assert args.server is None and args.request_timeout == 30.0


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["inspect", "gpu-7", "-o", "json"], {"node": "gpu-7", "output": "json"}),
        (["top", "--sort-by", "fragmentation", "-o", "yaml"], {"sort_by": "fragmentation"}),
        (
            ["whatif", "-f", "-", "--node", "a", "--node", "b", "--detail", "3"],
            {"filename": "-", "nodes": ["a", "b"], "detail": 3},
        ),
        (
            ["inspect", "-n", "gpu", "--service", "ext", "--service-port", "8443"],
            {"namespace": "gpu", "service": "ext", "service_port": "8443"},
        ),
        (["top", "--server", "https://x:8443", "--token", "t"], {"server": "https://x:8443"}),
    ],
    ids=["inspect-node-json", "top-sort", "whatif-candidates", "proxy-target", "direct"],
)
def test_options_parse(argv: list[str], expected: dict[str, Any]) -> None:
    args = vars(parse(*argv))
    assert {key: args[key] for key in expected} == expected


def test_the_token_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VGPU_ADMIN_TOKEN", "from-env")
    assert parse("top").token == "from-env"
    assert parse("top", "--token", "flag").token == "flag"
    monkeypatch.setenv("VGPU_ADMIN_TOKEN", "")
    assert parse("top").token is None


@pytest.mark.parametrize(
    "argv", [[], ["inspect"], ["whatif"], ["top"]], ids=lambda a: "root" if not a else a[0]
)
def test_version_on_every_command(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(*argv, "--version")
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"kubectl-vgpu {__version__}"


@pytest.mark.parametrize(
    "argv",
    [[], ["whatif"], ["inspect", "-o", "wide"], ["nope"], ["top", "--request-timeout", "x"]],
    ids=["no-command", "whatif-without-file", "bad-output", "unknown-command", "bad-timeout"],
)
def test_bad_command_lines_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert "usage: kubectl-vgpu" in capsys.readouterr().err


def test_help_imports_neither_httpx_nor_yaml_nor_the_server() -> None:
    """``--help`` and ``--version`` must stay a bare interpreter's start."""
    probe = (
        "import sys\n"
        "from vgpu_extender.kubectl_vgpu import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = {'httpx', 'yaml', 'kubernetes', 'fastapi', 'pydantic', 'sqlalchemy', 'numpy'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_commands_import_no_server_code() -> None:
    """Nor httpx's command line, which ``import httpx`` pulls in unless told not to."""
    probe = (
        "import sys\n"
        "import vgpu_extender.kubectl_vgpu.commands, vgpu_extender.kubectl_vgpu.kubeconfig\n"
        "import vgpu_extender.kubectl_vgpu.client as c\n"
        "c.AdminClient(c.Endpoint('http://127.0.0.1:1')).__exit__()\n"
        "heavy = {'fastapi', 'pydantic', 'sqlalchemy', 'numpy', 'kubernetes', 'uvicorn',\n"
        "         'rich', 'click', 'pygments'}  # the last three: httpx's own CLI\n"
        "ours = {'vgpu_extender.api', 'vgpu_extender.services', 'vgpu_extender.store'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy\n"
        "             or '.'.join(m.split('.')[:2]) in ours))\n"
        "print('httpx' in sys.modules, 'httpx._main' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "True False"]


# --------------------------------------------------------------------------- endpoints
def test_the_proxy_url_names_scheme_service_and_port() -> None:
    endpoint = Endpoint.through_proxy(
        "https://api.example:6443/",
        namespace="vgpu-system",
        service="vgpu-extender",
        port="https",
        scheme="https",
        headers={"Authorization": "Bearer kube"},
        verify=True,
    )
    assert endpoint.base_url == (
        "https://api.example:6443/api/v1/namespaces/vgpu-system/services/"
        "https:vgpu-extender:https/proxy"
    )
    assert endpoint.proxied and endpoint.headers == {"Authorization": "Bearer kube"}
    assert "kube" not in repr(endpoint)


def test_through_the_proxy_the_token_goes_in_its_own_header() -> None:
    endpoint = Endpoint.through_proxy(
        "https://api:6443",
        namespace="n",
        service="s",
        port="443",
        scheme="https",
        headers={"Authorization": "Bearer kube"},
        verify=True,
        token="s3cret",
    )
    assert endpoint.headers == {"Authorization": "Bearer kube", "X-Vgpu-Admin-Token": "s3cret"}
    client = answering(401, {"detail": "wrong"}, endpoint=endpoint)
    with client, pytest.raises(PluginError) as error:
        client.get("/summary")
    assert "(it went there)" in error.value.message and "s3cret" not in error.value.message


def test_direct_sends_the_token_as_a_bearer() -> None:
    endpoint = Endpoint.direct("https://x:8443/", token="s3cret", verify=True)
    assert endpoint.base_url == "https://x:8443"
    assert endpoint.headers == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(endpoint)
    assert Endpoint.direct("http://x", token=None, verify=True).headers == {}


# --------------------------------------------------------------------------- kubeconfig
def write_config(path: Path, users: dict[str, dict], *, current: str = "a", **cluster: Any) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "c", "cluster": {"server": "https://api:6443", **cluster}}],
        "users": [{"name": name, "user": body} for name, body in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name}} for name in users],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_token_of_the_current_context(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", {"a": {"token": "tok-a"}, "b": {"token": "tok-b"}})
    server = kubeconfig.load(str(config))
    assert server.url == "https://api:6443"
    assert server.headers == {"Authorization": "Bearer tok-a"}
    assert isinstance(server.verify, ssl.SSLContext)
    assert kubeconfig.load(str(config), "b").headers == {"Authorization": "Bearer tok-b"}


def test_a_token_file_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file\n")
    config = write_config(tmp_path / "config", {"a": {"tokenFile": "tok"}})
    assert kubeconfig.load(str(config)).headers == {"Authorization": "Bearer from-file"}


def test_basic_auth(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config", {"a": {"username": "u", "password": "p"}})
    expected = "Basic " + base64.b64encode(b"u:p").decode()
    assert kubeconfig.load(str(config)).headers == {"Authorization": expected}


def test_certificates_inline_and_in_files(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "client")
    inline = {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(key.read_bytes()).decode(),
    }
    files = {"client-certificate": "client.crt", "client-key": "client.key"}
    config = write_config(
        tmp_path / "config",
        {"a": inline, "b": files},
        **{"certificate-authority-data": base64.b64encode(cert.read_bytes()).decode()},
    )
    for context in ("a", "b"):
        verify = kubeconfig.load(str(config), context).verify
        assert isinstance(verify, ssl.SSLContext)
        assert verify.verify_mode is ssl.CERT_REQUIRED
        assert len(verify.get_ca_certs()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "client.crt",
        "client.key",
        "config",
    ]  # the inline key's temporary file is gone


def test_insecure_skip_tls_verify(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config", {"a": {"token": "t"}}, **{"insecure-skip-tls-verify": True}
    )
    verify = kubeconfig.load(str(config)).verify
    assert isinstance(verify, ssl.SSLContext) and verify.verify_mode is ssl.CERT_NONE


def test_kubeconfig_files_merge_the_first_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write_config(tmp_path / "one", {"a": {"token": "first"}})
    second = write_config(tmp_path / "two", {"a": {"token": "second"}, "b": {"token": "b"}})
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing'}:{second}")
    assert kubeconfig.load().headers == {"Authorization": "Bearer first"}
    assert kubeconfig.load(None, "b").headers == {"Authorization": "Bearer b"}


@pytest.mark.parametrize(
    ("context", "content", "message"),
    [
        ("ghost", None, "context 'ghost' is not in the kubeconfig"),
        (None, "clusters: [}", "cannot be read"),
        (None, "- a list", "is not a mapping"),
    ],
    ids=["unknown-context", "bad-yaml", "not-a-mapping"],
)
def test_kubeconfig_errors_are_one_line(
    tmp_path: Path, context: str | None, content: str | None, message: str
) -> None:
    config = write_config(tmp_path / "config", {"a": {"token": "t"}})
    if content is not None:
        config.write_text(content)
    with pytest.raises(PluginError) as error:
        kubeconfig.load(str(config), context)
    assert message in error.value.message and "\n" not in error.value.message


def test_no_kubeconfig_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(PluginError) as error:
        kubeconfig.load()
    assert error.value.exit_code == 2 and "--server" in error.value.message


# --------------------------------------------------------------------------- client errors
def answering(
    status: int, body: Any, *, proxied: bool = False, endpoint: Endpoint | None = None
) -> AdminClient:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content)

    endpoint = endpoint or Endpoint("http://x", {}, True, proxied, "the extender at http://x")
    return AdminClient(endpoint, transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("status", "body", "proxied", "expected"),
    [
        (
            401,
            {"detail": "wrong bearer token"},
            False,
            "the extender at http://x answered 401: wrong bearer token; give the extender's "
            "admin token with --token or VGPU_ADMIN_TOKEN",
        ),
        (
            403,
            {"detail": "loopback only"},
            True,
            "answered 403: loopback only; the API server's proxy does not pass Authorization "
            "on to the service, so the extender's token travels in X-Vgpu-Admin-Token (give "
            "--token: it goes there), which older extenders ignore: otherwise use --server",
        ),
        (
            403,
            {"kind": "Status", "message": 'services "vgpu-extender" is forbidden'},
            True,
            'the API server answered 403: services "vgpu-extender" is forbidden (your '
            "kubeconfig's user needs `get` on services/proxy in that namespace)",
        ),
        (
            503,
            {"kind": "Status", "message": 'no endpoints available for service "vgpu-extender"'},
            True,
            "check --namespace, --service and --port",
        ),
        (404, {"detail": "node 'g' is not registered"}, False, "node 'g' is not registered"),
        (500, b"<html>oops</html>\n<p>", False, "answered 500: <html>oops</html>"),
        (
            422,
            {"detail": [{"loc": ["body", "pod"], "msg": "Field required"}]},
            False,
            "answered 422: body.pod: Field required",
        ),
    ],
    ids=["401", "403-proxied", "rbac", "no-endpoints", "404", "html", "validation"],
)
def test_failures_are_one_line(status: int, body: Any, proxied: bool, expected: str) -> None:
    with answering(status, body, proxied=proxied) as client, pytest.raises(PluginError) as error:
        client.get("/nodes")
    assert expected in error.value.message and "\n" not in error.value.message
    assert error.value.exit_code == 1


def test_a_missing_object_is_named() -> None:
    with answering(404, {"detail": "x"}) as client, pytest.raises(PluginError) as error:
        client.get("/nodes/g", missing="node 'g' is not registered")
    assert error.value.message == "node 'g' is not registered"


def test_an_answer_that_is_not_json() -> None:
    with answering(200, b"<html>") as client, pytest.raises(PluginError) as error:
        client.get("/nodes")
    assert error.value.message == "the extender at http://x sent an answer that is not JSON"


def test_connection_refused_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.server import free_port

    assert cli.main(["top", "--server", f"http://127.0.0.1:{free_port()}"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.endswith(": connection refused\n")
    assert captured.err.startswith("kubectl-vgpu: cannot connect to the extender at http://")


def test_a_server_that_is_no_url_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["top", "--server", "extender:8443"]) == 2
    assert capsys.readouterr().err == (
        "kubectl-vgpu: --server must be an http:// or https:// URL: extender:8443\n"
    )


# --------------------------------------------------------------------------- rendering
def test_the_nodes_table_has_a_line_per_gpu_and_the_totals() -> None:
    lines = render.nodes_table(cluster()).splitlines()
    assert lines[0].split() == list(render.NODE_HEADERS)
    assert lines[1].split() == [
        "n1",
        "0",
        "NVIDIA-Tesla",
        "T4",
        "6000/16000",
        "20/100",
        "2/10",
        "ok",
        "ml/train,ml/infer",
    ]
    assert lines[2].split()[:2] == ["1", "NVIDIA-Tesla"]  # same node: the name is not repeated
    assert lines[3].split()[-2:] == ["cordoned", "-"]
    assert lines[5].split()[-2:] == ["unhealthy", "-"]
    assert lines[7] == (
        "Allocated/Total GPU memory: 6000/104000 MiB (6%), cores: 20/500 (4%), GPUs: 5 on 3 node(s)"
    )
    # Free memory of healthy, uncordoned GPUs: n1's two and n2's second.
    assert lines[8] == "Free memory on shared or full GPUs (fragmentation): 10000/42000 MiB (24%)"
    assert lines[9] == "Not schedulable: n3: node is not ready"


def test_columns_line_up() -> None:
    lines = render.nodes_table(cluster()).splitlines()[:6]
    start = lines[0].index("MEMORY(MiB)")
    assert all(line[start - 2 : start] == "  " and line[start] != " " for line in lines)


def test_one_node_in_detail_lists_its_pods() -> None:
    text = render.node_detail(cluster()[0])
    assert "Node:           n1" in text
    assert "Memory (MiB):   6000/32000 used (19%), 26000 free" in text
    assert "Fragmentation:  30% of the free memory" in text
    pods = text.split("\n\n")[-1].splitlines()
    assert pods[0].split() == ["POD", "GPU", "STATE", "MEMORY(MiB)", "CORES(%)", "CONTAINERS"]
    assert pods[1].split() == ["ml/train", "0", "bound", "4000", "10", "0"]
    assert pods[2].split() == ["ml/infer", "0", "bound", "2000", "10", "0"]


def test_a_node_without_pods_or_gpus_says_so() -> None:
    text = render.node_detail(node("bare", []))
    assert "No GPUs." in text and "No pods hold its GPUs." in text


def test_top_puts_the_freest_first_and_the_unschedulable_last() -> None:
    ordered = render.by_free_memory(cluster())
    assert [n["name"] for n in ordered] == ["n2", "n1", "n3"]
    lines = render.top_table(ordered, SUMMARY).splitlines()
    assert lines[0].split()[:2] == ["NODE", "FREE(MiB)"]
    assert lines[1].split() == ["n2", "56000", "0/56000", "0%", "200/200", "2/2", "0%", "0", "ok"]
    assert lines[2].split()[6] == "30%"
    assert lines[3].endswith("node is not ready")
    assert lines[5].startswith("Cluster: 98000 MiB free of 104000 (6% used)")
    assert lines[6] == (
        "Pending reservations: 1, conflicts: 0 (see the admin API's /api/v1/conflicts)"
    )


def test_whatif_names_the_best_node_its_gpus_and_every_rejection() -> None:
    lines = render.whatif_text("ml/new", WHATIF).splitlines()
    assert lines[0] == "Pod ml/new would go to n2 (score 9/10)."
    assert lines[1] == "  container 0: GPU-n2-1 (3000 MiB, 20% cores)"
    assert lines[2] == "It would also fit on: n1 (score 4)."
    assert lines[4].split() == ["NODE", "REASON", "PREEMPTION", "MESSAGE"]
    assert lines[5].startswith("n0") and "may help" in lines[5]
    assert lines[6].startswith("n3") and "cannot help" in lines[6]
    assert lines[6].endswith("node unschedulable: node is not ready")


@pytest.mark.parametrize(
    ("result", "first"),
    [
        ({**WHATIF, "feasible": []}, "Pod ml/new fits on no node."),
        (
            {"managed": False, "feasible": WHATIF["feasible"], "rejected": {}},
            "Pod ml/new asks for no GPU resource the extender manages",
        ),
    ],
    ids=["nowhere", "unmanaged"],
)
def test_whatif_without_a_placement(result: dict, first: str) -> None:
    assert render.whatif_text("ml/new", result).startswith(first)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_json_and_yaml_are_the_api_objects_unchanged(output: str) -> None:
    text = render.dump(cluster(), output)
    loaded = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert loaded == cluster()
    if output == "yaml":
        assert text.startswith("- name: n1\n  labels:")  # the API's key order


# --------------------------------------------------------------------------- pod files
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ml"},
    "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


@pytest.mark.parametrize(
    "text",
    [
        yaml.safe_dump(POD),
        json.dumps(POD),
        "---\n" + yaml.safe_dump(POD) + "---\n",
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [POD]}),
    ],
    ids=["yaml", "json", "documents", "list"],
)
def test_a_pod_file(tmp_path: Path, text: str) -> None:
    (tmp_path / "pod").write_text(text)
    assert commands.read_pod(str(tmp_path / "pod")) == POD


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (yaml.safe_dump(POD) + "---\n" + yaml.safe_dump(POD), "must hold one Pod, it holds 2"),
        ("", "must hold one Pod, it holds 0"),
        (yaml.safe_dump({"kind": "Deployment", "spec": {}}), "holds a Deployment, not a Pod"),
        ("kind: Pod\nmetadata: {name: x}\n", "has no spec"),
        ("a: [b", "is not valid YAML or JSON"),
        ("- 1\n", "holds a list, not a Pod"),
    ],
    ids=["two", "empty", "deployment", "no-spec", "bad-yaml", "scalar-list"],
)
def test_bad_pod_files_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "pod").write_text(text)
    with pytest.raises(PluginError) as error:
        commands.read_pod(str(tmp_path / "pod"))
    assert message in error.value.message and error.value.exit_code == 2


def test_a_missing_pod_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert cli.main(["whatif", "-f", str(missing), "--server", "http://127.0.0.1:1"]) == 2
    assert capsys.readouterr().err == (
        f"kubectl-vgpu: cannot read {missing}: No such file or directory\n"
    )


def test_skipping_tls_verification_keeps_the_client_certificate_context() -> None:
    """``--insecure-skip-tls-verify`` stops checking the server, but a user who logs in
    by client certificate keeps the context that holds it."""
    import ssl

    context = ssl.create_default_context()
    kept = kubeconfig.insecure(context)
    assert kept is context
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    assert kubeconfig.insecure(True) is False and kubeconfig.insecure(False) is False
