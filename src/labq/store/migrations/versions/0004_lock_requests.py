"""A recipe set may wait for several lock requests at once (its tasks on several systems).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("lock_waiters") as batch:
        batch.drop_constraint(op.f("uq_lock_waiters_recipe_set_id"), type_="unique")
        batch.create_index(op.f("ix_lock_waiters_recipe_set_id"), ["recipe_set_id"])


def downgrade() -> None:
    # one request per set again: keep each set's oldest
    op.execute(
        "DELETE FROM lock_waiters WHERE id NOT IN"
        " (SELECT MIN(id) FROM lock_waiters GROUP BY recipe_set_id)"
    )
    with op.batch_alter_table("lock_waiters") as batch:
        batch.drop_index(op.f("ix_lock_waiters_recipe_set_id"))
        batch.create_unique_constraint(op.f("uq_lock_waiters_recipe_set_id"), ["recipe_set_id"])
