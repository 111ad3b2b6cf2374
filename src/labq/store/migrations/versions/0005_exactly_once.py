"""Exactly once: the installation's identity, the leader epoch, and claims on started sets.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _now() -> datetime:
    moment = datetime.now(UTC)
    # SQLite keeps naive UTC text, as labq's own column type writes it
    return moment.replace(tzinfo=None) if op.get_bind().dialect.name == "sqlite" else moment


def upgrade() -> None:
    op.create_table(
        "installation",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_installation_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_installation")),
        sa.UniqueConstraint("uuid", name=op.f("uq_installation_uuid")),
    )
    op.create_table(
        "leadership",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("id = 1", name=op.f("ck_leadership_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leadership")),
    )
    installation = sa.table(
        "installation",
        sa.column("id", sa.Integer),
        sa.column("uuid", sa.String),
        sa.column("created_at", sa.DateTime),
    )
    op.bulk_insert(installation, [{"id": 1, "uuid": str(uuid.uuid4()), "created_at": _now()}])
    leadership = sa.table("leadership", sa.column("id", sa.Integer), sa.column("epoch", sa.Integer))
    op.bulk_insert(leadership, [{"id": 1, "epoch": 0}])
    with op.batch_alter_table("recipe_sets") as batch:
        batch.add_column(sa.Column("claim", sa.String(length=64), nullable=True))
    # supervisors recorded before claims existed keep their set under a claim of their own
    op.execute(
        "UPDATE recipe_sets SET claim = 'before-claims-' || id WHERE supervisor_pid IS NOT NULL"
    )
    with op.batch_alter_table("recipe_sets") as batch:
        batch.create_check_constraint(
            op.f("ck_recipe_sets_claim_after_start"), "claim IS NULL OR started_at IS NOT NULL"
        )
        batch.create_check_constraint(
            op.f("ck_recipe_sets_supervisor_has_claim"),
            "supervisor_pid IS NULL OR claim IS NOT NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_constraint(op.f("ck_recipe_sets_supervisor_has_claim"), type_="check")
        batch.drop_constraint(op.f("ck_recipe_sets_claim_after_start"), type_="check")
        batch.drop_column("claim")
    op.drop_table("leadership")
    op.drop_table("installation")
