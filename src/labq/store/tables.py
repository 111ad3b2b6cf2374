"""The schema: one class per table, read like SQL (``update(Recipes).where(...)``).

Enum columns hold the enum's ``.value`` and carry a CHECK constraint; further
CHECKs forbid combinations the lifecycle can never produce. The migration in
``migrations/versions`` builds exactly this schema (a test compares them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column

from labq.domain.priority import Priority
from labq.domain.states import (
    FINAL_RECIPE_STATES,
    SYSTEM_HOLDING_STATES,
    Condition,
    RecipeState,
    Result,
    Usage,
)
from labq.store.columns import UTCDateTime, one_of, sql_list, values_of

NAMING: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
PRIORITIES: Final = tuple(p.label for p in Priority)
TASK_STATUSES: Final = ("new", "running", "completed", "cancelled", "aborted")
FINAL_TASK_STATUSES: Final = ("completed", "cancelled", "aborted")
FREE_USAGES: Final = values_of((Usage.IDLE, Usage.PENDING))


_HOLDING = sql_list(values_of(s for s in RecipeState if s in SYSTEM_HOLDING_STATES))
_FINAL = sql_list(values_of(s for s in RecipeState if s in FINAL_RECIPE_STATES))
_UNPLACED = sql_list(values_of((RecipeState.NEW, RecipeState.QUEUED, RecipeState.ASSIGNED)))
_FREE = sql_list(FREE_USAGES)
_TASK_FINAL = sql_list(FINAL_TASK_STATUSES)
# Partial indexes work on SQLite and PostgreSQL alike.
_OPEN = text("finished_at IS NULL")

Name = String(255)
EnumText = String(16)


class Base(DeclarativeBase):
    """Declarative base with constraint names Alembic can rely on."""

    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy's class-level configuration
        dict[str, Any]: JSON,
        list[Any]: JSON,
        datetime: UTCDateTime,
    }


def _id() -> Mapped[int]:
    return mapped_column(Integer, primary_key=True)


def _fk(target: str, *, cascade: bool = False, **kw: Any) -> MappedColumn[Any]:
    return mapped_column(ForeignKey(target, ondelete="CASCADE" if cascade else None), **kw)


class Labs(Base):
    __tablename__ = "labs"
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)


class Users(Base):
    __tablename__ = "users"
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)
    admin: Mapped[bool] = mapped_column(Boolean)
    # ``scrypt$n$r$p$salt$hash``: parameters and salt travel with the digest.
    password_digest: Mapped[str | None] = mapped_column(Text)


class Groups(Base):
    __tablename__ = "groups"
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)


class Memberships(Base):
    __tablename__ = "memberships"
    user_id: Mapped[int] = _fk("users.id", cascade=True, primary_key=True)
    group_id: Mapped[int] = _fk("groups.id", cascade=True, primary_key=True, index=True)


class Pools(Base):
    __tablename__ = "pools"
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)
    # Once a pool has had an access rule it stays restricted (AccessPolicy's rule).
    restricted: Mapped[bool] = mapped_column(Boolean)


class Systems(Base):
    __tablename__ = "systems"
    __table_args__ = (
        one_of("condition", values_of(Condition)),
        one_of("usage", values_of(Usage)),
        # A system is busy exactly when a recipe holds it.
        CheckConstraint(
            f"(recipe_id IS NULL AND usage IN {_FREE})"
            f" OR (recipe_id IS NOT NULL AND usage NOT IN {_FREE})",
            name="busy_iff_held",
        ),
        CheckConstraint("consecutive_aborts >= 0", name="consecutive_aborts"),
        Index(None, "lab_id", "usage"),
    )
    id: Mapped[int] = _id()
    fqdn: Mapped[str] = mapped_column(Name, unique=True)
    lab_id: Mapped[int] = _fk("labs.id")
    arch: Mapped[str] = mapped_column(String(64))
    owner_id: Mapped[int | None] = _fk("users.id")
    attributes: Mapped[dict[str, Any]]
    # devices, disks, cpu flags, last_inventoried (labq.domain.inventory); {} = never
    inventory: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'"))
    condition: Mapped[str] = mapped_column(EnumText)
    condition_reason: Mapped[str | None] = mapped_column(Text)
    usage: Mapped[str] = mapped_column(EnumText)
    # systems ↔ recipes is a cycle; use_alter lets metadata sort the tables.
    recipe_id: Mapped[int | None] = mapped_column(
        ForeignKey("recipes.id", use_alter=True), unique=True
    )
    # Sets aborted on it in a row since one completed (issue 4's health rule).
    consecutive_aborts: Mapped[int] = mapped_column(Integer, server_default=text("0"))


class SystemPools(Base):
    __tablename__ = "system_pools"
    system_id: Mapped[int] = _fk("systems.id", cascade=True, primary_key=True)
    pool_id: Mapped[int] = _fk("pools.id", cascade=True, primary_key=True, index=True)


class AccessRules(Base):
    __tablename__ = "access_rules"
    __table_args__ = (
        UniqueConstraint("pool_id", "group_id"),
        one_of("max_priority", PRIORITIES),
    )
    id: Mapped[int] = _id()
    pool_id: Mapped[int] = _fk("pools.id", cascade=True)
    group_id: Mapped[int] = _fk("groups.id", cascade=True, index=True)
    max_priority: Mapped[str] = mapped_column(EnumText)


class Runs(Base):
    """Jobs submitted together (a suite, or several files at once), named like Pulpito's runs."""

    __tablename__ = "runs"
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)
    owner_id: Mapped[int] = _fk("users.id")
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
    id: Mapped[int] = _id()
    owner_id: Mapped[int] = _fk("users.id", index=True)
    group_id: Mapped[int | None] = _fk("groups.id")
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
    run_id: Mapped[int | None] = _fk("runs.id", index=True)
    cloned_from: Mapped[int | None] = _fk("jobs.id", index=True)  # the job this one re-runs


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
        Index("ix_recipe_sets_unfinished", "id", sqlite_where=_OPEN, postgresql_where=_OPEN),
    )
    id: Mapped[int] = _id()
    job_id: Mapped[int] = _fk("jobs.id", cascade=True)
    position: Mapped[int]
    priority: Mapped[str] = mapped_column(EnumText)
    max_retries: Mapped[int]
    max_time: Mapped[int | None]
    locks: Mapped[dict[str, Any]]
    # The set this one retries; unique, so a set is retried at most once (a chain).
    retry_of: Mapped[int | None] = _fk("recipe_sets.id", unique=True)
    attempt: Mapped[int]
    error: Mapped[str | None] = mapped_column(Text)
    # The job's submit time, or the time a retry was cloned: its place in the queue.
    submitted_at: Mapped[datetime]
    lab_id: Mapped[int | None] = _fk("labs.id")  # the lab it started in
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
    agent_id: Mapped[int | None] = _fk("agents.id", index=True)
    report_seq: Mapped[int] = mapped_column(server_default="0")
    # Seconds its max_time was extended by while it ran (``labq job extend``).
    extended: Mapped[int] = mapped_column(server_default="0")


