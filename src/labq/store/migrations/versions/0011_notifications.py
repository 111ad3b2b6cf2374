"""Job-end notifications (webhooks, the outbox, jobs already noticed) and log retention.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

Written out in full (no imports from labq), like the others. Jobs that had ended
before this upgrade count as noticed: an upgrade does not send a flood of old news.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.String(length=255), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "(user_id IS NULL) <> (group_id IS NULL)", name=op.f("ck_webhooks_one_owner")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_webhooks_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["group_id"],
            ["groups.id"],
            name=op.f("fk_webhooks_group_id_groups"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_index(op.f("ix_webhooks_user_id"), "webhooks", ["user_id"], unique=False)
    op.create_index(op.f("ix_webhooks_group_id"), "webhooks", ["group_id"], unique=False)
    op.create_table(
        "job_notices",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("noticed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_notices_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_notices")),
    )
    op.create_table(
        "notifications",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("webhook_id", sa.Integer(), nullable=True),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('email', 'webhook')", name=op.f("ck_notifications_kind")),
        sa.CheckConstraint(
            "state IN ('pending', 'sent', 'failed')", name=op.f("ck_notifications_state")
        ),
        sa.CheckConstraint(
            "(state = 'sent') = (sent_at IS NOT NULL)", name=op.f("ck_notifications_sent")
        ),
        sa.CheckConstraint("attempts >= 0", name=op.f("ck_notifications_attempts")),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_notifications_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["webhook_id"],
            ["webhooks.id"],
            name=op.f("fk_notifications_webhook_id_webhooks"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_notifications")),
    )
    op.create_index(op.f("ix_notifications_job_id"), "notifications", ["job_id"], unique=False)
    op.create_index(
        op.f("ix_notifications_state_next_at"), "notifications", ["state", "next_at"], unique=False
    )
    op.create_table(
        "log_prunes",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(length=255), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_log_prunes_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_log_prunes")),
    )
    # Jobs that ended before this upgrade: noticed already, at the time they ended.
    op.execute(
        "INSERT INTO job_notices (job_id, state, noticed_at)"
        " SELECT job_id, 'upgrade', MAX(finished_at) FROM recipe_sets"
        " GROUP BY job_id HAVING COUNT(*) = COUNT(finished_at)"
    )


def downgrade() -> None:
    op.drop_table("log_prunes")
    op.drop_index(op.f("ix_notifications_state_next_at"), table_name="notifications")
    op.drop_index(op.f("ix_notifications_job_id"), table_name="notifications")
    op.drop_table("notifications")
    op.drop_table("job_notices")
    op.drop_index(op.f("ix_webhooks_group_id"), table_name="webhooks")
    op.drop_index(op.f("ix_webhooks_user_id"), table_name="webhooks")
    op.drop_table("webhooks")
