"""Eligibility before order: job dependencies, filter rules and paused lab queues.

What a set may do before the queue order even looks at it is decided from
rows: the job's dependencies (``job_dependencies``) and the end states of the
jobs it waits for, the filter rules (``filters``) applied to the job's facts,
and the ``rate-limit:N:label`` items of its reason. :meth:`admission_of` turns
those into what the scheduler needs (a block reason and rate-limit buckets);
the judging itself is pure (:mod:`labq.domain.dependencies`,
:mod:`labq.domain.filters`). The rules themselves are :mod:`labq.store.filters`;
paused lab queues are :mod:`labq.store.pauses`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, bindparam, exists, func, insert, select, update
from sqlalchemy.orm import aliased

from labq.domain import filters
from labq.domain.dependencies import Dependency, Edge, find_cycle, states_text, verdict
from labq.domain.states import FINAL_RECIPE_STATES, RecipeState
from labq.errors import InputError, NotFoundError
from labq.store.base import Db
from labq.store.columns import values_of
from labq.store.filters import FilterStore
from labq.store.jobstate import job_states
from labq.store.moves import RecipeMoves
from labq.store.tables import (
    Groups,
    JobDependencies,
    Jobs,
    Recipes,
    RecipeSets,
    Users,
)


@dataclass(frozen=True)
class JobAdmission:
    """What a job's sets may do: blocked (why), which buckets, or refused for good (why)."""

    blocked: str | None = None
    buckets: tuple[tuple[str, int], ...] = ()
    refused: str | None = None  # a dependency ended wrongly, or a reject rule matches