class Agents(Base):
    """Lab agents: a token (its SHA-256 digest) bound to labs, and what the agent last said."""

    __tablename__ = "agents"
    __table_args__ = (CheckConstraint("length(digest) = 64", name="digest"),)
    id: Mapped[int] = _id()
    name: Mapped[str] = mapped_column(Name, unique=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    labs: Mapped[list[Any]]
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]
    version: Mapped[str | None] = mapped_column(Name)
    host: Mapped[str | None] = mapped_column(Name)
    max_sets: Mapped[int | None]
    running: Mapped[int] = mapped_column(server_default="0")
    last_seen_at: Mapped[datetime | None]


class Recipes(Base):
    __tablename__ = "recipes"
    __table_args__ = (
        UniqueConstraint("recipe_set_id", "position"),
        one_of("state", values_of(RecipeState)),
        one_of("result", values_of(Result)),
        CheckConstraint(f"state NOT IN {_HOLDING} OR system_id IS NOT NULL", name="holds_system"),
        CheckConstraint(f"state NOT IN {_UNPLACED} OR system_id IS NULL", name="unplaced"),
        CheckConstraint(
            f"(state IN {_FINAL} AND finished_at IS NOT NULL)"
            f" OR (state NOT IN {_FINAL} AND finished_at IS NULL)",
            name="finished",
        ),
        Index(None, "state"),
    )
    id: Mapped[int] = _id()
    recipe_set_id: Mapped[int] = _fk("recipe_sets.id", cascade=True)
    position: Mapped[int]
    role: Mapped[str | None] = mapped_column(Name)
    host: Mapped[dict[str, Any]]  # requirements.to_native form
    force: Mapped[str | None] = mapped_column(Name)
    state: Mapped[str] = mapped_column(EnumText)
    # The system it holds while placed, and where it ran once finished.
    system_id: Mapped[int | None] = _fk("systems.id", index=True)
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
    id: Mapped[int] = _id()
    recipe_id: Mapped[int] = _fk("recipes.id", cascade=True)
    state: Mapped[str] = mapped_column(EnumText)
    at: Mapped[datetime]
    reason: Mapped[str | None] = mapped_column(Text)


