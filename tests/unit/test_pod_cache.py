"""The pods seen at filter: kept by UID for bind, and by version for prioritize."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.server import pod_json
from vgpu_extender import store
from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.pod_cache import PodCache
from vgpu_extender.services.scheduling import SchedulingService
from vgpu_extender.vendors import Vendor
from vgpu_extender.vendors.registry import create_vendor


def _request(uid: str, memory: int = 1000) -> PodRequest:
    return PodRequest(uid=uid, containers=(ContainerRequest("main", count=1, memory_mib=memory),))


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_request_is_found_by_uid_until_its_time_is_up() -> None:
    clock = _Clock()
    cache = PodCache(max_size=4, ttl_s=10, clock=clock)
    cache.put(_request("a"))
    assert cache.get("a") == _request("a")
    clock.now = 10.5
    assert cache.get("a") is None
    assert len(cache) == 0


def test_the_least_recently_used_goes_first() -> None:
    cache = PodCache(max_size=2, ttl_s=10)
    for uid in ("a", "b", "c"):
        cache.put(_request(uid))
    assert [cache.get(uid) is not None for uid in ("a", "b", "c")] == [False, True, True]


def test_a_version_matches_only_the_version_it_was_parsed_from() -> None:
    cache = PodCache(max_size=4, ttl_s=10)
    cache.put(_request("a"), version="41")
    assert cache.get("a", version="41") == _request("a")
    assert cache.get("a", version="42") is None
    assert cache.get("a", version="") is None  # no version: nothing to compare
    assert cache.get("a") == _request("a")  # bind asks by UID alone
    cache.put(_request("b"))
    assert cache.get("b", version="") is None


@pytest.mark.parametrize("bad", [{"max_size": 0, "ttl_s": 1}, {"max_size": 1, "ttl_s": 0}])
def test_bounds_must_be_positive(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        PodCache(**bad)


class _CountingVendor:
    """The real vendor, counting the pods it parses."""

    def __init__(self, inner: Vendor) -> None:
        self.inner = inner
        self.parsed = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parse_pod(self, pod: Any) -> PodRequest:
        self.parsed += 1
        return self.inner.parse_pod(pod)


@pytest.fixture
def scheduling(tmp_path: Path) -> tuple[SchedulingService, _CountingVendor]:
    vendor = _CountingVendor(create_vendor("nvidia"))
    cluster = ClusterState(vendor=vendor)  # type: ignore[arg-type]
    sessions = store.session_factory(store.make_engine(f"sqlite:///{tmp_path / 's.db'}"))
    inventory = InventoryService(cluster=cluster, sessions=sessions, split_count=10)
    service = SchedulingService(
        cluster=cluster, pod_cache=PodCache(max_size=8, ttl_s=60), inventory=inventory
    )
    return service, vendor


def test_the_same_version_of_a_pod_is_parsed_once(
    scheduling: tuple[SchedulingService, _CountingVendor],
) -> None:
    service, vendor = scheduling
    pod = pod_json("web", mem=2000)
    pod["metadata"]["resourceVersion"] = "7"
    first = service.parse(pod)
    assert service.parse(pod) is first  # prioritize after filter
    assert vendor.parsed == 1

    changed = pod_json("web", mem=3000)
    changed["metadata"]["resourceVersion"] = "8"
    assert service.parse(changed).containers[0].memory_mib == 3000
    assert vendor.parsed == 2


def test_a_pod_without_a_version_is_parsed_every_time(
    scheduling: tuple[SchedulingService, _CountingVendor],
) -> None:
    service, vendor = scheduling
    pod = pod_json("web", mem=2000)
    service.parse(pod)
    service.parse(pod)
    assert vendor.parsed == 2
