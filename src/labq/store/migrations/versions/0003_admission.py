"""Admission and the predictive queue: dependencies, filters, paused labs, the lock service.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21

Written out in full (no imports from labq), like 0001 and 0002.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIONS = "('accept', 'continue', 'pause', 'reject', 'rate-limit')"


def _time(name: str, *, nullable: bool = True) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _set_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["recipe_set_id"],
        ["recipe_sets.id"],
        name=op.f(f"fk_{table}_recipe_set_id_recipe_sets"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("reason", sa.Text(), nullable=True))
    _dependencies()
    _filters()
    _lab_pauses()
    _locks()


def _dependencies() -> None:
    op.create_table(
        "job_dependencies",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("depends_on", sa.Integer(), nullable=False),
        sa.Column("satisfied_by", sa.JSON(), nullable=False),
        sa.CheckConstraint("job_id <> depends_on", name=op.f("ck_job_dependencies_not_itself")),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["depends_on"],
            ["jobs.id"],
            name=op.f("fk_job_dependencies_depends_on_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "depends_on", name=op.f("pk_job_dependencies")),
    )
    op.create_index(op.f("ix_job_dependencies_depends_on"), "job_dependencies", ["depends_on"])


def _filters() -> None:
    op.create_table(
        "filters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("rate", sa.Integer(), nullable=True),
        sa.Column("predicates", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=True),
        _time("created_at", nullable=False),
        sa.CheckConstraint(f"action IN {ACTIONS}", name=op.f("ck_filters_action")),
        sa.CheckConstraint(
            "(action = 'rate-limit' AND rate IS NOT NULL AND rate > 0)"
            " OR (action <> 'rate-limit' AND rate IS NULL)",
            name=op.f("ck_filters_rate"),
        ),
        sa.CheckConstraint("priority >= 0", name=op.f("ck_filters_priority")),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("fk_filters_created_by_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_filters")),
    )


def _lab_pauses() -> None:
    op.create_table(
        "lab_pauses",
        sa.Column("lab_id", sa.Integer(), nullable=False),
        _time("since", nullable=False),
        _time("until"),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("paused_by", sa.Integer(), nullable=True),
        sa.CheckConstraint("until IS NULL OR until > since", name=op.f("ck_lab_pauses_until")),
        sa.ForeignKeyConstraint(
            ["lab_id"], ["labs.id"], name=op.f("fk_lab_pauses_lab_id_labs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["paused_by"], ["users.id"], name=op.f("fk_lab_pauses_paused_by_users")
        ),
        sa.PrimaryKeyConstraint("lab_id", name=op.f("pk_lab_pauses")),
    )


def _locks() -> None:
    op.create_table(
        "lock_grants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recipe_set_id", sa.Integer(), nullable=False),
        sa.Column("level", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        _time("acquired_at", nullable=False),
        _set_fk("lock_grants"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lock_grants")),
        sa.UniqueConstraint(
            "recipe_set_id",
            "level",
            "name",
            "exclusive",
            name=op.f("uq_lock_grants_recipe_set_id_level_name_exclusive"),
        ),
    )
    op.create_index(op.f("ix_lock_grants_level_name"), "lock_grants", ["level", "name"])
    op.create_table(
        "lock_waiters",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recipe_set_id", sa.Integer(), nullable=False),
        sa.Column("grants", sa.JSON(), nullable=False),
        _time("since", nullable=False),
        _time("seen_at", nullable=False),
        _set_fk("lock_waiters"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lock_waiters")),
        sa.UniqueConstraint("recipe_set_id", name=op.f("uq_lock_waiters_recipe_set_id")),
    )


def downgrade() -> None:
    op.drop_table("lock_waiters")
    op.drop_index(op.f("ix_lock_grants_level_name"), table_name="lock_grants")
    op.drop_table("lock_grants")
    op.drop_table("lab_pauses")
    op.drop_table("filters")
    op.drop_index(op.f("ix_job_dependencies_depends_on"), table_name="job_dependencies")
    op.drop_table("job_dependencies")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("reason")