class RecipeExcludes(Base):
    __tablename__ = "recipe_excludes"
    recipe_id: Mapped[int] = _fk("recipes.id", cascade=True, primary_key=True)
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
            f"(status IN {_TASK_FINAL} AND finished_at IS NOT NULL)"
            f" OR (status NOT IN {_TASK_FINAL} AND finished_at IS NULL)",
            name="finished",
        ),
        CheckConstraint(
            "finished_at IS NULL OR started_at IS NULL OR finished_at >= started_at",
            name="ends_after_start",
        ),
    )
    id: Mapped[int] = _id()
    recipe_id: Mapped[int] = _fk("recipes.id", cascade=True)
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


class UsageHistory(Base):
    __tablename__ = "usage_history"
    __table_args__ = (
        one_of("usage", values_of(Usage)),
        one_of("condition", values_of(Condition)),
        CheckConstraint("ended_at IS NULL OR ended_at >= started_at", name="ends_after_start"),
        Index(None, "system_id", "started_at"),
        # One open row per system; partial unique indexes work on SQLite and PostgreSQL.
        Index(
            "uq_usage_history_open",
            "system_id",
            unique=True,
            sqlite_where=text("ended_at IS NULL"),
            postgresql_where=text("ended_at IS NULL"),
        ),
    )
    id: Mapped[int] = _id()
    system_id: Mapped[int] = _fk("systems.id", cascade=True)
    usage: Mapped[str] = mapped_column(EnumText)
    condition: Mapped[str] = mapped_column(EnumText)
    recipe_id: Mapped[int | None] = mapped_column(ForeignKey("recipes.id", ondelete="SET NULL"))
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]


class Activity(Base):
    __tablename__ = "activity"
    __table_args__ = (
        CheckConstraint("object_id IS NOT NULL OR object_name IS NOT NULL", name="object"),
        Index(None, "object_kind", "object_id"),
        Index(None, "at"),
    )
    id: Mapped[int] = _id()
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(Name)
    object_kind: Mapped[str] = mapped_column(String(32))
    object_id: Mapped[int | None]
    object_name: Mapped[str | None] = mapped_column(Name)
    action: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(Text)
    new_value: Mapped[str | None] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)


class Tokens(Base):
    """API tokens: only the SHA-256 digest of the secret is kept, never the secret."""

    __tablename__ = "tokens"
    __table_args__ = (
        # 64 hex digits: a secret (``lq_…``, 46 characters) can never be stored by mistake.
        CheckConstraint("length(digest) = 64", name="digest"),
        CheckConstraint("expires_at IS NULL OR expires_at > created_at", name="expires"),
        CheckConstraint("revoked_at IS NULL OR revoked_at >= created_at", name="revoked"),
    )
    id: Mapped[int] = _id()
    user_id: Mapped[int] = _fk("users.id", cascade=True, index=True)
    name: Mapped[str] = mapped_column(Name)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    # A set's own credentials (its supervisor and tasks): valid only while it runs.
    recipe_set_id: Mapped[int | None] = _fk("recipe_sets.id", cascade=True, index=True)