class AdmissionStore:
    """Dependencies, and what they and the filter rules mean for a job's sets."""

    def __init__(self, db: Db, moves: RecipeMoves, filters: FilterStore) -> None:
        self.db = db
        self.conn = db.conn
        self.moves = moves
        self.filters = filters

    # --- dependencies -------------------------------------------------------------

    def add_dependencies(self, job_id: int, depends: Sequence[Dependency]) -> list[Edge]:
        """Resolve and store a new job's ``depends``; raise InputError naming ``depends[i]``.

        Refused: a job that does not exist, the job itself, a job listed twice, a
        job that already ended in a state the dependency does not accept, and
        anything that would close a cycle. Nothing is stored if one is refused.
        """
        with self.db.atomic():
            edges: list[Edge] = []
            for index, dependency in enumerate(depends):
                place = f"depends[{index}]"
                target = self._resolve(job_id, dependency.job, place)
                if target == job_id:
                    raise InputError(
                        f"job {target} is this job: a job cannot wait for itself"
                        " (a dependency cycle)",
                        place=place,
                    )
                if any(e.on == target for e in edges):
                    raise InputError(f"job {target} is listed twice", place=place)
                edges.append(Edge(target, dependency.on))
            ended = self.ended_jobs([e.on for e in edges])
            for index, edge in enumerate(edges):
                state = ended.get(edge.on)
                if state is not None and state not in edge.accepts:
                    raise InputError(
                        f"job {edge.on} ended {state.value}; this job needs"
                        f" {states_text(edge.accepts)}",
                        place=f"depends[{index}]",
                    )
            cycle = find_cycle(self._graph_from(job_id, [e.on for e in edges]), job_id)
            if cycle is not None:
                path = " → ".join(str(j) for j in cycle)
                raise InputError(f"a dependency cycle: job {path}", place="depends")
            if edges:
                self.conn.execute(
                    insert(JobDependencies),
                    [
                        {"job_id": job_id, "depends_on": e.on, "satisfied_by": _names(e.accepts)}
                        for e in edges
                    ],
                )
        return edges

    def dependencies_of(self, job_ids: Collection[int]) -> dict[int, list[Edge]]:
        """The stored dependencies of some jobs, by job (jobs without any are left out)."""
        out: dict[int, list[Edge]] = defaultdict(list)
        if not job_ids:
            return out
        rows = self.conn.execute(
            select(JobDependencies.job_id, JobDependencies.depends_on, JobDependencies.satisfied_by)
            .where(JobDependencies.job_id.in_(list(job_ids)))
            .order_by(JobDependencies.job_id, JobDependencies.depends_on)
        )
        for job_id, target, accepts in rows:
            out[job_id].append(Edge(target, tuple(RecipeState(s) for s in accepts)))
        return out

    def ended_jobs(self, job_ids: Iterable[int]) -> dict[int, RecipeState]:
        """The end state of each of these jobs that has ended (no attempt can follow)."""
        found = job_states(self.conn, job_ids)
        return {job_id: state for job_id, state in found.items() if state.is_final}

    def dependents_to_review(self, jobs: Collection[int] | None = None) -> dict[int, list[int]]:
        """Jobs with sets still waiting that depend on a job that has ended: job → those sets
        (only among ``jobs`` when given).

        Once a job ends its dependents may run (or never will); the service looks
        at these after every event that may have ended a job.
        """
        if jobs is None:
            rows = self.conn.execute(_dependents(among=False))
        else:
            rows = self.conn.execute(_dependents(among=True), {"jobs": list(jobs)})
        out: dict[int, list[int]] = defaultdict(list)
        for job_id, set_id in rows:
            out[job_id].append(set_id)
        return dict(out)

    def waiting_sets(self) -> dict[int, list[int]]:
        """Every job with sets that have not started nor ended: job → those sets."""
        rows = self.conn.execute(
            select(RecipeSets.job_id, RecipeSets.id)
            .where(RecipeSets.started_at.is_(None), RecipeSets.finished_at.is_(None))
            .order_by(RecipeSets.job_id, RecipeSets.id)
        )
        out: dict[int, list[int]] = defaultdict(list)
        for job_id, set_id in rows:
            out[job_id].append(set_id)
        return dict(out)

    # --- what it all means for a job ------------------------------------------------

    def admission_of(self, job_ids: Collection[int]) -> dict[int, JobAdmission]:
        """For each job: what blocks its waiting sets, their buckets, or why it is refused."""
        if not job_ids:
            return {}
        facts = self.job_facts(job_ids)
        rules = self.filters.filter_rules()
        edges = self.dependencies_of(job_ids)
        ended = self.ended_jobs(e.on for found in edges.values() for e in found)
        out = {}
        for job_id, job in facts.items():
            deps = verdict(edges.get(job_id, []), ended)
            decision = filters.decide(rules, job)
            reasons = [deps.failed, decision.rejected, deps.waiting, decision.blocked]
            out[job_id] = JobAdmission(
                blocked="; ".join(r for r in reasons if r) or None,
                buckets=decision.buckets + filters.reason_buckets(job.reason),
                refused=deps.failed or decision.rejected,
            )
        return out

    def job_facts(self, job_ids: Collection[int]) -> dict[int, filters.JobFacts]:
        """What filter predicates look at, for each of these jobs that exists."""
        rows = self.conn.execute(
            select(Jobs.id, Users.name, Groups.name, Jobs.whiteboard, Jobs.reason)
            .join(Users, Users.id == Jobs.owner_id)
            .outerjoin(Groups, Groups.id == Jobs.group_id)
            .where(Jobs.id.in_(list(job_ids)))
            .order_by(Jobs.id)
        )
        return {row[0]: filters.JobFacts(row[0], row[1], row[2], row[3], row[4]) for row in rows}

    def rejecting_rule(self, job_id: int) -> filters.Rule | None:
        """The reject rule that decides about this job now, if one does."""
        facts = self.job_facts([job_id])
        if job_id not in facts:
            raise NotFoundError(f"no job {job_id}")
        decision = filters.decide(self.filters.filter_rules(), facts[job_id])
        return decision.rule if decision.action == "reject" else None

    def cancel_sets(
        self, set_ids: Iterable[int], *, reason: str, actor: str, now: datetime
    ) -> list[int]:
        """Cancel the unfinished recipes of these sets, saying why; returns the sets touched.

        The reason goes into each recipe's history, the set's error and the activity log.
        """
        touched: list[int] = []
        with self.db.atomic():
            jobs: set[int] = set()
            for set_id in sorted(set(set_ids)):
                rows = self.conn.execute(
                    select(Recipes.id, RecipeSets.job_id)
                    .join(RecipeSets, RecipeSets.id == Recipes.recipe_set_id)
                    .where(
                        Recipes.recipe_set_id == set_id,
                        Recipes.state.not_in(values_of(FINAL_RECIPE_STATES)),
                    )
                    .order_by(Recipes.id)
                ).all()
                moved = [
                    self.moves.move_recipe(rid, RecipeState.CANCELLED, now=now, reason=reason)
                    for rid, _ in rows
                ]
                if any(moved):
                    touched.append(set_id)
                    jobs.update(job for _, job in rows)
                    self.conn.execute(
                        update(RecipeSets).where(RecipeSets.id == set_id).values(error=reason)
                    )
            for job_id in sorted(jobs):
                self.db.log(now, actor, "job", "cancel", object_id=job_id, reason=reason)
        return touched

    # --- filter rules -----------------------------------------------------------------

    def _resolve(self, job_id: int, target: int | str, place: str) -> int:
        if isinstance(target, int):
            found = self.conn.execute(select(Jobs.id).where(Jobs.id == target)).scalar()
            if found is None:
                raise InputError(f"there is no job {target}", place=place)
            return target
        newest = self.conn.execute(
            select(func.max(Jobs.id)).where(Jobs.whiteboard == target, Jobs.id < job_id)
        ).scalar()
        if newest is None:
            raise InputError(f"no earlier job has the whiteboard {target!r}", place=place)
        return int(newest)

    def _graph_from(self, job_id: int, targets: Sequence[int]) -> dict[int, set[int]]:
        """The dependency graph reachable from ``targets``, plus the new job's own edges."""
        graph: dict[int, set[int]] = {job_id: set(targets)}
        frontier = set(targets) - {job_id}
        seen = set(frontier)
        while frontier:
            rows = self.conn.execute(
                select(JobDependencies.job_id, JobDependencies.depends_on).where(
                    JobDependencies.job_id.in_(sorted(frontier))
                )
            ).all()
            frontier = set()
            for source, target in rows:
                graph.setdefault(source, set()).add(target)
                if target not in seen:
                    seen.add(target)
                    frontier.add(target)
        return graph


def _names(states: Iterable[RecipeState]) -> list[str]:
    return [s.value for s in states]


@functools.cache
def _dependents(*, among: bool) -> Select[int, int]:
    """The query of :meth:`AdmissionStore.dependents_to_review`, built once (building it
    costs more than running it); ``among`` limits it to the jobs bound as ``jobs``."""
    waiting = aliased(RecipeSets)
    target = aliased(RecipeSets)
    target_open = exists().where(
        target.job_id == JobDependencies.depends_on, target.finished_at.is_(None)
    )
    where = [waiting.started_at.is_(None), waiting.finished_at.is_(None), ~target_open]
    if among:
        where.append(JobDependencies.job_id.in_(bindparam("jobs", expanding=True)))
    return (
        select(JobDependencies.job_id, waiting.id)
        .join(waiting, waiting.job_id == JobDependencies.job_id)
        .where(*where)
        .distinct()
        .order_by(JobDependencies.job_id, waiting.id)
    )
