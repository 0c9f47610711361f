"""Vendor-neutral rows: a device's custom info, an allocation's vendor word.

``devices.custom_info`` holds the vendor's own facts about a device (HAMi's
``custominfo``); existing devices get none. ``allocations.vendor`` is the vendor word of
the device a grant is on; existing rows take their device's.

A row whose device is gone should not exist (the foreign key cascades), but one written
with foreign keys off may. On PostgreSQL it takes NVIDIA's word, the only vendor the
store served before this revision. On SQLite the table is copied to make the column
NOT NULL, and the copy's foreign key check would refuse such a row, failing the
migration: it is deleted first, as the cascade would have deleted it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The vendor word of every device written before this revision.
_LEGACY_VENDOR = "NVIDIA"

# Frozen copies of the tables at this revision, only the columns the backfill touches.
_devices = sa.table(
    "devices", sa.column("uuid", sa.String(128)), sa.column("vendor", sa.String(64))
)
_allocations = sa.table(
    "allocations", sa.column("device_uuid", sa.String(128)), sa.column("vendor", sa.String(64))
)


def upgrade() -> None:
    # Existing devices have no custom info: the server default fills them in. ALTER
    # TABLE, never a copy: on SQLite, dropping the old devices table would cascade to
    # every allocation (foreign keys are on).
    with op.batch_alter_table("devices", recreate="never") as batch:
        batch.add_column(
            sa.Column("custom_info", sa.JSON(), server_default=sa.text("'{}'"), nullable=False)
        )
    # Nullable first, backfilled, then NOT NULL: the rows need their device's word. On
    # SQLite the last step copies the allocations table (nothing refers to it).
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("vendor", sa.String(64), nullable=True))
    device_vendor = (
        sa.select(_devices.c.vendor)
        .where(_devices.c.uuid == _allocations.c.device_uuid)
        .scalar_subquery()
    )
    if op.get_bind().dialect.name == "sqlite":
        op.execute(
            _allocations.delete().where(
                ~sa.exists().where(_devices.c.uuid == _allocations.c.device_uuid)
            )
        )
    op.execute(
        _allocations.update().values(
            vendor=sa.func.coalesce(device_vendor, sa.literal(_LEGACY_VENDOR, sa.String(64)))
        )
    )
    with op.batch_alter_table("allocations") as batch:
        batch.alter_column("vendor", existing_type=sa.String(64), nullable=False)


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN (SQLite 3.35 and later), never a copy: see upgrade.
    with op.batch_alter_table("allocations", recreate="never") as batch:
        batch.drop_column("vendor")
    with op.batch_alter_table("devices", recreate="never") as batch:
        batch.drop_column("custom_info")
