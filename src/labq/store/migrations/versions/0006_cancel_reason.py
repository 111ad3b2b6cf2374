"""A set cancelled before it started keeps the cancel's reason too (``stop_reason``).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-22

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "ck_recipe_sets_stop_after_start"


def upgrade() -> None:
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
        batch.create_check_constraint(
            op.f(NAME),
            "stop_reason IS NULL OR started_at IS NOT NULL OR finished_at IS NOT NULL",
        )


def downgrade() -> None:
    op.execute("UPDATE recipe_sets SET stop_reason = NULL WHERE started_at IS NULL")
    with op.batch_alter_table("recipe_sets") as batch:
        batch.drop_constraint(op.f(NAME), type_="check")
        batch.create_check_constraint(op.f(NAME), "stop_reason IS NULL OR started_at IS NOT NULL")
