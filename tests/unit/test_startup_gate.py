"""The first sync with Kubernetes runs in the background, and the verbs that place pods
wait for it (``Runtime.not_serving``); the listed nodes are written a batch at a time
(``InventoryService.observe_listing``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.support.server import node_json, standalone_settings
from tests.support.waiting import eventually
from vgpu_extender import store
from vgpu_extender.kube.client import Listing, Pace
from vgpu_extender.kube.fake import FakeKubeClient
from vgpu_extender.services.cluster import ClusterState
from vgpu_extender.services.inventory import InventoryService
from vgpu_extender.services.runtime import Runtime
from vgpu_extender.services.sync import FirstSync, node_view
from vgpu_extender.vendors import create_vendor_set

STARTING = "the extender is starting: its first sync with the Kubernetes API is not done"


class HeldPods(FakeKubeClient):
    """A fake API whose pod lists wait until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.waiting = threading.Event()

    def list_pods_with_version(
        self, *, node: str | None = None, pace: Pace | None = None
    ) -> Listing:
        self.waiting.set()
        assert self.release.wait(10.0), "never released"
        return super().list_pods_with_version(node=node, pace=pace)


@pytest.fixture
def kube() -> Iterator[HeldPods]:
    kube = HeldPods()
    for i in range(3):
        kube.add_node(node_json(f"gpu-{i}"))
    yield kube
    kube.release.set()


@pytest.fixture
def runtime(tmp_path: Path, kube: HeldPods) -> Iterator[Runtime]:
    runtime = Runtime.build(standalone_settings(tmp_path), kube=kube)
    yield runtime
    runtime.stop()


def test_pods_are_not_placed_until_the_first_sync_is_done(runtime: Runtime, kube: HeldPods) -> None:
    sync = runtime.sync
    assert sync is not None
    heard: list[str] = []
    sync.when_synced(lambda: heard.append("before"))
    runtime.start()  # returns with the pod list still held
    assert kube.waiting.wait(10.0)
    assert not sync.synced
    assert runtime.not_serving() == f"{STARTING} (3 nodes done, reconciling the pods)"
    assert heard == []
    kube.release.set()
    eventually(lambda: sync.synced, "the first sync done")
    assert runtime.not_serving() == ""
    sync.when_synced(lambda: heard.append("after"))  # already done: at once
    assert heard == ["before", "after"]
    with runtime.cluster.lock:
        assert sorted(runtime.cluster.index.node_names()) == ["gpu-0", "gpu-1", "gpu-2"]


def test_standalone_places_pods_at_once(tmp_path: Path) -> None:
    runtime = Runtime.build(standalone_settings(tmp_path))
    try:
        runtime.start()
        assert runtime.sync is None and runtime.not_serving() == ""
    finally:
        runtime.stop()


@pytest.mark.parametrize(
    ("progress", "words"),
    [
        (FirstSync(), "listing the nodes"),
        (FirstSync(nodes_listed=10_000, nodes_done=250), "250 of 10000 nodes"),
        (FirstSync(nodes_listed=10, nodes_done=10, pods=True), "10 nodes done, reconciling"),
        (FirstSync(nodes_listed=10, nodes_done=10, pods=True, done=True), "done"),
    ],
)
def test_the_progress_in_words(progress: FirstSync, words: str) -> None:
    assert progress.describe().startswith(words)
    assert "%" not in progress.describe()


# ----------------------------------------------------------------- the listing, batched
@pytest.fixture
def cluster() -> ClusterState:
    return ClusterState(vendor=create_vendor_set("nvidia"))


@pytest.fixture
def inventory(cluster: ClusterState, sessions: sessionmaker[Session]) -> Iterator[InventoryService]:
    service = InventoryService(cluster=cluster, sessions=sessions, split_count=10)
    yield service
    service.stop()


def _lock_free(cluster: ClusterState) -> bool:
    """Whether another thread can take the index's lock now."""
    got: list[bool] = []

    def take() -> None:
        got.append(cluster.lock.acquire(timeout=1.0))
        if got[-1]:
            cluster.lock.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return got == [True]


def _stored(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return sorted(inventory.name for inventory in store.load_inventories(session))


def test_a_listing_is_written_a_batch_at_a_time(
    cluster: ClusterState, inventory: InventoryService, sessions: sessionmaker[Session]
) -> None:
    views = [node_view(node_json(f"n-{i}")) for i in range(5)]
    done: list[int] = []
    free: list[bool] = []

    def progress(count: int) -> None:
        done.append(count)
        free.append(_lock_free(cluster))

    assert inventory.observe_listing(views, batch_size=2, on_progress=progress) == 5
    assert done == [2, 4, 5]
    assert free == [True, True, True]  # other threads get the index between batches
    assert _stored(sessions) == [f"n-{i}" for i in range(5)]
    # Seen already: nothing is written again.
    assert inventory.observe_listing(views, batch_size=2) == 0


def test_a_listing_stops_between_batches(
    inventory: InventoryService, sessions: sessionmaker[Session]
) -> None:
    views = [node_view(node_json(f"n-{i}")) for i in range(5)]
    done: list[int] = []
    assert (
        inventory.observe_listing(
            views, batch_size=2, on_progress=done.append, stopping=lambda: bool(done)
        )
        == 2
    )
    assert _stored(sessions) == ["n-0", "n-1"]


def test_a_refused_batch_is_written_node_by_node(
    inventory: InventoryService, sessions: sessionmaker[Session]
) -> None:
    """A node listing another node's device UUID is refused; the rest of its batch is
    written all the same."""
    views = [node_view(node_json(f"n-{i}")) for i in range(3)]
    theirs = node_json("n-1")["metadata"]["annotations"]["hami.io/node-nvidia-register"]
    views.insert(2, node_view(node_json("thief", register=theirs)))
    assert inventory.observe_listing(views, batch_size=10) == 3
    assert _stored(sessions) == ["n-0", "n-1", "n-2"]
