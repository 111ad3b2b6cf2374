"""Distro trees: each lab's catalogue of trees and images it can install.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

Written out in full (no imports from labq), like the others.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "distro_trees",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lab_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("arch", sa.String(length=64), nullable=False),
        sa.Column("family", sa.String(length=255), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("variant", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("kernel", sa.Text(), nullable=False),
        sa.Column("initrd", sa.Text(), nullable=False),
        sa.Column("repos", sa.JSON(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("machine_types", sa.JSON(), nullable=False),
        sa.Column("os_type", sa.String(length=64), nullable=False),
        sa.Column("os_version", sa.String(length=64), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('tree', 'image')", name=op.f("ck_distro_trees_kind")),
        sa.ForeignKeyConstraint(
            ["lab_id"], ["labs.id"], name=op.f("fk_distro_trees_lab_id_labs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_distro_trees")),
        sa.UniqueConstraint(
            "lab_id", "name", "arch", name=op.f("uq_distro_trees_lab_id_name_arch")
        ),
    )


def downgrade() -> None:
    op.drop_table("distro_trees")
