"""Lab agents (issue 13): their tokens, their registry, and the sets they claim.

An agent token is ``lqa_`` and 43 URL-safe characters, kept like API tokens as
its SHA-256 digest only, and bound to labs: the agent may claim, beat for and
report on sets started in those labs, and nothing else. A lab that a live
(unrevoked) agent token names is *agent-served*: the server runs no supervisor
of its own for it and waits for an agent to claim its sets.

A claim by an agent is the same guarded UPDATE as a supervisor's
(:meth:`~labq.store.supervisors.SupervisorStore.confirm_claim`): the set's
claim must still be the one the scheduler gave, unconfirmed, on a set that has
neither ended nor been asked to stop; the agent is recorded in ``agent_id`` and
the set's host as ``agent <name>``, so no server ever adopts it as its own.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import insert, select, update

from labq.errors import ClaimLost, ConflictError, InputError, NotFoundError
from labq.store.base import Db
from labq.store.supervisors import Beat, SupervisorStore, untaken
from labq.store.tables import Agents, Labs, Recipes, RecipeSets, Systems, Tasks
from labq.store.tokens import digest_of

AGENT_PREFIX: Final = "lqa_"
AGENT_HOST: Final = "agent "  # supervisor_host of a set an agent claimed: "agent <name>"


@dataclass(frozen=True)
class ReportContext:
    """What applying an agent's reports needs of its set: no more than that (a report call
    is the agent protocol's most frequent, and the whole set view costs several times it)."""

    started_at: datetime | None
    recipes: dict[int, str | None]  # recipe id -> its system's FQDN
    tasks: frozenset[int]


@dataclass(frozen=True)
class AgentView:
    """An agent as the registry knows it."""

    id: int
    name: str
    labs: tuple[str, ...]
    created_at: datetime
    revoked_at: datetime | None
    version: str | None
    host: str | None
    max_sets: int | None
    running: int
    last_seen_at: datetime | None

    def online(self, now: datetime, timeout: float) -> bool:
        """Heard from within ``timeout`` seconds, and not revoked."""
        seen = self.last_seen_at
        return (
            self.revoked_at is None and seen is not None and (now - seen).total_seconds() <= timeout
        )