FILTER_ACTIONS: Final = ("accept", "continue", "pause", "reject", "rate-limit")


class JobDependencies(Base):
    """A job waits for another to end in one of ``satisfied_by`` (recipe set states)."""

    __tablename__ = "job_dependencies"
    __table_args__ = (CheckConstraint("job_id <> depends_on", name="not_itself"),)
    job_id: Mapped[int] = _fk("jobs.id", cascade=True, primary_key=True)
    depends_on: Mapped[int] = _fk("jobs.id", cascade=True, primary_key=True, index=True)
    satisfied_by: Mapped[list[Any]]


class Filters(Base):
    """Queue filter rules (Ganeti's job filters), tried in ``(priority, id)`` order."""

    __tablename__ = "filters"
    __table_args__ = (
        one_of("action", FILTER_ACTIONS),
        CheckConstraint(
            "(action = 'rate-limit' AND rate IS NOT NULL AND rate > 0)"
            " OR (action <> 'rate-limit' AND rate IS NULL)",
            name="rate",
        ),
        CheckConstraint("priority >= 0", name="priority"),
    )
    id: Mapped[int] = _id()
    priority: Mapped[int]
    action: Mapped[str] = mapped_column(String(16))
    rate: Mapped[int | None]
    predicates: Mapped[list[Any]]
    comment: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[int | None] = _fk("users.id")
    created_at: Mapped[datetime]


class LabPauses(Base):
    """A lab whose queue is paused: nothing new starts there until resumed or ``until``."""

    __tablename__ = "lab_pauses"
    __table_args__ = (CheckConstraint("until IS NULL OR until > since", name="until"),)
    lab_id: Mapped[int] = _fk("labs.id", cascade=True, primary_key=True)
    since: Mapped[datetime]
    until: Mapped[datetime | None]
    reason: Mapped[str | None] = mapped_column(Text)
    paused_by: Mapped[int | None] = _fk("users.id")


class LockGrants(Base):
    """A lock a running set holds: ``name`` on ``level`` (``*``: every name), shared or not."""

    __tablename__ = "lock_grants"
    __table_args__ = (
        UniqueConstraint("recipe_set_id", "level", "name", "exclusive"),
        Index(None, "level", "name"),
    )
    id: Mapped[int] = _id()
    recipe_set_id: Mapped[int] = _fk("recipe_sets.id", cascade=True)
    level: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(Name)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    acquired_at: Mapped[datetime]


class LockWaiters(Base):
    """A request waiting for locks, first come first served by ``id`` (a set may have several)."""

    __tablename__ = "lock_waiters"
    id: Mapped[int] = _id()
    recipe_set_id: Mapped[int] = _fk("recipe_sets.id", cascade=True, index=True)
    grants: Mapped[list[Any]]  # [[level, name, exclusive], …]
    since: Mapped[datetime]
    seen_at: Mapped[datetime]  # the last time the waiter asked; stale waiters are dropped


class Installation(Base):
    """Who this database is: one row, made by the migration. Everything a server keeps on disk
    for it lives in a data directory marked with this id (``labq.store.installation``)."""

    __tablename__ = "installation"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    created_at: Mapped[datetime]


class Leadership(Base):
    """The scheduler's leader epoch (one row). Each new leader raises it; every scheduling
    transaction first checks that it is still its own, so a deposed leader cannot write."""

    __tablename__ = "leadership"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    epoch: Mapped[int]
    holder: Mapped[str | None] = mapped_column(Name)
    since: Mapped[datetime | None]


