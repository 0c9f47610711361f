"""The agent's settings: environment variables prefixed ``VGPU_DP_``, mirrored by CLI flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from device_plugins.discovery.nvml import DEFAULT_IGNORED_XIDS

#: Kubelet's device plugin folder; its own socket is ``kubelet.sock`` in it.
KUBELET_DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
#: Longest unix socket path Linux accepts (``sun_path`` is 108 bytes with its NUL).
MAX_SOCKET_PATH = 107
#: kubelet rejects device IDs longer than this.
MAX_DEVICE_ID = 63
#: Discoveries that read ``static_file``, and those that serve Ascend NPUs.
STATIC_DISCOVERIES = ("static", "ascend-static")
ASCEND_DISCOVERIES = ("npu-smi", "ascend-static")
#: ``metrics_address`` that serves no metrics nor probes.
METRICS_OFF = "off"


def parse_address(value: str) -> tuple[str, int]:
    """``host:port``, ``:port`` (every address) or ``[v6]:port``; port 0 picks one."""
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"metrics_address must be host:port or :port, got {value!r}")
    host = host.removeprefix("[").removesuffix("]")
    return host or "0.0.0.0", int(port)


class DevicePluginSettings(BaseSettings):
    """Everything the node agent can be told. Bad values fail at start, naming the field."""

    model_config = SettingsConfigDict(
        env_prefix="VGPU_DP_", env_ignore_empty=True, extra="ignore", populate_by_name=True
    )

    node_name: str = Field(
        default="",
        validation_alias=AliasChoices("VGPU_DP_NODE_NAME", "NODE_NAME", "node_name"),
        description="This node's name (a DaemonSet passes it from spec.nodeName).",
    )
    resource_name: str = "nvidia.com/gpu"
    device_plugin_dir: Path = KUBELET_DEVICE_PLUGIN_DIR
    socket_name: str = "vgpu-nvidia.sock"
    kubelet_socket_name: str = "kubelet.sock"

    #: ``nvml`` or ``static`` serve NVIDIA GPUs; ``npu-smi`` or ``ascend-static`` (a
    #: static chip file) serve Ascend NPUs, with ``device_plugins.ascend.settings``.
    discovery: Literal["nvml", "static", "npu-smi", "ascend-static"] = "nvml"
    static_file: Path | None = None
    sysfs_root: Path = Path("/sys")
    health_checks: bool = True
    ignored_xids: Annotated[tuple[int, ...], NoDecode] = DEFAULT_IGNORED_XIDS
    preconfigured_memory_mib: int = Field(default=0, ge=0)
    event_wait_ms: int = Field(default=1000, gt=0)

    split_count: int = Field(default=10, ge=1, le=1000)
    memory_scaling: float = Field(default=1.0, gt=0)
    core_scaling: float = Field(default=1.0, gt=0)
    disable_core_limit: bool = False

    hook_path: Path = Path("/usr/local")
    vgpu_lock_dir: Path = Path("/tmp/vgpulock")
    libcuda_log_level: str = ""

    rescan_interval_s: float = Field(default=30.0, gt=0)
    retry_interval_s: float = Field(default=5.0, gt=0)
    kubelet_watch_interval_s: float = Field(default=1.0, gt=0)
    register_timeout_s: float = Field(default=10.0, gt=0)
    kubeconfig: Path | None = None
    #: ``host:port`` of the metrics and probe endpoint (``:9394`` is every address);
    #: ``off`` serves none.
    metrics_address: str = ":9394"
    #: Ready only while the node annotation was confirmed within this many seconds.
    ready_report_max_age_s: float = Field(default=120.0, gt=0)
    #: Live only while the kubelet loop went round within this many seconds.
    live_stall_s: float = Field(default=60.0, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        """Any case, and ``warn`` for ``warning``, as the extender takes them."""
        if isinstance(value, str):
            level = value.strip().upper()
            return "WARNING" if level == "WARN" else level
        return value

    @field_validator("ignored_xids", mode="before")
    @classmethod
    def _split_xids(cls, value: Any) -> Any:
        """Accept ``"13,31,43"`` from the environment as well as a list."""
        if isinstance(value, str):
            items = [item.strip() for item in value.split(",") if item.strip()]
            try:
                return tuple(int(item) for item in items)
            except ValueError as exc:
                raise ValueError(
                    f"ignored_xids must be comma-separated integers, got {value!r}"
                ) from exc
        return value

    @field_validator("resource_name")
    @classmethod
    def _extended_resource(cls, value: str) -> str:
        domain, slash, name = value.partition("/")
        if not slash or not domain or not name or domain.endswith("kubernetes.io"):
            raise ValueError(
                f"resource_name must be an extended resource like vendor.com/name, got {value!r}"
            )
        return value

    @field_validator("socket_name", "kubelet_socket_name")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if not value or "/" in value or value in (".", ".."):
            raise ValueError(f"a socket name must be a plain file name, got {value!r}")
        return value

    @field_validator("metrics_address")
    @classmethod
    def _address(cls, value: str) -> str:
        if value != METRICS_OFF:
            parse_address(value)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> DevicePluginSettings:
        if self.discovery in STATIC_DISCOVERIES and self.static_file is None:
            raise ValueError(
                f"discovery {self.discovery!r} needs static_file (VGPU_DP_STATIC_FILE)"
            )
        for socket in (self.plugin_socket, self.kubelet_socket):
            if len(str(socket)) > MAX_SOCKET_PATH:
                raise ValueError(
                    f"socket path {str(socket)!r} is longer than {MAX_SOCKET_PATH} bytes; "
                    "use a shorter device_plugin_dir"
                )
        return self

    @property
    def vendor(self) -> str:
        """Whose devices the discovery serves: ``nvidia`` or ``ascend``."""
        return "ascend" if self.discovery in ASCEND_DISCOVERIES else "nvidia"

    @property
    def metrics_bind(self) -> tuple[str, int] | None:
        """Where to serve metrics and probes; None when switched off."""
        if self.metrics_address == METRICS_OFF:
            return None
        return parse_address(self.metrics_address)

    @property
    def plugin_socket(self) -> Path:
        return self.device_plugin_dir / self.socket_name

    @property
    def kubelet_socket(self) -> Path:
        return self.device_plugin_dir / self.kubelet_socket_name
