"""``RealKubeClient`` lists a page at a time (``limit`` and ``continue``), over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.apiserver import FakeApiServer
from tests.support.kube_contract import node, pod
from vgpu_extender.kube import objects, real
from vgpu_extender.kube.real import RealKubeClient

PAGE = 7


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(real, "LIST_PAGE", PAGE)


def _list_requests(apiserver: FakeApiServer, path: str) -> int:
    return sum(1 for method, seen in apiserver.requests if (method, seen) == ("GET", path))


def test_every_pod_comes_once_in_key_order_over_several_pages(
    apiserver: FakeApiServer, real_kube: RealKubeClient
) -> None:
    names = [f"pod-{i:02d}" for i in range(3 * PAGE + 2)]
    for name in reversed(names):
        apiserver.add_pod(pod(name, namespace="team-b" if name.endswith("1") else "default"))
    version = apiserver.cluster.resource_version

    listing = real_kube.list_pods_with_version()

    keys = [(objects.namespace(p), objects.name(p)) for p in listing.items]
    assert keys == sorted(keys)
    assert sorted(name for _ns, name in keys) == names
    assert listing.resource_version == version
    assert _list_requests(apiserver, "/api/v1/pods") == 4  # 7 + 7 + 7 + 2


def test_the_listing_keeps_the_first_pages_version_when_objects_change_meanwhile(
    apiserver: FakeApiServer, real_kube: RealKubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(2 * PAGE):
        apiserver.add_node(node(f"node-{i:02d}"))
    version = apiserver.cluster.resource_version
    calls = 0
    original = real_kube._core.list_node

    def list_node(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # between the first page and the second
            apiserver.add_node(node("node-zz"))
        return original(*args, **kwargs)

    monkeypatch.setattr(real_kube._core, "list_node", list_node)

    listing = real_kube.list_nodes_with_version()

    # A watch from the listing's version replays the node added meanwhile.
    assert listing.resource_version == version
    assert [objects.name(n) for n in listing.items][: 2 * PAGE] == [
        f"node-{i:02d}" for i in range(2 * PAGE)
    ]
    assert calls == 3


def test_a_single_page_is_one_request(apiserver: FakeApiServer, real_kube: RealKubeClient) -> None:
    for i in range(PAGE):
        apiserver.add_pod(pod(f"pod-{i}"))

    assert len(real_kube.list_pods_with_version().items) == PAGE
    assert _list_requests(apiserver, "/api/v1/pods") == 1