class SystemReservations(Base):
    """A system reserved or loaned to a person (issue 14): not offered to the queue while open.

    ``kind`` is ``reserve`` (a recipe's ``<reservesys>`` or ``labq system reserve``, whose
    recipe is ``recipe_id``) or ``loan`` (an admin's). Open while ``released_at`` is NULL
    and ``until`` (None: no end) has not passed; at most one open per system.
    """

    __tablename__ = "system_reservations"
    __table_args__ = (
        one_of("kind", ("reserve", "loan")),
        CheckConstraint("until IS NULL OR until > since", name="until"),
        CheckConstraint("released_at IS NULL OR released_at >= since", name="released"),
        Index(
            "uq_system_reservations_open",
            "system_id",
            unique=True,
            sqlite_where=text("released_at IS NULL"),
            postgresql_where=text("released_at IS NULL"),
        ),
    )
    id: Mapped[int] = _id()
    system_id: Mapped[int] = _fk("systems.id", cascade=True, index=True)
    holder_id: Mapped[int] = _fk("users.id")
    kind: Mapped[str] = mapped_column(String(16))
    recipe_id: Mapped[int | None] = mapped_column(ForeignKey("recipes.id", ondelete="SET NULL"))
    since: Mapped[datetime]
    until: Mapped[datetime | None]
    released_at: Mapped[datetime | None]
    released_by: Mapped[int | None] = _fk("users.id")
    reason: Mapped[str | None] = mapped_column(Text)


NOTIFICATION_KINDS: Final = ("email", "webhook")
NOTIFICATION_STATES: Final = ("pending", "sent", "failed")


class Webhooks(Base):
    """Where a user's or a group's job ends are POSTed; ``secret`` signs each body (HMAC)."""

    __tablename__ = "webhooks"
    __table_args__ = (CheckConstraint("(user_id IS NULL) <> (group_id IS NULL)", name="one_owner"),)
    id: Mapped[int] = _id()
    user_id: Mapped[int | None] = _fk("users.id", cascade=True, index=True)
    group_id: Mapped[int | None] = _fk("groups.id", cascade=True, index=True)
    url: Mapped[str] = mapped_column(Text)
    # kept as it is: an HMAC needs the secret itself; shown to its creator once
    secret: Mapped[str] = mapped_column(String(64))
    created_by: Mapped[str] = mapped_column(Name)
    created_at: Mapped[datetime]


class JobNotices(Base):
    """A job whose end was seen and whose notifications were queued: each job once."""

    __tablename__ = "job_notices"
    job_id: Mapped[int] = _fk("jobs.id", cascade=True, primary_key=True)
    state: Mapped[str] = mapped_column(EnumText)
    noticed_at: Mapped[datetime]


class Notifications(Base):
    """The outbox: one email or webhook POST owed for a job's end, until sent or given up."""

    __tablename__ = "notifications"
    __table_args__ = (
        one_of("kind", NOTIFICATION_KINDS),
        one_of("state", NOTIFICATION_STATES),
        CheckConstraint("(state = 'sent') = (sent_at IS NOT NULL)", name="sent"),
        CheckConstraint("attempts >= 0", name="attempts"),
        Index(None, "state", "next_at"),
    )
    id: Mapped[int] = _id()
    job_id: Mapped[int] = _fk("jobs.id", cascade=True, index=True)
    kind: Mapped[str] = mapped_column(EnumText)
    # the webhook it goes to (None for email, or once the webhook was removed)
    webhook_id: Mapped[int | None] = mapped_column(ForeignKey("webhooks.id", ondelete="SET NULL"))
    target: Mapped[str] = mapped_column(Text)  # the URL, or the addresses comma-separated
    payload: Mapped[dict[str, Any]]  # the body, made once so every attempt sends the same
    state: Mapped[str] = mapped_column(EnumText)
    attempts: Mapped[int]
    next_at: Mapped[datetime]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]


class LogPrunes(Base):
    """A job whose logs the retention pass deleted, and when."""

    __tablename__ = "log_prunes"
    job_id: Mapped[int] = _fk("jobs.id", cascade=True, primary_key=True)
    tag: Mapped[str] = mapped_column(Name)
    deleted_at: Mapped[datetime]
    files: Mapped[int]
    bytes: Mapped[int]
