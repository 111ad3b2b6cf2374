"""System reservations and loans (issue 14): a system held for a person, out of the queue.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "system_reservations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("holder_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("recipe_id", sa.Integer(), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("released_by", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.CheckConstraint("kind IN ('reserve', 'loan')", name=op.f("ck_system_reservations_kind")),
        sa.CheckConstraint(
            "until IS NULL OR until > since", name=op.f("ck_system_reservations_until")
        ),
        sa.CheckConstraint(
            "released_at IS NULL OR released_at >= since",
            name=op.f("ck_system_reservations_released"),
        ),
        sa.ForeignKeyConstraint(
            ["system_id"],
            ["systems.id"],
            name=op.f("fk_system_reservations_system_id_systems"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["holder_id"], ["users.id"], name=op.f("fk_system_reservations_holder_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["recipe_id"],
            ["recipes.id"],
            name=op.f("fk_system_reservations_recipe_id_recipes"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["released_by"], ["users.id"], name=op.f("fk_system_reservations_released_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_system_reservations")),
    )
    op.create_index(
        op.f("ix_system_reservations_system_id"),
        "system_reservations",
        ["system_id"],
        unique=False,
    )
    open_row = sa.text("released_at IS NULL")
    op.create_index(
        op.f("uq_system_reservations_open"),
        "system_reservations",
        ["system_id"],
        unique=True,
        sqlite_where=open_row,
        postgresql_where=open_row,
    )


def downgrade() -> None:
    op.drop_table("system_reservations")