class AgentStore:
    """Agent tokens and registry; claims, heartbeats and report numbers of agent-run sets."""

    def __init__(self, db: Db, supervisors: SupervisorStore) -> None:
        self.db = db
        self.conn = db.conn
        self.supervisors = supervisors

    # --- the registry -------------------------------------------------------------

    def create_agent(
        self, name: str, labs: Sequence[str], *, now: datetime, actor: str
    ) -> tuple[AgentView, str]:
        """A new agent bound to ``labs`` (each must exist): its view and its token's secret,
        which only the caller ever sees."""
        if not name or len(name) > 255:
            raise InputError("an agent needs a name of 1 to 255 characters", place="name")
        if not labs:
            raise InputError("an agent serves at least one lab", place="labs")
        wanted = sorted(set(labs))
        with self.db.atomic():
            for lab in wanted:
                self.db.lab_id(lab)  # NotFoundError names it
            taken = select(Agents.id).where(Agents.name == name)
            if self.conn.execute(taken).first() is not None:
                raise ConflictError(f"there is an agent called {name!r} already")
            secret = AGENT_PREFIX + secrets.token_urlsafe(32)
            agent_id = self.conn.execute(
                insert(Agents)
                .values(name=name, digest=digest_of(secret), labs=wanted, created_at=now)
                .returning(Agents.id)
            ).scalar_one()
            self.db.log(now, actor, "agent", "create", object_id=agent_id, name=name)
        return self.get_agent(name), secret

    def revoke_agent(self, name: str, *, now: datetime, actor: str) -> AgentView:
        """Revoke an agent's token (it may claim and report nothing more); a repeat is a no-op."""
        with self.db.atomic():
            agent = self.get_agent(name)
            if agent.revoked_at is None:
                self.conn.execute(
                    update(Agents).where(Agents.id == agent.id).values(revoked_at=now)
                )
                self.db.log(now, actor, "agent", "revoke", object_id=agent.id, name=name)
        return self.get_agent(name)

    def get_agent(self, name: str) -> AgentView:
        """One agent by name; NotFoundError when there is none."""
        row = self.conn.execute(select(Agents).where(Agents.name == name)).one_or_none()
        if row is None:
            raise NotFoundError(f"no agent {name!r}")
        return _view(row)

    def list_agents(self) -> list[AgentView]:
        """Every agent, revoked ones too, by name."""
        rows = self.conn.execute(select(Agents).order_by(Agents.name)).all()
        return [_view(r) for r in rows]

    def agent_by_secret(self, secret: str) -> AgentView | None:
        """The unrevoked agent a token secret belongs to; None for anything else."""
        if not secret.startswith(AGENT_PREFIX):
            return None
        wanted = digest_of(secret)
        row = self.conn.execute(
            select(Agents).where(Agents.digest == wanted, Agents.revoked_at.is_(None))
        ).one_or_none()
        if row is None or not hmac.compare_digest(row.digest, wanted):
            return None
        return _view(row)

    def agent_labs(self) -> set[str]:
        """The labs an unrevoked agent token names: their sets are run by agents."""
        rows = self.conn.execute(select(Agents.labs).where(Agents.revoked_at.is_(None)))
        return {str(lab) for (labs,) in rows for lab in labs}

    def agent_seen(
        self,
        agent_id: int,
        *,
        now: datetime,
        running: int | None = None,
        version: str | None = None,
        host: str | None = None,
        max_sets: int | None = None,
    ) -> None:
        """Record that the agent spoke (and what it said of itself)."""
        values: dict[str, object] = {"last_seen_at": now}
        for key, value in (
            ("running", running),
            ("version", version),
            ("host", host),
            ("max_sets", max_sets),
        ):
            if value is not None:
                values[key] = value
        with self.db.atomic():
            self.conn.execute(update(Agents).where(Agents.id == agent_id).values(**values))

    # --- claims and heartbeats ------------------------------------------------------

    def claimable_sets(self, labs: Iterable[str], *, limit: int) -> list[tuple[int, str]]:
        """Started sets of ``labs`` that nobody took up yet, oldest first: ``(set, claim)``."""
        if limit <= 0:
            return []
        stmt = (
            select(RecipeSets.id, RecipeSets.claim)
            .where(
                RecipeSets.started_at.is_not(None),
                RecipeSets.finished_at.is_(None),
                RecipeSets.supervisor_pid.is_(None),
                RecipeSets.claim.is_not(None),
                RecipeSets.stop_reason.is_(None),
                RecipeSets.lab_id.in_(select(Labs.id).where(Labs.name.in_(list(labs)))),
            )
            .order_by(RecipeSets.started_at, RecipeSets.id)
            .limit(limit)
        )
        return [(r[0], str(r[1])) for r in self.conn.execute(stmt)]

    def claim_for_agent(self, set_id: int, claim: str, agent: AgentView, *, now: datetime) -> bool:
        """Take the set up for ``agent`` under the claim the scheduler gave it: the guarded
        UPDATE exactly one taker wins. False when somebody else has it (or it ended)."""
        stmt = (
            update(RecipeSets)
            .where(
                *untaken(set_id, claim),
                RecipeSets.lab_id.in_(select(Labs.id).where(Labs.name.in_(list(agent.labs)))),
            )
            .values(
                supervisor_pid=0,
                supervisor_host=AGENT_HOST + agent.name,
                heartbeat_at=now,
                agent_id=agent.id,
                report_seq=0,
            )
        )
        with self.db.atomic():
            return bool(self.conn.execute(stmt).rowcount == 1)

    def agent_beat(
        self, agent_id: int, sets: Sequence[tuple[int, str]], *, now: datetime
    ) -> dict[int, Beat]:
        """Renew the heartbeat of every set the agent names under its claim; what each is told.

        A set whose supervisor is still the agent's (claim and agent match, not reported
        exited) carries on — also once its recipes all ended by its own reports, while
        the supervisor finishes up; one asked to stop is told ``stop``. A set the server
        ended (quiet, cancelled), another claim holds, or another agent's is ``lost``.
        """
        ids = [s for s, _claim in sets]
        out: dict[int, Beat] = dict.fromkeys(ids, Beat.LOST)
        if not ids:
            return out
        claims = dict(sets)
        with self.db.atomic():
            rows = self.conn.execute(
                select(
                    RecipeSets.id,
                    RecipeSets.claim,
                    RecipeSets.stop_reason,
                    RecipeSets.finished_at,
                ).where(
                    RecipeSets.id.in_(ids),
                    RecipeSets.agent_id == agent_id,
                    RecipeSets.supervisor_pid == 0,
                )
            ).all()
            alive = {}
            for row in rows:
                if row.claim is None or not hmac.compare_digest(row.claim, claims[row.id]):
                    continue
                if row.finished_at is None:
                    alive[row.id] = Beat.CARRY_ON if row.stop_reason is None else Beat.STOP
                elif row.stop_reason is None:
                    alive[row.id] = Beat.CARRY_ON  # ended by its own reports
            if alive:
                self.conn.execute(
                    update(RecipeSets)
                    .where(RecipeSets.id.in_(list(alive)), RecipeSets.supervisor_pid == 0)
                    .values(heartbeat_at=now)
                )
        out.update(alive)
        return out

    def deadlines(self, agent_id: int, set_ids: Sequence[int]) -> dict[int, float]:
        """The current max_time (with extensions) of the agent's unfinished sets that have one:
        what ``labq job extend`` moved, for their supervisors."""
        if not set_ids:
            return {}
        rows = self.conn.execute(
            select(RecipeSets.id, RecipeSets.max_time, RecipeSets.extended).where(
                RecipeSets.id.in_(list(set_ids)),
                RecipeSets.agent_id == agent_id,
                RecipeSets.finished_at.is_(None),
                RecipeSets.max_time.is_not(None),
            )
        ).all()
        return {r.id: float((r.max_time or 0) + (r.extended or 0)) for r in rows}

    def agent_set_exited(self, set_id: int, claim: str, agent_id: int) -> bool:
        """The agent's supervisor of the set exited (supervisor_pid -1): the agent beats for it
        no more. True also for a repeat; False when the set is not the agent's under ``claim``."""
        match = (
            RecipeSets.id == set_id,
            RecipeSets.claim == claim,
            RecipeSets.agent_id == agent_id,
        )
        with self.db.atomic():
            stmt = update(RecipeSets).where(*match, RecipeSets.supervisor_pid == 0)
            if self.conn.execute(stmt.values(supervisor_pid=-1)).rowcount == 1:
                return True
            again = select(RecipeSets.id).where(*match, RecipeSets.supervisor_pid == -1)
            return self.conn.execute(again).first() is not None

    def agent_busy(self, set_ids: Sequence[int], *, since: datetime) -> set[int]:
        """Of ``set_ids``, those an agent's supervisor still runs (not reported exited) and
        heart-beat for since ``since``: their end comes when the agent says so."""
        if not set_ids:
            return set()
        stmt = select(RecipeSets.id).where(
            RecipeSets.id.in_(list(set_ids)),
            RecipeSets.agent_id.is_not(None),
            RecipeSets.supervisor_pid == 0,
            RecipeSets.heartbeat_at >= since,
        )
        return set(self.conn.execute(stmt).scalars())

    def guard_agent_claim(self, set_id: int, claim: str, agent_id: int) -> None:
        """Go on only while the agent's claim holds the unfinished set (locks its row);
        raises :class:`~labq.errors.ClaimLost` otherwise."""
        self.supervisors.guard_claim(set_id, claim)
        owner = select(RecipeSets.agent_id).where(RecipeSets.id == set_id)
        if self.conn.execute(owner).scalar_one_or_none() != agent_id:
            raise ClaimLost(f"recipe set {set_id}: another supervisor holds it")

    def owns_set(self, set_id: int, claim: str, agent_id: int) -> bool:
        """True when the agent claimed the set under ``claim`` (ended or not)."""
        row = self.conn.execute(
            select(RecipeSets.claim).where(RecipeSets.id == set_id, RecipeSets.agent_id == agent_id)
        ).one_or_none()
        return row is not None and row.claim is not None and hmac.compare_digest(row.claim, claim)

    def lab_of_set(self, set_id: int) -> str | None:
        """The lab a set started in (None: not started, or no such set)."""
        stmt = (
            select(Labs.name)
            .join(RecipeSets, RecipeSets.lab_id == Labs.id)
            .where(RecipeSets.id == set_id)
        )
        return self.conn.execute(stmt).scalar_one_or_none()

    def report_context(self, set_id: int) -> ReportContext:
        """The set's start, its recipes' systems and its task ids (NotFoundError: no set)."""
        started = self.conn.execute(
            select(RecipeSets.started_at).where(RecipeSets.id == set_id)
        ).one_or_none()
        if started is None:
            raise NotFoundError(f"no recipe set {set_id}")
        recipes = self.conn.execute(
            select(Recipes.id, Systems.fqdn)
            .outerjoin(Systems, Systems.id == Recipes.system_id)
            .where(Recipes.recipe_set_id == set_id)
        ).all()
        tasks = self.conn.execute(
            select(Tasks.id)
            .join(Recipes, Recipes.id == Tasks.recipe_id)
            .where(Recipes.recipe_set_id == set_id)
        ).scalars()
        return ReportContext(started[0], {r.id: r.fqdn for r in recipes}, frozenset(tasks))

    def task_results(self, recipe_id: int) -> list[str | None]:
        """The results of a recipe's tasks (None: none yet), as stored."""
        stmt = select(Tasks.result).where(Tasks.recipe_id == recipe_id).order_by(Tasks.position)
        return list(self.conn.execute(stmt).scalars())

    def stop_reason(self, set_id: int) -> str | None:
        """Why the set was asked to stop (None: it was not)."""
        stmt = select(RecipeSets.stop_reason).where(RecipeSets.id == set_id)
        reason: str | None = self.conn.execute(stmt).scalar_one_or_none()
        return reason

    def report_seq(self, set_id: int) -> int:
        """The number of the last report of the set's agent applied."""
        stmt = select(RecipeSets.report_seq).where(RecipeSets.id == set_id)
        return int(self.conn.execute(stmt).scalar_one())

    def set_report_seq(self, set_id: int, seq: int) -> None:
        """Record the last report applied."""
        with self.db.atomic():
            self.conn.execute(
                update(RecipeSets).where(RecipeSets.id == set_id).values(report_seq=seq)
            )


def _view(row: Any) -> AgentView:
    return AgentView(
        id=row.id,
        name=row.name,
        labs=tuple(str(x) for x in row.labs),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        version=row.version,
        host=row.host,
        max_sets=row.max_sets,
        running=row.running,
        last_seen_at=row.last_seen_at,
    )
