"""Fixtures for tests that need a Kubernetes API server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

# The shared contract suite lives outside test files; rewrite its asserts for clear failures.
pytest.register_assert_rewrite("tests.support.kube_contract")

from tests.support.apiserver import FakeApiServer  # noqa: E402
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
