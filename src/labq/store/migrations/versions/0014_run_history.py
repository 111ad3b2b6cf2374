"""Run history: what kind of work each recipe set is, its run-time prediction, and how long
each one that ran took.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

Sets stored before this revision have no kind (their keys stay NULL), so they teach the
run-time predictions nothing. Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.add_column(sa.Column("source_key", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("work_key", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("prediction", sa.JSON(), nullable=True))
    op.create_table(
        "run_history",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("source_key", sa.String(length=32), nullable=True),
        sa.Column("work_key", sa.String(length=32), nullable=True),
        sa.Column("owner", sa.String(length=255), nullable=False),
        sa.Column("group", sa.String(length=255), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('completed', 'aborted', 'cancelled')",
            name=op.f("ck_run_history_outcome"),
        ),
        sa.CheckConstraint("seconds >= 0", name=op.f("ck_run_history_seconds")),
        sa.ForeignKeyConstraint(
            ["set_id"],
            ["recipe_sets.id"],
            name=op.f("fk_run_history_set_id_recipe_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_history")),
        sa.UniqueConstraint("set_id", name=op.f("uq_run_history_set_id")),
    )
    op.create_index(
        op.f("ix_run_history_source_key_id"), "run_history", ["source_key", "id"], unique=False
    )
    op.create_index(
        op.f("ix_run_history_work_key_id"), "run_history", ["work_key", "id"], unique=False
    )
    op.create_index(op.f("ix_run_history_owner_id"), "run_history", ["owner", "id"], unique=False)
    op.create_index(op.f("ix_run_history_group_id"), "run_history", ["group", "id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_run_history_group_id"), table_name="run_history")
    op.drop_index(op.f("ix_run_history_owner_id"), table_name="run_history")
    op.drop_index(op.f("ix_run_history_work_key_id"), table_name="run_history")
    op.drop_index(op.f("ix_run_history_source_key_id"), table_name="run_history")
    op.drop_table("run_history")
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_column("prediction")
        batch.drop_column("work_key")
        batch.drop_column("source_key")
