"""Runs: jobs submitted together (a suite, or several files), and each job's run.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["owner_id"], ["users.id"], name=op.f("fk_runs_owner_id_users")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_runs_name")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("run_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_jobs_run_id_runs"), "runs", ["run_id"], ["id"])
        batch.create_index(op.f("ix_jobs_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index(op.f("ix_jobs_run_id"))
        batch.drop_constraint(op.f("fk_jobs_run_id_runs"), type_="foreignkey")
        batch.drop_column("run_id")
    op.drop_table("runs")
