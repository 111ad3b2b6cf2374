"""Lab agents: their tokens and registry, and which agent runs a started set.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("labs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.String(length=255), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("max_sets", sa.Integer(), nullable=True),
        sa.Column("running", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("length(digest) = 64", name=op.f("ck_agents_digest")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("name", name=op.f("uq_agents_name")),
        sa.UniqueConstraint("digest", name=op.f("uq_agents_digest")),
    )
    with op.batch_alter_table("recipe_sets") as batch:
        batch.add_column(sa.Column("agent_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("report_seq", sa.Integer(), nullable=False, server_default="0"))
        batch.create_foreign_key(
            op.f("fk_recipe_sets_agent_id_agents"), "agents", ["agent_id"], ["id"]
        )
        batch.create_index(op.f("ix_recipe_sets_agent_id"), ["agent_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_index(op.f("ix_recipe_sets_agent_id"))
        batch.drop_constraint(op.f("fk_recipe_sets_agent_id_agents"), type_="foreignkey")
        batch.drop_column("report_seq")
        batch.drop_column("agent_id")
    op.drop_table("agents")
