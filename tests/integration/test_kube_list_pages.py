"""``RealKubeClient`` lists a page at a time (``limit`` and ``continue``), over HTTP."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kubernetes.client.exceptions import ApiException

from tests.support.apiserver import FakeApiServer
from tests.support.kube_contract import node, pod
from vgpu_extender.kube import objects, real
from vgpu_extender.kube.errors import KubeError, WatchExpired
from vgpu_extender.kube.list_page import decode_page
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


def _serving_pages(
    monkeypatch: pytest.MonkeyPatch, client: RealKubeClient, pages: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Answer the client's list requests with ``pages`` in turn (the last one again
    after the end); returns the request arguments seen."""
    seen: list[dict[str, Any]] = []

    def call(_context: str, _method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        return pages[min(len(seen), len(pages)) - 1]

    _answer_with(monkeypatch, client, call)
    return seen


def _answer_with(monkeypatch: pytest.MonkeyPatch, client: RealKubeClient, call: Any) -> None:
    """Answer the client's list requests with what ``call`` gives, sent as JSON and
    decoded as an answer is."""

    def call_list(context: str, method: Any, **kwargs: Any) -> dict[str, Any]:
        return decode_page(msgspec.json.encode(call(context, method, **kwargs)), context)

    monkeypatch.setattr(client, "_call_list", call_list)


def _page(items: list[Any], **metadata: Any) -> dict[str, Any]:
    return {"kind": "PodList", "metadata": {"resourceVersion": "5", **metadata}, "items": items}


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        # A last page that says objects remain: the missing pods would read as deleted.
        ([_page([pod("a")], remainingItemCount=900)], "900 objects left"),
        # The same token again and again: paging for ever.
        ([_page([pod("a")], **{"continue": "same"})], "twice"),
        ([_page([pod("a")], **{"continue": 7})], "should be a string"),
        ([_page([pod("a")], **{"continue": {}})], "should be a string"),
        ([_page(["not an object"])], r"Expected `object`, got `str` - at `\$.items\[0\]`"),
    ],
    ids=["cut-short", "token-repeats", "token-number", "token-object", "item-not-object"],
)
def test_a_list_the_server_garbles_is_refused_whole(
    monkeypatch: pytest.MonkeyPatch,
    real_kube: RealKubeClient,
    pages: list[dict[str, Any]],
    message: str,
) -> None:
    _serving_pages(monkeypatch, real_kube, pages)
    with pytest.raises(KubeError, match=message):
        real_kube.list_pods_with_version()


def test_a_server_that_never_stops_paging_is_cut_off(
    monkeypatch: pytest.MonkeyPatch, real_kube: RealKubeClient
) -> None:
    monkeypatch.setattr(real, "MOST_LIST_PAGES", 5)
    tokens = iter(range(1_000_000))

    def call(_context: str, _method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return _page([pod("a")], **{"continue": f"t{next(tokens)}"})

    _answer_with(monkeypatch, real_kube, call)
    with pytest.raises(KubeError, match="more than 5 pages"):
        real_kube.list_pods_with_version()


def test_a_last_page_with_nothing_left_ends_the_list(
    monkeypatch: pytest.MonkeyPatch, real_kube: RealKubeClient
) -> None:
    pages = [
        _page([pod("a")], **{"continue": "t1"}),
        _page([pod("b")], remainingItemCount=0),
    ]
    seen = _serving_pages(monkeypatch, real_kube, pages)
    listing = real_kube.list_pods_with_version()
    assert [objects.name(item) for item in listing.items] == ["a", "b"]
    assert [kwargs.get("_continue") for kwargs in seen] == [None, "t1"]


def test_a_list_whose_snapshot_expires_midway_is_listed_again_in_one_request(
    apiserver: FakeApiServer, real_kube: RealKubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # client-go's pager does the same: paging again could expire again, and again.
    names = [f"pod-{i:02d}" for i in range(3 * PAGE)]
    for name in names:
        apiserver.add_pod(pod(name))
    calls: list[dict[str, Any]] = []
    original = real_kube._core.list_pod_for_all_namespaces

    def list_pods(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        if len(calls) == 2:  # after the first page: the snapshot is compacted away
            apiserver.add_pod(pod("pod-late"))
            apiserver.compact()
        return original(*args, **kwargs)

    monkeypatch.setattr(real_kube._core, "list_pod_for_all_namespaces", list_pods)

    listing = real_kube.list_pods_with_version()

    assert sorted(objects.name(p) for p in listing.items) == sorted([*names, "pod-late"])
    assert listing.resource_version == apiserver.cluster.resource_version
    assert [("limit" in c, "_continue" in c) for c in calls] == [
        (True, False),
        (True, True),  # answered 410 Expired
        (False, False),  # everything at once
    ]


def test_the_test_server_answers_an_expired_continue_token_as_the_real_one(
    apiserver: FakeApiServer, real_kube: RealKubeClient
) -> None:
    for i in range(2 * PAGE):
        apiserver.add_pod(pod(f"pod-{i:02d}"))
    first = real_kube._core.list_pod_for_all_namespaces(limit=PAGE)
    apiserver.add_pod(pod("pod-late"))
    apiserver.compact()  # the first page's snapshot is gone
    with pytest.raises(ApiException) as raised:
        real_kube._core.list_pod_for_all_namespaces(limit=PAGE, _continue=first.metadata._continue)
    assert raised.value.status == 410
    assert "too old to display a consistent list" in raised.value.body


def test_an_expiry_on_the_first_page_is_the_callers_to_handle(
    monkeypatch: pytest.MonkeyPatch, real_kube: RealKubeClient
) -> None:
    def call(_context: str, _method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise WatchExpired("too old resource version", status=410, reason="Expired")

    _answer_with(monkeypatch, real_kube, call)
    with pytest.raises(WatchExpired):
        real_kube.list_pods_with_version()


def test_a_list_asked_for_whole_that_comes_paged_is_refused(
    monkeypatch: pytest.MonkeyPatch, real_kube: RealKubeClient
) -> None:
    seen: list[dict[str, Any]] = []

    def call(_context: str, _method: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        if len(seen) == 2:
            raise WatchExpired("continue token expired", status=410, reason="Expired")
        return _page([pod(f"p{len(seen)}")], **{"continue": "more"})

    _answer_with(monkeypatch, real_kube, call)
    with pytest.raises(KubeError, match="paged a list asked for whole"):
        real_kube.list_pods_with_version()
    assert "limit" not in seen[-1]  # the third request asked for everything
