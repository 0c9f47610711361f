"""Fixtures for tests that need a Kubernetes API server, or a store of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

# The shared contract suite lives outside test files; rewrite its asserts for clear failures.
pytest.register_assert_rewrite("tests.support.kube_contract")

from tests.support.apiserver import FakeApiServer  # noqa: E402
from vgpu_extender import store  # noqa: E402
from vgpu_extender.kube.real import RealKubeClient  # noqa: E402


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    """A fresh Kubernetes-API-compatible server on 127.0.0.1, stopped after the test."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def real_kube(apiserver: FakeApiServer) -> Iterator[RealKubeClient]:
    """The real client, talking HTTP to ``apiserver``."""
    kube = RealKubeClient.from_configuration(apiserver.configuration())
    try:
        yield kube
    finally:
        kube.close()


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """Sessions on a migrated SQLite store in the test's folder (a module may define
    its own ``sessions`` on another store)."""
    engine = store.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate(engine)
    yield store.session_factory(engine)
    engine.dispose()
