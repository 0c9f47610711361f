"""Tables: nodes, their devices, and the allocations pods hold on those devices.

The constraints here are the last line of defence against inconsistent rows; the
repository checks the same things first so that callers get a clear message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    ForeignKey,
    Index,
    MetaData,
    String,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from vgpu_extender.store.sqltypes import UtcDateTime

#: Deterministic constraint names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: Where a node's inventory came from.
INVENTORY_SOURCES = ("annotation", "file", "api")

#: Allocation states; reserved and bound rows count against capacity.
ALLOCATION_STATES = ("reserved", "bound", "released")


def _in_list(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime(), dict[str, Any]: JSON(), list[str]: JSON()}


class NodeModel(Base):
    __tablename__ = "nodes"
    __table_args__ = (CheckConstraint(_in_list("source", INVENTORY_SOURCES), name="source"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(253), unique=True)
    labels: Mapped[dict[str, Any]]
    cordoned: Mapped[list[str]]
    source: Mapped[str] = mapped_column(String(16))
    problem: Mapped[str | None] = mapped_column(String(1024))
    updated_at: Mapped[datetime]

    devices: Mapped[list[DeviceModel]] = relationship(
        back_populates="node",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by=lambda: (DeviceModel.index, DeviceModel.uuid),
    )


class DeviceModel(Base):
    __tablename__ = "devices"
    __table_args__ = (
        CheckConstraint("count >= 1", name="count_positive"),
        CheckConstraint("memory_mib >= 0", name="memory_non_negative"),
        CheckConstraint("cores >= 0", name="cores_non_negative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(128), unique=True)
    node_id: Mapped[int] = mapped_column(ForeignKey("nodes.id", ondelete="CASCADE"), index=True)
    index: Mapped[int]
    vendor: Mapped[str] = mapped_column(String(64))
    type: Mapped[str] = mapped_column(String(128))
    count: Mapped[int]
    memory_mib: Mapped[int]
    cores: Mapped[int]
    numa: Mapped[int]
    mode: Mapped[str] = mapped_column(String(64))
    healthy: Mapped[bool]
    #: The vendor's own facts about the device (``Device.custom_info``) as a JSON object.
    custom_info: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'"))

    node: Mapped[NodeModel] = relationship(back_populates="devices")


class AllocationModel(Base):
    """One container's grant on one device.

    ``vendor`` is the vendor word of the grant (its device's, when it was written): the
    grant keeps it whatever the device registers as later. ``init`` marks init
    containers, whose grants collapse (they run one at a time) when a pod's footprint
    on a device is computed.
    """

    __tablename__ = "allocations"
    __table_args__ = (
        UniqueConstraint("pod_uid", "container_index", "device_uuid"),
        CheckConstraint(_in_list("state", ALLOCATION_STATES), name="state"),
        CheckConstraint("memory_mib >= 0", name="memory_non_negative"),
        CheckConstraint("cores >= 0", name="cores_non_negative"),
        CheckConstraint("container_index >= 0", name="container_index_non_negative"),
        Index(None, "node", "state"),
        Index(None, "pod_uid"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    pod_uid: Mapped[str] = mapped_column(String(128))
    namespace: Mapped[str] = mapped_column(String(253))
    pod_name: Mapped[str] = mapped_column(String(253))
    node: Mapped[str] = mapped_column(String(253))
    device_uuid: Mapped[str] = mapped_column(
        ForeignKey("devices.uuid", ondelete="CASCADE"), index=True
    )
    vendor: Mapped[str] = mapped_column(String(64))
    container_index: Mapped[int]
    init: Mapped[bool]
    memory_mib: Mapped[int]
    cores: Mapped[int]
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    bound_at: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
