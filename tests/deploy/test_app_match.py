"""Names, ports, paths and resource names in the manifests are the application's."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from tests.deploy.app_surface import (
    device_plugin_settings_class,
    env_prefix,
    extender_settings_class,
    parse_cli,
    pyproject,
    serves,
    settings_fields,
)
from tests.deploy.dockerfiles import dockerfile
from tests.deploy.env_expansion import expanded_env
from tests.deploy.manifests import (
    BASE,
    OVERLAYS,
    container,
    env_values,
    find,
    render,
    scheduler_config,
    volume_for_mount,
)
from vgpu_extender.vendors.nvidia.config import NvidiaConfig

OBJECTS = render(BASE)
DEPLOYMENT = find(OBJECTS, "Deployment", "vgpu-scheduler")
DAEMONSET = find(OBJECTS, "DaemonSet", "vgpu-device-plugin")
EXTENDER = container(DEPLOYMENT, "vgpu-extender")
PLUGIN = container(DAEMONSET, "device-plugin")
#: Settings that must name an existing file; the manifests point into mounted volumes.
#: Read by the NVIDIA container runtime, not by the application.
NVIDIA_RUNTIME_ENV = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"}
#: The per-vendor switches VGPU_VENDOR is expanded from (no settings themselves: a
#: misspelt one stays unexpanded in VGPU_VENDOR, which then fails the start).
VENDOR_SWITCHES = set(re.findall(r"\$\((\w+)\)", env_values(EXTENDER)["VGPU_VENDOR"]))
FILE_FIELDS = {"tls_cert", "tls_key", "inventory_file", "kubeconfig", "static_file"}


def _env_names(spec: dict[str, Any]) -> list[str]:
    return [e["name"] for e in spec.get("env") or []]


def _settings_values(cls: Any, spec: dict[str, Any], extra: dict[str, str]) -> dict[str, Any]:
    prefix = env_prefix(cls)
    values = {**expanded_env(spec), **extra}
    return {
        name[len(prefix) :].lower(): value
        for name, value in values.items()
        if name.startswith(prefix) and name[len(prefix) :].lower() not in FILE_FIELDS
    }


@pytest.mark.parametrize(
    ("spec", "cls_getter", "others"),
    [
        (EXTENDER, extender_settings_class, VENDOR_SWITCHES),
        (PLUGIN, device_plugin_settings_class, NVIDIA_RUNTIME_ENV),
    ],
    ids=["extender", "device-plugin"],
)
def test_every_env_var_is_a_setting(spec, cls_getter, others: set[str]) -> None:
    """Settings ignore unknown variables, so a typo here would be silently lost."""
    cls = cls_getter()
    prefix = env_prefix(cls)
    fields = settings_fields(cls)
    for name in _env_names(spec):
        if name in others:
            continue
        assert name.startswith(prefix), f"{name} lacks the {prefix} prefix"
        assert name[len(prefix) :].lower() in fields, f"{name} is not a setting"


def test_extender_env_is_valid_settings() -> None:
    cls = extender_settings_class()
    settings = cls(**_settings_values(cls, EXTENDER, {}))
    assert settings.scheduler_name == scheduler_config(OBJECTS)["profiles"][0]["schedulerName"]
    assert settings.verbs_localhost_only is True
    assert make_url(settings.database_url).get_backend_name() == "sqlite"


def test_device_plugin_env_is_valid_settings() -> None:
    cls = device_plugin_settings_class()
    settings = cls(**_settings_values(cls, PLUGIN, {"VGPU_DP_NODE_NAME": "gpu-node-1"}))
    assert settings.resource_name == NvidiaConfig().count_resource
    node_name = next(e for e in PLUGIN["env"] if e["name"] == "VGPU_DP_NODE_NAME")
    assert node_name["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_extender_args_parse_and_match_the_container_ports() -> None:
    params = parse_cli("vgpu-extender", EXTENDER["args"])
    assert params["__command__"] == "serve"
    ports = {p["name"]: p["containerPort"] for p in EXTENDER["ports"]}
    # The verbs on loopback only; the webhook and the admin API on the Pod's address.
    assert int(params["port"]) == ports["verbs"] == extender_settings_class()().port
    assert params["host"] == "127.0.0.1"
    env = env_values(EXTENDER)
    assert int(env["VGPU_ADMIN_PORT"]) == ports["https"]
    assert env["VGPU_ADMIN_HOST"] == "0.0.0.0"


def test_image_default_command_parses() -> None:
    parsed = dockerfile("extender")
    params = parse_cli(parsed.entrypoint[0], [*parsed.entrypoint[1:], *parsed.cmd])
    assert params["__command__"] == "serve"
    assert int(params["port"]) == extender_settings_class()().port


def test_device_plugin_args_parse() -> None:
    params = parse_cli("vgpu-device-plugin", PLUGIN.get("args") or [])
    assert params.get("dry_run") is False


def test_sqlite_file_is_on_the_claim() -> None:
    url = make_url(env_values(EXTENDER)["VGPU_DATABASE_URL"])
    directory = str(PurePosixPath(url.database).parent)
    mounts = {m["mountPath"]: m["name"] for m in EXTENDER["volumeMounts"]}
    assert directory in mounts
    assert "persistentVolumeClaim" in volume_for_mount(DEPLOYMENT, mounts[directory])
    # The image's working directory holds the default (relative) SQLite file too.
    assert dockerfile("extender").workdir == directory


def test_tls_files_come_from_the_webhook_secret() -> None:
    env = env_values(EXTENDER)
    mounts = {m["mountPath"]: m["name"] for m in EXTENDER["volumeMounts"]}
    for key in ("VGPU_TLS_CERT", "VGPU_TLS_KEY"):
        directory = str(PurePosixPath(env[key]).parent)
        secret = volume_for_mount(DEPLOYMENT, mounts[directory])["secret"]["secretName"]
        assert secret == "vgpu-extender-tls"
    assert [PurePosixPath(env[k]).name for k in ("VGPU_TLS_CERT", "VGPU_TLS_KEY")] == [
        "tls.crt",
        "tls.key",
    ]


@pytest.mark.parametrize("name", ["kube-scheduler", "vgpu-extender"])
@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe"])
def test_probes_use_named_ports(name: str, probe: str) -> None:
    spec = container(DEPLOYMENT, name)
    port = spec[probe]["httpGet"]["port"]
    assert port in {p["name"] for p in spec["ports"]}


@pytest.mark.parametrize("probe", ["livenessProbe", "readinessProbe"])
def test_extender_probe_paths_are_routes(probe: str) -> None:
    path = EXTENDER[probe]["httpGet"]["path"]
    assert path in ("/healthz", "/readyz")
    assert serves("GET", path), f"the app does not serve GET {path}"


def test_service_reaches_the_extender_port() -> None:
    service = find(OBJECTS, "Service", "vgpu-extender")
    selector = service["spec"]["selector"]
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in EXTENDER["ports"]}


def test_webhook_calls_the_service() -> None:
    (hook,) = find(OBJECTS, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    target = hook["clientConfig"]["service"]
    service = find(OBJECTS, "Service", target["name"])
    assert service["metadata"]["namespace"] == target["namespace"]
    assert target["port"] in [p["port"] for p in service["spec"]["ports"]]


def test_webhook_path_is_a_route() -> None:
    (hook,) = find(OBJECTS, "MutatingWebhookConfiguration", "vgpu-extender")["webhooks"]
    path = hook["clientConfig"]["service"]["path"]
    assert serves("POST", path), f"the app does not serve POST {path}"


def _mounts(spec: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in spec["volumeMounts"]}


def test_device_plugin_host_paths_are_its_settings() -> None:
    cls = device_plugin_settings_class()
    settings = cls(**_settings_values(cls, PLUGIN, {"VGPU_DP_NODE_NAME": "gpu-node-1"}))
    mounts = _mounts(PLUGIN)
    wanted = [settings.device_plugin_dir, settings.hook_path / "vgpu", settings.vgpu_lock_dir]
    for path in wanted:
        assert str(path) in mounts, f"{path} is not mounted"
        volume = volume_for_mount(DAEMONSET, mounts[str(path)])
        # Same path inside and out: the mounts handed to kubelet are host paths.
        assert volume["hostPath"]["path"] == str(path)
    assert settings.plugin_socket.parent == Path(settings.device_plugin_dir)


def test_device_plugin_runs_where_it_should() -> None:
    spec = DAEMONSET["spec"]["template"]["spec"]
    assert spec["nodeSelector"]["kubernetes.io/os"] == "linux"
    assert "vgpu-extender.io/device-plugin" in spec["nodeSelector"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    limits = PLUGIN["resources"]["limits"]
    assert {"cpu", "memory"} <= limits.keys()


@pytest.mark.parametrize("overlay", [BASE, OVERLAYS / "ha", OVERLAYS / "cert-manager"])
def test_images_carry_the_package_version(overlay: Path) -> None:
    version = pyproject()["project"]["version"]
    objects = render(overlay)
    images = {
        c["name"]: c["image"]
        for kind, name in (("Deployment", "vgpu-scheduler"), ("DaemonSet", "vgpu-device-plugin"))
        for c in find(objects, kind, name)["spec"]["template"]["spec"]["containers"]
    }
    assert images["vgpu-extender"] == f"vgpu-extender:{version}"
    assert images["device-plugin"] == f"vgpu-device-plugin:{version}"


def test_namespace_admits_the_device_plugins_host_paths() -> None:
    host_paths = [v for v in DAEMONSET["spec"]["template"]["spec"]["volumes"] if "hostPath" in v]
    assert host_paths
    namespace = find(OBJECTS, "Namespace", DAEMONSET["metadata"]["namespace"])
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
