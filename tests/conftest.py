"""Shared fixtures: paths to the shared fixtures and data, and the PostgreSQL server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("VGPU_SHARED_DIR", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "kube-scheduler"
OPENB = SHARED / "data" / "openb"
POSTGRES_URL = os.environ.get(
    "VGPU_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"kube-scheduler fixtures not found at {FIXTURES} (set VGPU_SHARED_DIR)")
    return FIXTURES


@pytest.fixture(scope="session")
def openb_dir() -> Path:
    if not OPENB.is_dir():
        pytest.skip(f"openb trace not found at {OPENB} (set VGPU_SHARED_DIR)")
    return OPENB


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The real PostgreSQL server; the test is skipped, loudly, only when none answers."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(POSTGRES_URL)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("select 1"))
    except Exception as exc:  # pragma: no cover - depends on the machine
        import warnings

        warnings.warn(f"PostgreSQL not reachable at {POSTGRES_URL}: {exc}", stacklevel=1)
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_URL}: {exc}")
    finally:
        engine.dispose()
    yield POSTGRES_URL


@pytest.fixture
def fresh_postgres(postgres_url: str) -> Iterator[str]:
    """A database of its own on the PostgreSQL server, dropped after the test, so other
    tests on the same server cannot interfere."""
    import uuid

    import sqlalchemy

    name = f"vgpu_test_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    url = sqlalchemy.engine.make_url(postgres_url).set(database=name)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sqlalchemy.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


pytest_plugins = ["tests.support.fixtures", "tests.support.server"]
