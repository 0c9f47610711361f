"""Initial schema: nodes, devices, allocations.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Frozen copy of the types at this revision; later model changes need a new revision.
_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("cordoned", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("problem", sa.String(1024), nullable=True),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.CheckConstraint("source IN ('annotation', 'file', 'api')", name=op.f("ck_nodes_source")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("name", name=op.f("uq_nodes_name")),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("uuid", sa.String(128), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("vendor", sa.String(64), nullable=False),
        sa.Column("type", sa.String(128), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("numa", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(64), nullable=False),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.CheckConstraint("count >= 1", name=op.f("ck_devices_count_positive")),
        sa.CheckConstraint("memory_mib >= 0", name=op.f("ck_devices_memory_non_negative")),
        sa.CheckConstraint("cores >= 0", name=op.f("ck_devices_cores_non_negative")),
        sa.ForeignKeyConstraint(
            ["node_id"],
            ["nodes.id"],
            name=op.f("fk_devices_node_id_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
        sa.UniqueConstraint("uuid", name=op.f("uq_devices_uuid")),
    )
    op.create_index(op.f("ix_devices_node_id"), "devices", ["node_id"])
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pod_uid", sa.String(128), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("pod_name", sa.String(253), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("device_uuid", sa.String(128), nullable=False),
        sa.Column("container_index", sa.Integer(), nullable=False),
        sa.Column("init", sa.Boolean(), nullable=False),
        sa.Column("memory_mib", sa.Integer(), nullable=False),
        sa.Column("cores", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("updated_at", _TIMESTAMP, nullable=False),
        sa.Column("bound_at", _TIMESTAMP, nullable=True),
        sa.Column("released_at", _TIMESTAMP, nullable=True),
        sa.CheckConstraint(
            "state IN ('reserved', 'bound', 'released')", name=op.f("ck_allocations_state")
        ),
        sa.CheckConstraint("memory_mib >= 0", name=op.f("ck_allocations_memory_non_negative")),
        sa.CheckConstraint("cores >= 0", name=op.f("ck_allocations_cores_non_negative")),
        sa.CheckConstraint(
            "container_index >= 0", name=op.f("ck_allocations_container_index_non_negative")
        ),
        sa.ForeignKeyConstraint(
            ["device_uuid"],
            ["devices.uuid"],
            name=op.f("fk_allocations_device_uuid_devices"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocations")),
        sa.UniqueConstraint(
            "pod_uid",
            "container_index",
            "device_uuid",
            name=op.f("uq_allocations_pod_uid_container_index_device_uuid"),
        ),
    )
    op.create_index(op.f("ix_allocations_device_uuid"), "allocations", ["device_uuid"])
    op.create_index(op.f("ix_allocations_node_state"), "allocations", ["node", "state"])
    op.create_index(op.f("ix_allocations_pod_uid"), "allocations", ["pod_uid"])


def downgrade() -> None:
    op.drop_table("allocations")
    op.drop_table("devices")
    op.drop_table("nodes")
