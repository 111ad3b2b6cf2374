"""Jobs, their recipe sets, recipes and tasks, their history, runs, sources and dependencies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from labq.domain.states import RecipeState, Result
from labq.store.columns import one_of, values_of
from labq.store.tables.schema import (
    FINAL,
    HOLDING,
    OPEN,
    PRIORITIES,
    TASK_FINAL,
    TASK_STATUSES,
    UNPLACED,
    Base,
    EnumText,
    Name,
    foreign_key,
    id_column,
)


class Runs(Base):
    """Jobs submitted together (a suite, or several files at once), named like Pulpito's runs."""

    __tablename__ = "runs"
    id: Mapped[int] = id_column()
    name: Mapped[str] = mapped_column(Name, unique=True)
    owner_id: Mapped[int] = foreign_key("users.id")
    created_at: Mapped[datetime]
    # where it came from (the suite, its seed and subset), for reruns
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, key="meta")


class Jobs(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(
            "ref_repo IS NOT NULL OR (ref_branch IS NULL AND ref_commit IS NULL)", name="ref"
        ),
    )
    id: Mapped[int] = id_column()
    owner_id: Mapped[int] = foreign_key("users.id", index=True)
    group_id: Mapped[int | None] = foreign_key("groups.id")
    whiteboard: Mapped[str | None] = mapped_column(Text)
    submitted_at: Mapped[datetime]
    ref_repo: Mapped[str | None] = mapped_column(Text)
    ref_branch: Mapped[str | None] = mapped_column(Name)
    ref_commit: Mapped[str | None] = mapped_column(String(64))
    source_format: Mapped[str] = mapped_column(String(32))
    depends: Mapped[list[Any]]
    # Why it was submitted; ``rate-limit:N:label`` in it caps such jobs running at once.
    reason: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, key="meta")
    spec: Mapped[dict[str, Any]]  # the canonical form as submitted, for audit
    run_id: Mapped[int | None] = foreign_key("runs.id", index=True)
    cloned_from: Mapped[int | None] = foreign_key("jobs.id", index=True)  # the job this one re-runs


class JobSources(Base):
    """The document a job was submitted as, verbatim (a UTF-8 BOM aside): what ``clone``
    submits again. Its own table: listing jobs never reads a document."""

    __tablename__ = "job_sources"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    document: Mapped[str] = mapped_column(Text)


class RecipeSets(Base):
    __tablename__ = "recipe_sets"
    __table_args__ = (
        UniqueConstraint("job_id", "position"),
        one_of("priority", PRIORITIES),
        CheckConstraint("max_retries >= 0", name="max_retries"),
        CheckConstraint("max_time IS NULL OR max_time > 0", name="max_time"),
        CheckConstraint("extended >= 0", name="extended"),
        CheckConstraint(
            "(retry_of IS NULL AND attempt = 1) OR (retry_of IS NOT NULL AND attempt > 1)",
            name="attempt",
        ),
        CheckConstraint("started_at IS NULL OR lab_id IS NOT NULL", name="started_in_lab"),
        CheckConstraint(
            "finished_at IS NULL OR started_at IS NULL OR finished_at >= started_at",
            name="ends_after_start",
        ),
        CheckConstraint(
            "supervisor_pid IS NULL OR (started_at IS NOT NULL"
            " AND supervisor_host IS NOT NULL AND heartbeat_at IS NOT NULL)",
            name="supervisor",
        ),
        # a started set asked to stop, or one cancelled before it started (then ended)
        CheckConstraint(
            "stop_reason IS NULL OR started_at IS NOT NULL OR finished_at IS NOT NULL",
            name="stop_after_start",
        ),
        CheckConstraint("claim IS NULL OR started_at IS NOT NULL", name="claim_after_start"),
        CheckConstraint("supervisor_pid IS NULL OR claim IS NOT NULL", name="supervisor_has_claim"),
        Index("ix_recipe_sets_unfinished", "id", sqlite_where=OPEN, postgresql_where=OPEN),
    )
    id: Mapped[int] = id_column()
    job_id: Mapped[int] = foreign_key("jobs.id", cascade=True)
    position: Mapped[int]
    priority: Mapped[str] = mapped_column(EnumText)
    max_retries: Mapped[int]
    max_time: Mapped[int | None]
    locks: Mapped[dict[str, Any]]
    # The set this one retries; unique, so a set is retried at most once (a chain).
    retry_of: Mapped[int | None] = foreign_key("recipe_sets.id", unique=True)
    attempt: Mapped[int]
    error: Mapped[str | None] = mapped_column(Text)
    # The job's submit time, or the time a retry was cloned: its place in the queue.
    submitted_at: Mapped[datetime]
    lab_id: Mapped[int | None] = foreign_key("labs.id")  # the lab it started in
    started_at: Mapped[datetime | None]
    # Set when its last recipe ends; the set's state itself stays derived.
    finished_at: Mapped[datetime | None]
    supervisor_pid: Mapped[int | None]
    supervisor_host: Mapped[str | None] = mapped_column(Name)
    heartbeat_at: Mapped[datetime | None]
    stop_reason: Mapped[str | None] = mapped_column(Text)  # why it was asked to stop or cancelled
    # The one supervisor that may run a started set: a token given when the set starts (or is
    # re-dispatched); every write a supervisor makes is guarded by it.
    claim: Mapped[str | None] = mapped_column(String(64))
    # The lab agent that claimed it (None: a supervisor of the server's own), and the last
    # of its agent's reports applied (reports are numbered, so a retried one applies once).
    agent_id: Mapped[int | None] = foreign_key("agents.id", index=True)
    report_seq: Mapped[int] = mapped_column(server_default="0")
    # Seconds its max_time was extended by while it ran (``labq job extend``).
    extended: Mapped[int] = mapped_column(server_default="0")
    # What kind of work it is, set once when it is stored (``labq.domain.runkind``): its job's
    # source (a clone's original's), and its recipes' task list and host requirements.
    source_key: Mapped[str | None] = mapped_column(String(32))
    work_key: Mapped[str | None] = mapped_column(String(32))
    # Its run-time prediction when the scheduler took it (seconds, spread, runs, median, basis)
    prediction: Mapped[dict[str, Any] | None]


