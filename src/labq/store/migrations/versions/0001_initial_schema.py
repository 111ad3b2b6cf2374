"""Initial schema: labs, systems, pools, people, access rules, jobs, usage history, activity.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Written out in full (no imports from labq): a migration must keep meaning what it
meant when it was written, whatever the code does later.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONDITIONS = "('automated', 'manual', 'broken', 'removed')"
USAGES = "('idle', 'pending', 'scheduled', 'waiting', 'installing', 'running')"
FREE = "('idle', 'pending')"
PRIORITIES = "('low', 'medium', 'normal', 'high', 'urgent')"
STATES = (
    "('new', 'queued', 'assigned', 'scheduled', 'waiting', 'installing', 'running',"
    " 'completed', 'cancelled', 'aborted')"
)
HOLDING = "('scheduled', 'waiting', 'installing', 'running')"
UNPLACED = "('new', 'queued', 'assigned')"
FINAL = "('completed', 'cancelled', 'aborted')"
RESULTS = "('pass', 'warn', 'fail')"
TASK_STATUSES = "('new', 'running', 'completed', 'cancelled', 'aborted')"
SYSTEM_RECIPE_FK = "fk_systems_recipe_id_recipes"
_RECIPE_EVENTS = ("queued", "scheduled", "started", "finished")


def _id() -> sa.Column[int]:
    return sa.Column("id", sa.Integer(), nullable=False)


def _pk(table: str, *columns: str) -> sa.PrimaryKeyConstraint:
    return sa.PrimaryKeyConstraint(*(columns or ("id",)), name=op.f(f"pk_{table}"))


def _fk(
    table: str, column: str, target: str, ondelete: str | None = None
) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def _uq(table: str, *columns: str) -> sa.UniqueConstraint:
    return sa.UniqueConstraint(*columns, name=op.f(f"uq_{table}_{'_'.join(columns)}"))


def _ck(table: str, name: str, sql: str) -> sa.CheckConstraint:
    return sa.CheckConstraint(sql, name=op.f(f"ck_{table}_{name}"))


def _name() -> sa.Column[str]:
    return sa.Column("name", sa.String(255), nullable=False)


def _time(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _index(table: str, *columns: str) -> None:
    op.create_index(op.f(f"ix_{table}_{'_'.join(columns)}"), table, list(columns))


def upgrade() -> None:
    sqlite = op.get_context().dialect.name == "sqlite"
    _people_and_places()
    _systems(sqlite)
    _jobs()
    if not sqlite:
        # systems.recipe_id ↔ recipes.system_id is a cycle: PostgreSQL gets the
        # constraint now that both tables exist; SQLite declared it inline.
        op.create_foreign_key(op.f(SYSTEM_RECIPE_FK), "systems", "recipes", ["recipe_id"], ["id"])
    _history_and_activity()
    groups = sa.table("groups", sa.column("name", sa.String))
    op.bulk_insert(groups, [{"name": "everybody"}])


def _people_and_places() -> None:
    for table in ("labs", "groups"):
        op.create_table(table, _id(), _name(), _pk(table), _uq(table, "name"))
    op.create_table(
        "users",
        _id(),
        _name(),
        sa.Column("admin", sa.Boolean(), nullable=False),
        _pk("users"),
        _uq("users", "name"),
    )
    op.create_table(
        "pools",
        _id(),
        _name(),
        sa.Column("restricted", sa.Boolean(), nullable=False),
        _pk("pools"),
        _uq("pools", "name"),
    )
    op.create_table(
        "memberships",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        _fk("memberships", "user_id", "users", "CASCADE"),
        _fk("memberships", "group_id", "groups", "CASCADE"),
        _pk("memberships", "user_id", "group_id"),
    )
    _index("memberships", "group_id")
    op.create_table(
        "access_rules",
        _id(),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("max_priority", sa.String(16), nullable=False),
        _ck("access_rules", "max_priority", f"max_priority IN {PRIORITIES}"),
        _fk("access_rules", "pool_id", "pools", "CASCADE"),
        _fk("access_rules", "group_id", "groups", "CASCADE"),
        _pk("access_rules"),
        _uq("access_rules", "pool_id", "group_id"),
    )
    _index("access_rules", "group_id")


def _systems(sqlite: bool) -> None:
    # SQLite checks foreign keys when rows change, so it may name a table to come.
    cycle = [_fk("systems", "recipe_id", "recipes")] if sqlite else []
    op.create_table(
        "systems",
        _id(),
        sa.Column("fqdn", sa.String(255), nullable=False),
        sa.Column("lab_id", sa.Integer(), nullable=False),
        sa.Column("arch", sa.String(64), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=True),
        sa.Column("attributes", sa.JSON(), nullable=False),
        sa.Column("condition", sa.String(16), nullable=False),
        sa.Column("condition_reason", sa.Text(), nullable=True),
        sa.Column("usage", sa.String(16), nullable=False),
        sa.Column("recipe_id", sa.Integer(), nullable=True),
        _ck("systems", "condition", f"condition IN {CONDITIONS}"),
        _ck("systems", "usage", f"usage IN {USAGES}"),
        _ck(
            "systems",
            "busy_iff_held",
            f"(recipe_id IS NULL AND usage IN {FREE})"
            f" OR (recipe_id IS NOT NULL AND usage NOT IN {FREE})",
        ),
        _fk("systems", "lab_id", "labs"),
        _fk("systems", "owner_id", "users"),
        *cycle,
        _pk("systems"),
        _uq("systems", "fqdn"),
        _uq("systems", "recipe_id"),
    )
    _index("systems", "lab_id", "usage")
    op.create_table(
        "system_pools",
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        _fk("system_pools", "system_id", "systems", "CASCADE"),
        _fk("system_pools", "pool_id", "pools", "CASCADE"),
        _pk("system_pools", "system_id", "pool_id"),
    )
    _index("system_pools", "pool_id")


def _jobs() -> None:
    op.create_table(
        "jobs",
        _id(),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("whiteboard", sa.Text(), nullable=True),
        _time("submitted_at"),
        sa.Column("ref_repo", sa.Text(), nullable=True),
        sa.Column("ref_branch", sa.String(255), nullable=True),
        sa.Column("ref_commit", sa.String(64), nullable=True),
        sa.Column("source_format", sa.String(32), nullable=False),
        sa.Column("depends", sa.JSON(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        _ck("jobs", "ref", "ref_repo IS NOT NULL OR (ref_branch IS NULL AND ref_commit IS NULL)"),
        _fk("jobs", "owner_id", "users"),
        _fk("jobs", "group_id", "groups"),
        _pk("jobs"),
    )
    _index("jobs", "owner_id")
    op.create_table(
        "recipe_sets",
        _id(),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("priority", sa.String(16), nullable=False),
        sa.Column("max_retries", sa.Integer(), nullable=False),
        sa.Column("max_time", sa.Integer(), nullable=True),
        sa.Column("locks", sa.JSON(), nullable=False),
        sa.Column("retry_of", sa.Integer(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        _ck("recipe_sets", "priority", f"priority IN {PRIORITIES}"),
        _ck("recipe_sets", "max_retries", "max_retries >= 0"),
        _ck("recipe_sets", "max_time", "max_time IS NULL OR max_time > 0"),
        _ck(
            "recipe_sets",
            "attempt",
            "(retry_of IS NULL AND attempt = 1) OR (retry_of IS NOT NULL AND attempt > 1)",
        ),
        _fk("recipe_sets", "job_id", "jobs", "CASCADE"),
        _fk("recipe_sets", "retry_of", "recipe_sets"),
        _pk("recipe_sets"),
        _uq("recipe_sets", "job_id", "position"),
        _uq("recipe_sets", "retry_of"),
    )
    _recipes()


def _recipes() -> None:
    op.create_table(
        "recipes",
        _id(),
        sa.Column("recipe_set_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(255), nullable=True),
        sa.Column("host", sa.JSON(), nullable=False),
        sa.Column("force", sa.String(255), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("system_id", sa.Integer(), nullable=True),
        sa.Column("whiteboard", sa.Text(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("result", sa.String(16), nullable=True),
        *(_time(f"{event}_at", nullable=True) for event in _RECIPE_EVENTS),
        _ck("recipes", "state", f"state IN {STATES}"),
        _ck("recipes", "result", f"result IN {RESULTS}"),
        _ck("recipes", "holds_system", f"state NOT IN {HOLDING} OR system_id IS NOT NULL"),
        _ck("recipes", "unplaced", f"state NOT IN {UNPLACED} OR system_id IS NULL"),
        _ck(
            "recipes",
            "finished",
            f"(state IN {FINAL} AND finished_at IS NOT NULL)"
            f" OR (state NOT IN {FINAL} AND finished_at IS NULL)",
        ),
        _fk("recipes", "recipe_set_id", "recipe_sets", "CASCADE"),
        _fk("recipes", "system_id", "systems"),
        _pk("recipes"),
        _uq("recipes", "recipe_set_id", "position"),
    )
    _index("recipes", "state")
    _index("recipes", "system_id")
    op.create_table(
        "recipe_excludes",
        sa.Column("recipe_id", sa.Integer(), nullable=False),
        sa.Column("fqdn", sa.String(255), nullable=False),
        _fk("recipe_excludes", "recipe_id", "recipes", "CASCADE"),
        _pk("recipe_excludes", "recipe_id", "fqdn"),
    )
    op.create_table(
        "tasks",
        _id(),
        sa.Column("recipe_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        _name(),
        sa.Column("run", sa.Text(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("timeout", sa.Integer(), nullable=True),
        sa.Column("role", sa.String(255), nullable=True),
        sa.Column("result", sa.String(16), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        _ck("tasks", "result", f"result IN {RESULTS}"),
        _ck("tasks", "status", f"status IN {TASK_STATUSES}"),
        _ck("tasks", "timeout", "timeout IS NULL OR timeout > 0"),
        _fk("tasks", "recipe_id", "recipes", "CASCADE"),
        _pk("tasks"),
        _uq("tasks", "recipe_id", "position"),
    )


def _history_and_activity() -> None:
    op.create_table(
        "usage_history",
        _id(),
        sa.Column("system_id", sa.Integer(), nullable=False),
        sa.Column("usage", sa.String(16), nullable=False),
        sa.Column("condition", sa.String(16), nullable=False),
        sa.Column("recipe_id", sa.Integer(), nullable=True),
        _time("started_at"),
        _time("ended_at", nullable=True),
        _ck("usage_history", "usage", f"usage IN {USAGES}"),
        _ck("usage_history", "condition", f"condition IN {CONDITIONS}"),
        _ck("usage_history", "ends_after_start", "ended_at IS NULL OR ended_at >= started_at"),
        _fk("usage_history", "system_id", "systems", "CASCADE"),
        _fk("usage_history", "recipe_id", "recipes", "SET NULL"),
        _pk("usage_history"),
    )
    _index("usage_history", "system_id", "started_at")
    open_row = sa.text("ended_at IS NULL")
    op.create_index(
        op.f("uq_usage_history_open"),
        "usage_history",
        ["system_id"],
        unique=True,
        sqlite_where=open_row,
        postgresql_where=open_row,
    )
    op.create_table(
        "activity",
        _id(),
        _time("at"),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("object_kind", sa.String(32), nullable=False),
        sa.Column("object_id", sa.Integer(), nullable=True),
        sa.Column("object_name", sa.String(255), nullable=True),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("old_value", sa.Text(), nullable=True),
        sa.Column("new_value", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        _ck("activity", "object", "object_id IS NOT NULL OR object_name IS NOT NULL"),
        _pk("activity"),
    )
    _index("activity", "object_kind", "object_id")
    _index("activity", "at")


def downgrade() -> None:
    if op.get_context().dialect.name != "sqlite":
        op.drop_constraint(SYSTEM_RECIPE_FK, "systems", type_="foreignkey")
    for table in (
        "activity",
        "usage_history",
        "tasks",
        "recipe_excludes",
        "recipes",
        "recipe_sets",
        "jobs",
        "system_pools",
        "systems",
        "access_rules",
        "memberships",
        "pools",
        "users",
        "groups",
        "labs",
    ):
        op.drop_table(table)
