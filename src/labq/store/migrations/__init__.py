"""Alembic migrations for labq's schema (see docs/storage.md)."""