class RunHistory(Base):
    """One row per started set that ended: how long it ran and how it ended, with the kind of
    work it was, for the run-time predictions (``repo.history``)."""

    __tablename__ = "run_history"
    __table_args__ = (
        one_of("outcome", ("completed", "aborted", "cancelled")),
        CheckConstraint("seconds >= 0", name="seconds"),
        Index(None, "source_key", "id"),
        Index(None, "work_key", "id"),
        Index(None, "owner", "id"),
        Index(None, "group", "id"),
    )
    id: Mapped[int] = id_column()
    set_id: Mapped[int] = foreign_key("recipe_sets.id", cascade=True, unique=True)
    source_key: Mapped[str | None] = mapped_column(String(32))
    work_key: Mapped[str | None] = mapped_column(String(32))
    owner: Mapped[str] = mapped_column(Name)
    group: Mapped[str | None] = mapped_column(Name)
    seconds: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(EnumText)
    finished_at: Mapped[datetime]


class Recipes(Base):
    __tablename__ = "recipes"
    __table_args__ = (
        UniqueConstraint("recipe_set_id", "position"),
        one_of("state", values_of(RecipeState)),
        one_of("result", values_of(Result)),
        CheckConstraint(f"state NOT IN {HOLDING} OR system_id IS NOT NULL", name="holds_system"),
        CheckConstraint(f"state NOT IN {UNPLACED} OR system_id IS NULL", name="unplaced"),
        CheckConstraint(
            f"(state IN {FINAL} AND finished_at IS NOT NULL)"
            f" OR (state NOT IN {FINAL} AND finished_at IS NULL)",
            name="finished",
        ),
        Index(None, "state"),
    )
    id: Mapped[int] = id_column()
    recipe_set_id: Mapped[int] = foreign_key("recipe_sets.id", cascade=True)
    position: Mapped[int]
    role: Mapped[str | None] = mapped_column(Name)
    host: Mapped[dict[str, Any]]  # requirements.to_native form
    force: Mapped[str | None] = mapped_column(Name)
    state: Mapped[str] = mapped_column(EnumText)
    # The system it holds while placed, and where it ran once finished.
    system_id: Mapped[int | None] = foreign_key("systems.id", index=True)
    whiteboard: Mapped[str | None] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON, key="meta")
    result: Mapped[str | None] = mapped_column(EnumText)
    queued_at: Mapped[datetime | None]
    scheduled_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    log_dir: Mapped[str | None] = mapped_column(Text)


class RecipeHistory(Base):
    """One row per recipe move, the first ``new`` row included."""

    __tablename__ = "recipe_history"
    __table_args__ = (
        one_of("state", values_of(RecipeState)),
        Index(None, "recipe_id", "at"),
    )
    id: Mapped[int] = id_column()
    recipe_id: Mapped[int] = foreign_key("recipes.id", cascade=True)
    state: Mapped[str] = mapped_column(EnumText)
    at: Mapped[datetime]
    reason: Mapped[str | None] = mapped_column(Text)


class RecipeExcludes(Base):
    __tablename__ = "recipe_excludes"
    recipe_id: Mapped[int] = foreign_key("recipes.id", cascade=True, primary_key=True)
    fqdn: Mapped[str] = mapped_column(Name, primary_key=True)


class Tasks(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("recipe_id", "position"),
        one_of("result", values_of(Result)),
        one_of("status", TASK_STATUSES),
        CheckConstraint("timeout IS NULL OR timeout > 0", name="timeout"),
        CheckConstraint(
            "status NOT IN ('running', 'completed') OR started_at IS NOT NULL", name="ran"
        ),
        CheckConstraint(
            f"(status IN {TASK_FINAL} AND finished_at IS NOT NULL)"
            f" OR (status NOT IN {TASK_FINAL} AND finished_at IS NULL)",
            name="finished",
        ),
        CheckConstraint(
            "finished_at IS NULL OR started_at IS NULL OR finished_at >= started_at",
            name="ends_after_start",
        ),
    )
    id: Mapped[int] = id_column()
    recipe_id: Mapped[int] = foreign_key("recipes.id", cascade=True)
    position: Mapped[int]
    name: Mapped[str] = mapped_column(Name)
    run: Mapped[str | None] = mapped_column(Text)
    params: Mapped[dict[str, Any]]
    timeout: Mapped[int | None]
    role: Mapped[str | None] = mapped_column(Name)
    result: Mapped[str | None] = mapped_column(EnumText)
    status: Mapped[str] = mapped_column(EnumText)
    exit_code: Mapped[int | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    log_path: Mapped[str | None] = mapped_column(Text)
    message: Mapped[str | None] = mapped_column(Text)


class JobDependencies(Base):
    """A job waits for another to end in one of ``satisfied_by`` (recipe set states)."""

    __tablename__ = "job_dependencies"
    __table_args__ = (CheckConstraint("job_id <> depends_on", name="not_itself"),)
    job_id: Mapped[int] = foreign_key("jobs.id", cascade=True, primary_key=True)
    depends_on: Mapped[int] = foreign_key("jobs.id", cascade=True, primary_key=True, index=True)
    satisfied_by: Mapped[list[Any]]
