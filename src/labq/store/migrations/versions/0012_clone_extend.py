"""Clone and extend: the document each job was submitted as, what a job was cloned from,
and how far a running set's max_time was extended.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # its own table: a document may be megabytes, and listing jobs never reads it
    op.create_table(
        "job_sources",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_sources_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_sources")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("cloned_from", sa.Integer(), nullable=True))
        batch.create_foreign_key(op.f("fk_jobs_cloned_from_jobs"), "jobs", ["cloned_from"], ["id"])
        batch.create_index(op.f("ix_jobs_cloned_from"), ["cloned_from"], unique=False)
    with op.batch_alter_table("recipe_sets") as batch:
        batch.add_column(sa.Column("extended", sa.Integer(), nullable=False, server_default="0"))
        batch.create_check_constraint(op.f("ck_recipe_sets_extended"), "extended >= 0")


def downgrade() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_constraint(op.f("ck_recipe_sets_extended"), type_="check")
        batch.drop_column("extended")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index(op.f("ix_jobs_cloned_from"))
        batch.drop_constraint(op.f("fk_jobs_cloned_from_jobs"), type_="foreignkey")
        batch.drop_column("cloned_from")
    op.drop_table("job_sources")
