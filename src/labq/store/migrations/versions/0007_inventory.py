"""Systems carry an inventory (devices, disks, cpu flags, last_inventoried) as JSON.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

Written out in full (no imports from labq), like the others. Existing systems get
the empty inventory: never inventoried.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.add_column(
            sa.Column("inventory", sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
        )


def downgrade() -> None:
    with op.batch_alter_table("systems") as batch:
        batch.drop_column("inventory")
