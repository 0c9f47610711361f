"""A PostgreSQL primary and a streaming standby on 127.0.0.1, for failover tests.

Both servers are made with the server's own tools (``initdb`` for the primary,
``pg_basebackup -R`` for the standby) in one temporary folder, on free ports, so
nothing outside that folder changes and ``close()`` removes every trace. Replication
is synchronous (``synchronous_standby_names = '*'``, ``synchronous_commit = on``): a
commit is answered only once the standby has it, so a failover loses no answered
commit. The standby is made with that setting cleared, or once promoted, with no
standby of its own, it would wait for one on every commit.

The servers run as the ``postgres`` user when the tests run as root (PostgreSQL
refuses to run as root), as the current user otherwise. Binaries are looked up in
``VGPU_TEST_PG_BINDIR``, then ``pg_config --bindir``, then Debian's
``/usr/lib/postgresql/<version>/bin``, then ``PATH``; ``find_bindir`` returns None,
and ``missing_reason`` says why, when none is found.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres", "psql")
START_TIMEOUT_S = 30


def find_bindir() -> Path | None:
    """The folder holding the PostgreSQL server tools, or None."""
    candidates: list[Path] = []
    if os.environ.get("VGPU_TEST_PG_BINDIR"):
        candidates.append(Path(os.environ["VGPU_TEST_PG_BINDIR"]))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
            candidates.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass
    debian = Path("/usr/lib/postgresql")
    if debian.is_dir():
        versions = [p for p in debian.iterdir() if p.name.isdigit()]
        candidates += [p / "bin" for p in sorted(versions, key=lambda p: -int(p.name))]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for folder in candidates:
        if all((folder / tool).is_file() for tool in TOOLS):
            return folder
    return None


def missing_reason() -> str:
    """Why the servers cannot be made here; empty when they can."""
    if find_bindir() is None:
        return (
            f"PostgreSQL server binaries ({', '.join(TOOLS)}) not found: set "
            "VGPU_TEST_PG_BINDIR or install the server (Debian: postgresql)"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
    return ""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class ClusterError(RuntimeError):
    """A server tool failed; the message carries its output and the server's log."""


@dataclass
class Server:
    name: str
    data: Path
    port: int
    log: Path

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class PrimaryStandby:
    """``start()`` makes and starts both servers; ``close()`` stops them and removes
    their folder (safe to call at any point, and more than once)."""

    def __init__(self, database: str = "vgpu") -> None:
        bindir = find_bindir()
        if bindir is None:
            raise ClusterError(missing_reason())
        self.bindir = bindir
        self.database = database
        self.root = Path(tempfile.mkdtemp(prefix="vgpu-pg-"))
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self.primary = Server(
            "primary", self.root / "primary", free_port(), self.root / "primary.log"
        )
        self.standby = Server(
            "standby", self.root / "standby", free_port(), self.root / "standby.log"
        )

    # ------------------------------------------------------------------ life cycle
    def start(self) -> None:
        self._tool(
            "initdb",
            "-D",
            str(self.primary.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        )
        # Synchronous only once the standby is there: until then every commit would wait.
        self._configure(self.primary, synchronous=False)
        (self.primary.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "host all all 127.0.0.1/32 trust\n"
            "local replication all trust\n"
            "host replication all 127.0.0.1/32 trust\n"
        )
        self._start(self.primary)
        self.psql(self.primary, f'CREATE DATABASE "{self.database}"', database="postgres")
        self._tool(
            "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-D",
            str(self.standby.data),
            "-R",
            "-X",
            "stream",
            "--checkpoint=fast",
            "--no-sync",
        )
        self._configure(self.standby, synchronous=False)
        self._start(self.standby)
        self.psql(
            self.primary, "ALTER SYSTEM SET synchronous_standby_names = '*'", database="postgres"
        )
        self.psql(self.primary, "SELECT pg_reload_conf()", database="postgres")
        self._wait_sync()

    def close(self) -> None:
        for server in (self.standby, self.primary):
            if (server.data / "postmaster.pid").exists():
                self._tool(
                    "pg_ctl", "-D", str(server.data), "stop", "-m", "immediate", "-w", check=False
                )
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrimaryStandby:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ failover
    def kill_primary(self) -> None:
        """Stop the primary at once, as a crash would (no shutdown checkpoint)."""
        self._tool("pg_ctl", "-D", str(self.primary.data), "stop", "-m", "immediate", "-w")

    def promote_standby(self) -> None:
        """Make the standby the primary; returns once it accepts writes."""
        self._tool(
            "pg_ctl", "-D", str(self.standby.data), "promote", "-w", "-t", str(START_TIMEOUT_S)
        )

    # ------------------------------------------------------------------ access
    def url(self, *, database: str | None = None) -> str:
        """A libpq multi-host URL naming both servers, for whichever is the primary."""
        return (
            f"postgresql+psycopg://postgres@/{database or self.database}"
            f"?host=127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            "&target_session_attrs=read-write"
        )

    def server_url(self, server: Server, *, database: str | None = None) -> str:
        """A URL for one server alone."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/{database or self.database}"

    def psql(self, server: Server, sql: str, *, database: str | None = None) -> str:
        """Run ``sql`` on ``server``; its unaligned, tuples-only output."""
        return self._tool(
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            str(server.port),
            "-U",
            "postgres",
            "-d",
            database or self.database,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        )

    # ------------------------------------------------------------------ helpers
    def _configure(self, server: Server, *, synchronous: bool) -> None:
        # fsync off: the test crashes processes, never the machine, so the page cache
        # keeps what was written; durability across failover is the replication's.
        settings = {
            "port": str(server.port),
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self.root}'",
            "cluster_name": f"'{server.name}'",
            "wal_level": "replica",
            "max_wal_senders": "5",
            "hot_standby": "on",
            "fsync": "off",
            "full_page_writes": "off",
            "synchronous_commit": "on",
            "synchronous_standby_names": "'*'" if synchronous else "''",
            "max_connections": "100",
            "shared_buffers": "32MB",
            "logging_collector": "off",
        }
        with (server.data / "postgresql.auto.conf").open("a", encoding="utf-8") as conf:
            conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))

    def _start(self, server: Server) -> None:
        self._tool(
            "pg_ctl",
            "-D",
            str(server.data),
            "-l",
            str(server.log),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
            server=server,
        )

    def _wait_sync(self) -> None:
        """Until the primary sees the standby streaming as its synchronous standby."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            state = self.psql(
                self.primary, "SELECT sync_state FROM pg_stat_replication", database="postgres"
            )
            if state.strip() == "sync":
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"standby not streaming synchronously (state {state!r}):\n"
                    f"{self.standby.log_tail()}"
                )
            time.sleep(0.1)

    def _tool(self, tool: str, *args: str, check: bool = True, server: Server | None = None) -> str:
        command = [str(self.bindir / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S * 2,
            cwd=self.root,
            env={**os.environ, "PGCONNECT_TIMEOUT": "5"},
        )
        if check and result.returncode != 0:
            log = f"\n{server.name} log:\n{server.log_tail()}" if server else ""
            raise ClusterError(
                f"{tool} {' '.join(args)} exited with {result.returncode}:\n"
                f"{result.stdout}{result.stderr}{log}"
            )
        return result.stdout
