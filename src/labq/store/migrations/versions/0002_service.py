"""What the live service needs: tokens, passwords, recipe history, supervisors, task reports.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-28

Written out in full (no imports from labq), like 0001. SQLite cannot add
constraints to a table in place, so those changes go through batch operations,
which rebuild the table there (foreign keys are off while migrating).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATES = (
    "('new', 'queued', 'assigned', 'scheduled', 'waiting', 'installing', 'running',"
    " 'completed', 'cancelled', 'aborted')"
)
TASK_FINAL = "('completed', 'cancelled', 'aborted')"
OPEN = "finished_at IS NULL"
ENDS_AFTER_START = "finished_at IS NULL OR started_at IS NULL OR finished_at >= started_at"
_SET_TIMES = ("started_at", "finished_at", "heartbeat_at")
_TASK_COLUMNS = ("exit_code", "started_at", "finished_at", "log_path", "message")


def _time(name: str, *, nullable: bool = True) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("password_digest", sa.Text(), nullable=True))
    with op.batch_alter_table("systems") as batch:
        batch.add_column(
            sa.Column("consecutive_aborts", sa.Integer(), server_default="0", nullable=False)
        )
        batch.create_check_constraint(
            op.f("ck_systems_consecutive_aborts"), "consecutive_aborts >= 0"
        )
    _recipe_sets()
    with op.batch_alter_table("recipes") as batch:
        batch.add_column(sa.Column("log_dir", sa.Text(), nullable=True))
    _tasks()
    _recipe_history()
    _tokens()


def _recipe_sets() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.add_column(_time("submitted_at"))
        batch.add_column(sa.Column("lab_id", sa.Integer(), nullable=True))
        for name in _SET_TIMES:
            batch.add_column(_time(name))
        batch.add_column(sa.Column("supervisor_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("supervisor_host", sa.String(255), nullable=True))
        batch.add_column(sa.Column("stop_reason", sa.Text(), nullable=True))
    # Existing sets keep their job's place in the queue; ended ones get their end time.
    op.execute(
        "UPDATE recipe_sets SET submitted_at ="
        " (SELECT submitted_at FROM jobs WHERE jobs.id = recipe_sets.job_id)"
    )
    op.execute(
        "UPDATE recipe_sets SET finished_at = (SELECT MAX(r.finished_at) FROM recipes r"
        " WHERE r.recipe_set_id = recipe_sets.id)"
        " WHERE NOT EXISTS (SELECT 1 FROM recipes r"
        " WHERE r.recipe_set_id = recipe_sets.id"
        " AND r.state NOT IN ('completed', 'cancelled', 'aborted'))"
    )
    with op.batch_alter_table("recipe_sets") as batch:
        batch.alter_column("submitted_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.create_foreign_key(op.f("fk_recipe_sets_lab_id_labs"), "labs", ["lab_id"], ["id"])
        batch.create_check_constraint(
            op.f("ck_recipe_sets_started_in_lab"), "started_at IS NULL OR lab_id IS NOT NULL"
        )
        batch.create_check_constraint(op.f("ck_recipe_sets_ends_after_start"), ENDS_AFTER_START)
        batch.create_check_constraint(
            op.f("ck_recipe_sets_supervisor"),
            "supervisor_pid IS NULL OR (started_at IS NOT NULL"
            " AND supervisor_host IS NOT NULL AND heartbeat_at IS NOT NULL)",
        )
        batch.create_check_constraint(
            op.f("ck_recipe_sets_stop_after_start"), "stop_reason IS NULL OR started_at IS NOT NULL"
        )
    op.create_index(
        "ix_recipe_sets_unfinished",
        "recipe_sets",
        ["id"],
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )


def _tasks() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(_time("started_at"))
        batch.add_column(_time("finished_at"))
        batch.add_column(sa.Column("log_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("message", sa.Text(), nullable=True))
    # Nothing reported on tasks before this revision; a stray final status gets a time.
    op.execute(
        "UPDATE tasks SET started_at = (SELECT COALESCE(r.started_at, r.finished_at)"
        " FROM recipes r WHERE r.id = tasks.recipe_id)"
        " WHERE status IN ('running', 'completed')"
    )
    op.execute(
        "UPDATE tasks SET finished_at = (SELECT COALESCE(r.finished_at, tasks.started_at)"
        " FROM recipes r WHERE r.id = tasks.recipe_id)"
        " WHERE status IN ('completed', 'cancelled', 'aborted')"
    )
    with op.batch_alter_table("tasks") as batch:
        batch.create_check_constraint(
            op.f("ck_tasks_ran"), "status NOT IN ('running', 'completed') OR started_at IS NOT NULL"
        )
        batch.create_check_constraint(
            op.f("ck_tasks_finished"),
            f"(status IN {TASK_FINAL} AND finished_at IS NOT NULL)"
            f" OR (status NOT IN {TASK_FINAL} AND finished_at IS NULL)",
        )
        batch.create_check_constraint(op.f("ck_tasks_ends_after_start"), ENDS_AFTER_START)


def _recipe_history() -> None:
    op.create_table(
        "recipe_history",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("recipe_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        _time("at", nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.CheckConstraint(f"state IN {STATES}", name=op.f("ck_recipe_history_state")),
        sa.ForeignKeyConstraint(
            ["recipe_id"],
            ["recipes.id"],
            name=op.f("fk_recipe_history_recipe_id_recipes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_recipe_history")),
    )
    op.create_index(op.f("ix_recipe_history_recipe_id_at"), "recipe_history", ["recipe_id", "at"])
    # What is known of existing recipes: submitted new, and where they are now.
    op.execute(
        "INSERT INTO recipe_history (recipe_id, state, at, reason)"
        " SELECT r.id, 'new', j.submitted_at, 'recorded by migration 0002' FROM recipes r"
        " JOIN recipe_sets s ON s.id = r.recipe_set_id JOIN jobs j ON j.id = s.job_id"
    )
    op.execute(
        "INSERT INTO recipe_history (recipe_id, state, at, reason)"
        " SELECT r.id, r.state, COALESCE(r.finished_at, r.started_at, r.scheduled_at,"
        " r.queued_at, j.submitted_at), 'recorded by migration 0002' FROM recipes r"
        " JOIN recipe_sets s ON s.id = r.recipe_set_id JOIN jobs j ON j.id = s.job_id"
        " WHERE r.state <> 'new'"
    )


def _tokens() -> None:
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        _time("created_at", nullable=False),
        _time("last_used_at"),
        _time("expires_at"),
        _time("revoked_at"),
        sa.Column("recipe_set_id", sa.Integer(), nullable=True),
        sa.CheckConstraint("length(digest) = 64", name=op.f("ck_tokens_digest")),
        sa.CheckConstraint(
            "expires_at IS NULL OR expires_at > created_at", name=op.f("ck_tokens_expires")
        ),
        sa.CheckConstraint(
            "revoked_at IS NULL OR revoked_at >= created_at", name=op.f("ck_tokens_revoked")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_tokens_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["recipe_set_id"],
            ["recipe_sets.id"],
            name=op.f("fk_tokens_recipe_set_id_recipe_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tokens")),
        sa.UniqueConstraint("digest", name=op.f("uq_tokens_digest")),
    )
    op.create_index(op.f("ix_tokens_user_id"), "tokens", ["user_id"])
    op.create_index(op.f("ix_tokens_recipe_set_id"), "tokens", ["recipe_set_id"])


def downgrade() -> None:
    op.drop_table("tokens")
    op.drop_table("recipe_history")
    with op.batch_alter_table("tasks") as batch:
        for name in ("ends_after_start", "finished", "ran"):
            batch.drop_constraint(op.f(f"ck_tasks_{name}"), type_="check")
        for column in _TASK_COLUMNS:
            batch.drop_column(column)
    with op.batch_alter_table("recipes") as batch:
        batch.drop_column("log_dir")
    op.drop_index("ix_recipe_sets_unfinished", table_name="recipe_sets")
    with op.batch_alter_table("recipe_sets") as batch:
        for name in ("stop_after_start", "supervisor", "ends_after_start", "started_in_lab"):
            batch.drop_constraint(op.f(f"ck_recipe_sets_{name}"), type_="check")
        batch.drop_constraint(op.f("fk_recipe_sets_lab_id_labs"), type_="foreignkey")
        for column in ("stop_reason", "supervisor_host", "supervisor_pid", *_SET_TIMES):
            batch.drop_column(column)
        batch.drop_column("lab_id")
        batch.drop_column("submitted_at")
    with op.batch_alter_table("systems") as batch:
        batch.drop_constraint(op.f("ck_systems_consecutive_aborts"), type_="check")
        batch.drop_column("consecutive_aborts")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("password_digest")
