"""The store with devices of several vendors; run against SQLite and PostgreSQL.

A backend's test module subclasses ``VendorStoreContract`` and provides the ``db``
fixture, as for ``StoreContract``: custom info and grant vendor words round-trip, and
the bind-time and import re-checks judge each device by its own vendor's model.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.integration.store_contract import T0, Db, gpu, live, put_node
from vgpu_extender.domain import Device, DeviceGrant, NodeInventory, PodAssignment, Reason
from vgpu_extender.domain.share import ShareModel, ShareModels, Stage
from vgpu_extender.store import (
    ImportConflict,
    StoreConflict,
    StoreInputError,
    assignments,
    import_assignment,
    load_inventories,
    reserve,
)
from vgpu_extender.store.node_batch import insert_new_nodes
from vgpu_extender.vendors.nvidia.share import NVIDIA_SHARE

ASCEND = "Ascend910B3"


def npu(uuid: str, *, index: int = 0, network: int = 0) -> Device:
    return Device(
        uuid=uuid,
        index=index,
        count=4,
        memory_mib=65536,
        cores=20,
        type=ASCEND,
        vendor=ASCEND,
        custom_info=(("NetworkID", network),),
    )


#: One node with an NVIDIA GPU and two Ascend dies, each die with its custom info.
MIXED = NodeInventory(
    name="node-m",
    devices=(
        gpu("GPU-m0", index=0),
        npu("npu-m0", index=1, network=0),
        npu("npu-m1", index=2, network=1),
    ),
)

#: Custom info of every value kind the column keeps, keys given sorted.
EVERY_KIND = (("Flag", True), ("Name", "die-0"), ("NetworkID", 3), ("Ratio", 0.5), ("Zero", 0.0))


def _refuse_all(where: str, *_: object) -> str:
    return f"{where} refused by its vendor"


#: A model that refuses every share: what a device judged by it can never take.
REFUSING = ShareModel(
    name="refusing",
    stages=(Stage(Reason.SLOTS, lambda free, total, demand: False, _refuse_all),),
    consumed=NVIDIA_SHARE.consumed,
    held=NVIDIA_SHARE.held,
)
#: NVIDIA's model for NVIDIA's devices (the default), the refusing one for Ascend's.
SHARES = ShareModels(default=NVIDIA_SHARE, by_vendor=((ASCEND, REFUSING),))


def _grant(uuid: str, memory: int, vendor: str) -> PodAssignment:
    return PodAssignment(node="node-m", containers=((DeviceGrant(uuid, memory, 0, vendor),),))


def _reserve(db: Db, uid: str, assignment: PodAssignment, *, shares: ShareModels) -> None:
    with db.factory.begin() as session:
        reserve(
            session,
            pod_uid=uid,
            namespace="ns",
            name=uid,
            assignment=assignment,
            now=T0,
            shares=shares,
        )


class VendorStoreContract:
    """Vendor words and custom info in the store, independent of the backend."""

    @pytest.mark.parametrize("batch", [False, True], ids=["upsert", "batch"])
    def test_custom_info_round_trips_exactly(self, db: Db, batch: bool) -> None:
        every = replace(npu("npu-x0"), custom_info=EVERY_KIND)
        inventory = replace(MIXED, devices=(*MIXED.devices, replace(every, index=3)))
        if batch:
            with db.factory.begin() as session:
                assert insert_new_nodes(session, inventories=[inventory], source="api") == []
        else:
            put_node(db, inventory)
        with db.factory() as session:
            (loaded,) = load_inventories(session)
        assert loaded == inventory
        kinds = [type(value) for _, value in loaded.devices[3].custom_info]
        assert kinds == [bool, str, int, float, float]
        assert loaded.devices[0].custom_info == ()

    def test_custom_info_is_read_back_sorted_by_key(self, db: Db) -> None:
        shuffled = replace(npu("npu-s0"), custom_info=(("b", 2), ("a", 1)))
        put_node(db, replace(MIXED, devices=(shuffled,)))
        with db.factory() as session:
            assert load_inventories(session)[0].devices[0].custom_info == (("a", 1), ("b", 2))

    def test_an_upsert_replaces_a_devices_custom_info(self, db: Db) -> None:
        put_node(db, MIXED)
        moved = replace(MIXED.devices[1], custom_info=(("NetworkID", 7),))
        put_node(db, replace(MIXED, devices=(MIXED.devices[0], moved, MIXED.devices[2])))
        with db.factory() as session:
            devices = load_inventories(session)[0].devices
        assert [d.custom("NetworkID") for d in devices] == [None, 7, 1]

    def test_a_grant_keeps_its_vendor_word(self, db: Db) -> None:
        put_node(db, MIXED)
        _reserve(db, "p-npu", _grant("npu-m0", 1000, ASCEND), shares=ShareModels.one(NVIDIA_SHARE))
        _reserve(
            db, "p-gpu", _grant("GPU-m0", 1000, "NVIDIA"), shares=ShareModels.one(NVIDIA_SHARE)
        )
        # The device registers under another word later: the grant keeps the one it had.
        renamed = replace(MIXED.devices[1], vendor="Ascend910B4")
        put_node(db, replace(MIXED, devices=(MIXED.devices[0], renamed, MIXED.devices[2])))
        with db.factory() as session:
            stored = assignments(session)
        assert stored["p-npu"].assignment == _grant("npu-m0", 1000, ASCEND)
        assert stored["p-gpu"].assignment == _grant("GPU-m0", 1000, "NVIDIA")

    @pytest.mark.parametrize("path", ["reserve", "import"])
    def test_a_grant_naming_another_vendor_than_its_device_is_refused(
        self, db: Db, path: str
    ) -> None:
        put_node(db, MIXED)
        wrong = PodAssignment(
            node="node-m",
            containers=(
                (DeviceGrant("GPU-m0", 1000, 0, "NVIDIA"),),
                (DeviceGrant("npu-m0", 1000, 0, "NVIDIA"),),
            ),
        )
        with db.factory.begin() as session, pytest.raises(StoreInputError) as caught:
            if path == "reserve":
                reserve(session, pod_uid="p", namespace="ns", name="p", assignment=wrong)
            else:
                import_assignment(session, pod_uid="p", namespace="ns", name="p", assignment=wrong)
        assert caught.value.field == "assignment.containers[1].vendor"
        assert caught.value.value == "NVIDIA"
        assert "device npu-m0" in str(caught.value) and repr(ASCEND) in str(caught.value)
        assert live(db) == []

    def test_the_bind_recheck_judges_each_device_by_its_vendors_model(self, db: Db) -> None:
        put_node(db, MIXED)
        with pytest.raises(StoreConflict) as caught:
            _reserve(db, "p-npu", _grant("npu-m0", 1000, ASCEND), shares=SHARES)
        assert caught.value.reason is Reason.SLOTS
        assert caught.value.device == "npu-m0"
        assert "device npu-m0 on node-m refused by its vendor" in str(caught.value)
        _reserve(db, "p-gpu", _grant("GPU-m0", 1000, "NVIDIA"), shares=SHARES)
        # The same Ascend grant fits where Ascend's devices are judged by NVIDIA's model.
        _reserve(db, "p-npu", _grant("npu-m0", 1000, ASCEND), shares=ShareModels.one(NVIDIA_SHARE))
        assert sorted(row[0] for row in live(db)) == ["p-gpu", "p-npu"]

    def test_the_import_recheck_judges_each_device_by_its_vendors_model(self, db: Db) -> None:
        put_node(db, MIXED)
        with db.factory.begin() as session, pytest.raises(ImportConflict) as caught:
            import_assignment(
                session,
                pod_uid="p-npu",
                namespace="ns",
                name="p-npu",
                assignment=_grant("npu-m1", 1000, ASCEND),
                shares=SHARES,
            )
        assert caught.value.devices == ("npu-m1",)
        with db.factory.begin() as session:
            import_assignment(
                session,
                pod_uid="p-gpu",
                namespace="ns",
                name="p-gpu",
                assignment=_grant("GPU-m0", 1000, "NVIDIA"),
                shares=SHARES,
            )
        assert [row[0] for row in live(db)] == ["p-gpu"]
