"""The extender's settings: environment variables prefixed ``VGPU_``, mirrored by CLI flags.

Built by the CLI or by a test and handed to ``create_app``; nothing reads the
environment at import time. Bad values fail at start-up, naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from vgpu_extender.policies import BUILTIN as BUILTIN_POLICIES
from vgpu_extender.policies.label_priority import DEFAULT_LABEL
from vgpu_extender.redaction import hide_passwords

#: kube-scheduler's default extender timeout is 5 s; HAMi's deployment uses 30 s.
DEFAULT_RESERVATION_TTL_S = 120.0


class Settings(BaseSettings):
    """Everything the extender can be told."""

    # hide_input_in_errors: a ValidationError printed as is (a traceback) must not
    # carry a value such as the database URL's password; the CLI shows the values
    # with the secrets hidden (startup_errors).
    model_config = SettingsConfigDict(
        env_prefix="VGPU_",
        env_ignore_empty=True,
        extra="ignore",
        populate_by_name=True,
        hide_input_in_errors=True,
    )

    # Listening.
    host: str = "127.0.0.1"
    port: int = Field(default=8888, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: How often the certificate and key files are checked; a renewed pair is served
    #: to new connections within this, without a restart.
    tls_reload_interval_s: float = Field(default=10.0, gt=0, le=3600)
    #: A second listener for the admin API, the webhook and gpushare's inspect (and
    #: ``/metrics`` unless ``metrics_port`` is set); the main port then serves only the
    #: scheduler verbs and health, so it need not be reachable from the cluster.
    #: Unset: everything on ``port``, as before.
    admin_port: int | None = Field(default=None, ge=1, le=65535)
    #: Where the admin listener binds; unset: ``host``.
    admin_host: str | None = None
    #: A listener of its own for ``/metrics`` (and health), e.g. for Prometheus.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    #: Where the metrics listener binds; unset: ``host``.
    metrics_host: str | None = None
    #: Answer the scheduler verbs only to loopback clients (127.0.0.0/8, ::1,
    #: ::ffff:127.0.0.1): kube-scheduler calls its extender over loopback in the deploy.
    verbs_localhost_only: bool = True
    #: Bodies larger than this are refused with a clear ``Error`` (non-cache mode at
    #: 5,000 nodes is about 20 MB).
    max_body_bytes: int = Field(default=64 * 2**20, gt=0)
    #: A request's head (request line and headers) must be in this long after the
    #: connection opened or the request's first byte came, else the connection is
    #: closed: silent and trickling clients do not hold a connection.
    header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    #: A request's body must be in this long after its head.
    body_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    #: An idle keep-alive connection is closed after this. Longer than the 90 s a Go
    #: client (kube-scheduler) keeps one idle, so the client closes first and never
    #: sends on a connection being closed.
    keepalive_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    #: Client connections open at once, on all listeners together; past it, 503 at
    #: once. Unset: 4,096, or less if the open-file limit leaves less.
    max_connections: int | None = Field(default=None, ge=1)
    #: Connections one client address may hold open at once; past it, 503.
    max_connections_per_client: int = Field(default=256, ge=1)
    #: Connections from 127.0.0.1 and ::1 (kube-scheduler in the same Pod) admitted past
    #: ``max_connections``, so other clients filling it never lock the scheduler out.
    loopback_headroom: int = Field(default=64, ge=1)

    # State.
    database_url: str = "sqlite:///vgpu-extender.db"
    migrate_on_start: bool = True
    #: Store connections kept open (as many more are opened for peaks). Each bind in
    #: flight holds one while it writes, so this covers the bind workers and the rest.
    database_pool_size: int = Field(default=40, ge=1, le=1000)
    #: How often the store is probed (``SELECT 1``) for readiness. ``/readyz`` fails
    #: after ``store_unready_after`` failures in a row (probes, or any request's), and
    #: passes again only after ``store_ready_after`` good probes in a row.
    store_probe_interval_s: float = Field(default=2.0, gt=0, le=3600)
    store_unready_after: int = Field(default=3, ge=1, le=1000)
    store_ready_after: int = Field(default=3, ge=1, le=1000)
    #: How long start-up keeps trying to reach a PostgreSQL server that is not there
    #: (exponential backoff with jitter) before it gives up; 0: one try.
    database_startup_timeout_s: float = Field(default=30.0, ge=0, le=3600)

    # Placement.
    vendor: str = "nvidia"
    #: Vendor settings by field name (resource names, annotation keys), e.g.
    #: ``{"count_resource": "example.com/gpu"}``; JSON in ``VGPU_VENDOR_OPTIONS``.
    vendor_options: dict[str, Any] = Field(default_factory=dict)
    node_policy: str = "binpack"
    device_policy: str = "spread"
    fallback_policy: str = "label-priority"
    require_label: bool = False
    priority_label: str = DEFAULT_LABEL
    default_memory_mib: int = Field(default=0, ge=0, le=2**31 - 1)
    default_cores: int = Field(default=0, ge=0, le=100)
    split_count: int = Field(default=10, ge=1, le=1000)

    # Caches and lifetimes.
    filter_cache_ttl_s: float = Field(default=600.0, gt=0)
    filter_cache_size: int = Field(default=10_000, ge=1)
    reservation_ttl_s: float = Field(default=DEFAULT_RESERVATION_TTL_S, ge=0)
    #: The longest a live replica's bind holds a reservation before its Binding shows on
    #: the pod (the Binding's timeout and the read-back window, with room to spare). At
    #: start-up, reservations an earlier process left are settled at once when older than
    #: this, and the moment they reach it otherwise: a younger one may be another
    #: replica's bind still under way. Readiness waits for them.
    reservation_in_flight_s: float = Field(default=30.0, ge=0)
    reconcile_interval_s: float = Field(default=60.0, gt=0)

    # Kubernetes.
    #: ``auto``: in-cluster config, else a kubeconfig, else standalone. ``off``: standalone.
    kube_mode: Literal["auto", "off"] = "auto"
    kubeconfig: Path | None = None
    scheduler_name: str = "vgpu-scheduler"
    hami_node_lock: bool = False
    node_lock_timeout_s: float = Field(default=300.0, gt=0)
    bind_retries: int = Field(default=3, ge=1, le=20)
    #: Binds doing their I/O (store, API server) at once, each on a thread of its own;
    #: more wait their turn. Each thread competes with filter and prioritize for the
    #: interpreter lock, so more than the binds in flight need costs cycles per second;
    #: raise it when the API server is slow (8 binds at 20 ms each: 400 binds/s).
    #: ``database_pool_size`` must be at least this.
    bind_workers: int = Field(default=8, ge=1, le=256)
    #: Also record a ``BindingSucceed`` Event per bound pod, as HAMi does. Off by
    #: default: kube-scheduler records its own ``Scheduled`` Event for every pod an
    #: extender binds, so this doubles the Event writes for no new fact. Failures are
    #: always recorded.
    bind_success_events: bool = False
    #: After a Binding whose answer was lost (a 504, a connection closed or a read
    #: timeout once it was sent), how long the bind keeps reading the pod back while it
    #: shows unbound, since the Binding may still land, before it gives the devices back.
    #: At most 10 s: with the Binding's 15 s read timeout it stays under kube-scheduler's
    #: 30 s ``httpTimeout``.
    bind_check_window_s: float = Field(default=5.0, ge=0, le=10)
    #: Hold a coordination.k8s.io Lease; /readyz is ready only while this replica leads.
    leader_elect: bool = False
    leader_lease_name: str = Field(default="vgpu-extender", min_length=1)
    leader_lease_namespace: str = Field(default="vgpu-system", min_length=1)
    #: Who this replica is in the Lease (the Pod name); empty: the host name.
    leader_identity: str = ""
    leader_lease_duration_s: int = Field(default=15, ge=1, le=3600)

    # Administration.
    admin_token: SecretStr | None = None
    #: Serve the reads (admin API, gpushare inspect, /metrics) to anyone. Off: they
    #: need the token when one is configured, and come from loopback only when none is.
    open_reads: bool = False

    # Standalone inventory.
    demo: bool = False
    inventory_file: Path | None = None

    #: Any case: debug, info, warning, error or critical.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    #: ``text`` lines, or ``json``: one object per line (ours and uvicorn's).
    log_format: Literal["text", "json"] = "text"

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, value: object) -> object:
        from vgpu_extender.log_format import parse_level

        if isinstance(value, str):
            try:
                return parse_level(value)
            except ValueError:
                return value  # the Literal's own error lists the levels
        return value

    @field_validator("log_format", mode="before")
    @classmethod
    def _format_any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("node_policy", "device_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in BUILTIN_POLICIES:
            known = ", ".join(sorted(BUILTIN_POLICIES))
            raise ValueError(f"unknown policy {value!r}; known: {known}")
        return value

    @field_validator("fallback_policy")
    @classmethod
    def _known_fallback(cls, value: str) -> str:
        if value and value not in BUILTIN_POLICIES:
            known = ", ".join(sorted(BUILTIN_POLICIES))
            raise ValueError(f"unknown fallback policy {value!r}; known: {known} or ''")
        return value

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        from vgpu_extender.store import StoreInputError, parse_url

        try:
            parse_url(value)
        except StoreInputError as exc:
            raise ValueError(hide_passwords(str(exc))) from None
        return value

    @field_validator("inventory_file", "tls_cert", "tls_key", "kubeconfig")
    @classmethod
    def _existing_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {str(value)!r}")
        return value

    @model_validator(mode="after")
    def _tls_pair(self) -> Settings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        return self

    @model_validator(mode="after")
    def _distinct_ports(self) -> Settings:
        # Each listener is told apart by its port, so no two may share one.
        named: dict[str, int | None] = {
            "port": self.port,
            "admin_port": self.admin_port,
            "metrics_port": self.metrics_port,
        }
        seen: dict[int, str] = {}
        for name, value in named.items():
            if value is None or value == 0:
                continue
            if value in seen:
                raise ValueError(f"{name} ({value}) must differ from {seen[value]} ({value})")
            seen[value] = name
        return self

    @model_validator(mode="after")
    def _pool_covers_binds(self) -> Settings:
        if self.database_pool_size < self.bind_workers:
            raise ValueError(
                f"database_pool_size ({self.database_pool_size}) must be at least "
                f"bind_workers ({self.bind_workers}): each bind in flight holds a connection"
            )
        return self

    @property
    def standalone(self) -> bool:
        """No Kubernetes: the demo always runs without a cluster."""
        return self.demo or self.kube_mode == "off"

    @property
    def vendor_names(self) -> tuple[str, ...]:
        """The vendors ``vendor`` names, comma-separated (``nvidia,ascend``), in order."""
        return tuple(part.strip().lower() for part in self.vendor.split(",") if part.strip())

    def vendor_config(self, name: str | None = None) -> dict[str, Any]:
        """One vendor's settings (the first's by default). NVIDIA's start from the request
        defaults here. ``vendor_options`` keys that name a listed vendor hold that
        vendor's own options (``{"ascend": {"vnpus": ...}}``); the other keys are the
        first vendor's, as with one vendor."""
        names = self.vendor_names
        name = (name or (names[0] if names else self.vendor)).strip().lower()
        config: dict[str, Any] = {}
        if name == "nvidia":
            config.update(
                default_memory_mib=self.default_memory_mib,
                default_cores=self.default_cores,
                split_count=self.split_count,
            )
        if names and name == names[0]:
            config.update({k: v for k, v in self.vendor_options.items() if k not in names})
        section = self.vendor_options.get(name)
        if isinstance(section, dict):
            config.update(section)
        return config
