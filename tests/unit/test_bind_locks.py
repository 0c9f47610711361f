"""The node locks a bind takes (``bind_locks``), against the in-memory Kubernetes client:
which vendors lock and in which order, Cambricon's own lock by HAMi's rules, and the
rollback of what was taken when a later lock is refused."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from vgpu_extender.domain import ContainerRequest, PodRequest
from vgpu_extender.kube import LOCK_ANNOTATION, Conflict, NodeLock, NodeLockContention, objects
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.bind_locks import BindLocks, lock_order, vendor_lock
from vgpu_extender.vendors import VendorSet
from vgpu_extender.vendors.cambricon import CambriconVendor
from vgpu_extender.vendors.hami_vendor import VendorNames
from vgpu_extender.vendors.registry import create_vendor_set

NOW = datetime(2026, 8, 1, 6, 0, 0, tzinfo=UTC)
MLU_LOCK = "cambricon.com/dsmlu.lock"
NODE = "n1"
VENDORS = create_vendor_set("nvidia,cambricon,mthreads,hygon,metax")


def _ask(vendor: str, *, init: bool = False, count: int = 1) -> ContainerRequest:
    return ContainerRequest(f"{vendor}-ctr", count=count, memory_mib=100, init=init, vendor=vendor)


def _pod(*containers: ContainerRequest, uid: str = "u1") -> PodRequest:
    return PodRequest(uid, namespace="default", name="web", containers=containers)


def _both() -> PodRequest:
    """One app container asking NVIDIA and Cambricon at once."""
    return _pod(
        ContainerRequest("main", count=1, memory_mib=100, vendor="NVIDIA", also=(_ask("MLU"),))
    )


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def kube() -> FakeKubeClient:
    client = FakeKubeClient(clock=lambda: NOW)
    client.add_node({"metadata": {"name": NODE}})
    return client


def _locks(kube: FakeKubeClient, vendors: VendorSet = VENDORS) -> BindLocks:
    shared = NodeLock(kube, clock=lambda: NOW, sleep=lambda _s: None)
    return BindLocks(shared, vendors)


def _annotations(kube: FakeKubeClient) -> dict[str, str]:
    node = kube.get_node(NODE)
    assert node is not None
    return dict(objects.annotations(node))


def _lock_node(kube: FakeKubeClient, **annotations: str) -> None:
    kube.add_node({"metadata": {"name": NODE, "annotations": annotations}})


# ----------------------------------------------------------------- which and in what order
@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (_both(), (MLU_LOCK, LOCK_ANNOTATION)),  # "MLU" sorts before "NVIDIA"
        (_pod(_ask("NVIDIA"), _ask("DCU")), (LOCK_ANNOTATION,)),  # shared, taken once
        (_pod(_ask("DCU"), _ask("MLU")), (LOCK_ANNOTATION, MLU_LOCK)),  # "DCU" < "MLU"
        (_pod(_ask("MLU", init=True), _ask("NVIDIA")), (LOCK_ANNOTATION,)),  # init: not looked at
        (_pod(_ask("Mthreads"), _ask("Metax-GPU")), ()),  # vendors that take none
        (_pod(_ask("Metax-SGPU")), (LOCK_ANNOTATION,)),
        (_pod(_ask("MLU", count=0)), ()),
    ],
    ids=["nvidia+mlu", "nvidia+dcu", "dcu+mlu", "mlu-in-init", "no-lock-vendors", "sgpu", "none"],
)
def test_lock_order_is_hamis(request_: PodRequest, expected: tuple[str, ...]) -> None:
    assert lock_order(VENDORS, request_) == expected


def test_a_single_vendors_untagged_ask_is_the_vendors() -> None:
    only = VendorSet((CambriconVendor(),))
    untagged = _pod(ContainerRequest("main", count=1, memory_mib=256))
    assert lock_order(only, untagged) == (MLU_LOCK,)


def test_vendor_locks_are_the_declared_ones() -> None:
    locks = {vendor.name: vendor_lock(vendor) for vendor in VENDORS.members}
    assert locks == {
        "NVIDIA": LOCK_ANNOTATION,
        "MLU": MLU_LOCK,
        "Mthreads": None,
        "DCU": LOCK_ANNOTATION,
        "Metax-GPU": None,
        "Metax-SGPU": LOCK_ANNOTATION,
    }


class _OtherLock(CambriconVendor):
    """Cambricon, naming a lock of its own that bind has no rule for."""

    @property
    def names(self) -> VendorNames:
        return replace(super().names, node_lock="example.com/lock")


def test_a_lock_without_a_rule_is_refused_at_start(kube: FakeKubeClient) -> None:
    with pytest.raises(ValueError, match=r"vendor MLU locks node annotation 'example.com/lock'"):
        _locks(kube, VendorSet((_OtherLock(),)))


# ----------------------------------------------------------------- taking and releasing
def test_a_pod_of_nvidia_and_cambricon_takes_both_keys(kube: FakeKubeClient) -> None:
    held = _locks(kube).acquire(NODE, "default", "web", _both())
    assert _annotations(kube) == {
        MLU_LOCK: _ts(NOW),
        LOCK_ANNOTATION: f"{_ts(NOW)},default,web",
    }
    assert [key for key, _ in held.taken] == [MLU_LOCK, LOCK_ANNOTATION]
    _locks(kube).release(held)
    assert _annotations(kube) == {}


def test_a_fresh_cambricon_lock_refuses_and_nothing_is_taken(kube: FakeKubeClient) -> None:
    fresh = _ts(NOW - timedelta(minutes=1, seconds=59))
    _lock_node(kube, **{MLU_LOCK: fresh})
    with pytest.raises(NodeLockContention) as refused:
        _locks(kube).acquire(NODE, "default", "web", _both())
    assert str(refused.value) == (
        f"node {NODE} has been locked within 2 minutes ({MLU_LOCK} taken at {fresh}): "
        "node lock contention"
    )
    assert _annotations(kube) == {MLU_LOCK: fresh}  # the shared lock was never tried


def test_an_expired_cambricon_lock_is_taken_over(kube: FakeKubeClient) -> None:
    _lock_node(kube, **{MLU_LOCK: _ts(NOW - timedelta(minutes=3))})
    _locks(kube).acquire(NODE, "default", "web", _pod(_ask("MLU")))
    assert _annotations(kube) == {MLU_LOCK: _ts(NOW)}


def test_an_unreadable_cambricon_lock_refuses_naming_it(kube: FakeKubeClient) -> None:
    _lock_node(kube, **{MLU_LOCK: "test123"})
    with pytest.raises(NodeLockContention, match=r"'test123', which is not an RFC3339 time"):
        _locks(kube).acquire(NODE, "default", "web", _pod(_ask("MLU")))


def test_a_refused_later_lock_rolls_back_the_earlier(kube: FakeKubeClient) -> None:
    # Another live pod holds the shared lock: Cambricon's (taken first) is given back.
    kube.add_pod({"metadata": {"name": "other", "namespace": "default"}})
    theirs = f"{_ts(NOW)},default,other"
    _lock_node(kube, **{LOCK_ANNOTATION: theirs})
    with pytest.raises(NodeLockContention, match="locked by default/other"):
        _locks(kube).acquire(NODE, "default", "web", _both())
    assert _annotations(kube) == {LOCK_ANNOTATION: theirs}
    assert kube.calls.count("patch_node_annotations") == 2  # taken, then released


def test_release_leaves_a_lock_another_bind_took_over(kube: FakeKubeClient) -> None:
    locks = _locks(kube)
    held = locks.acquire(NODE, "default", "web", _pod(_ask("MLU")))
    later = _ts(NOW + timedelta(minutes=3))
    kube.cluster.patch("nodes", "", NODE, {"metadata": {"annotations": {MLU_LOCK: later}}})
    locks.release(held)
    assert _annotations(kube) == {MLU_LOCK: later}


def test_a_lost_race_is_retried_on_the_node_read_again(kube: FakeKubeClient) -> None:
    kube.fail_next("patch_node_annotations", Conflict("the object has been modified", status=409))
    _locks(kube).acquire(NODE, "default", "web", _pod(_ask("MLU")))
    assert kube.calls == ["get_node", "patch_node_annotations"] * 2
    assert _annotations(kube) == {MLU_LOCK: _ts(NOW)}


def test_every_race_lost_refuses(kube: FakeKubeClient) -> None:
    kube.fail_next("patch_node_annotations", Conflict("modified", status=409), times=5)
    with pytest.raises(NodeLockContention, match=rf"lost the race for {MLU_LOCK} 5 times"):
        _locks(kube).acquire(NODE, "default", "web", _pod(_ask("MLU")))


def test_a_pod_of_lockless_vendors_writes_nothing(kube: FakeKubeClient) -> None:
    held = _locks(kube).acquire(NODE, "default", "web", _pod(_ask("Mthreads")))
    assert held.taken == ()
    assert "patch_node_annotations" not in kube.calls
