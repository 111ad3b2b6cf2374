"""``labq sim export``: the lab's own history as a ``labq sim`` scenario (issue 15).

A window of the live database becomes a scenario that replays it: the labs,
pools and access rules, the systems with their facts and the condition changes
they went through, and every job submitted in the window with its recipe sets
— priorities, groups, declared locks, ``max_time`` — each recipe with its
*measured* duration (its set's start to its system's release), its outcome
(an abort on the system where it happened) and what really happened
(``recorded``: when its set started, on which system), plus cancels and
priority changes as events. ``anonymise`` replaces the names of people, groups,
labs, pools and systems by stable pseudonyms and drops task commands and
whiteboards.

What cannot be replayed is said in the scenario's ``notes``: a duration that
depended on the system it ran on, manual actions (a system reserved by hand),
and sets that had not ended when the window closed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from labq.config import Settings
from labq.domain import requirements
from labq.domain.states import Condition, RecipeState, Result
from labq.store import Repository, epoch
from labq.store.views import JobView, RecipeSetView, RecipeView

DEFAULT_DURATION: Final = 60.0  # a recipe that never ran (cancelled in the queue)


@dataclass
class Names:
    """Pseudonyms, stable for one installation: the same name always gets the same one."""

    secret: bytes
    anonymise: bool
    seen: dict[str, str] = field(default_factory=dict)

    def of(self, kind: str, name: str) -> str:
        """``name`` as exported (itself unless anonymising)."""
        if not self.anonymise:
            return name
        key = f"{kind}:{name}"
        if key not in self.seen:
            tag = hmac.new(self.secret, key.encode(), hashlib.sha256).hexdigest()[:10]
            self.seen[key] = f"{kind}-{tag}" + (".example" if kind == "system" else "")
        return self.seen[key]

    def scrub(self, value: Any) -> Any:
        """Every string in ``value`` with each known name replaced (requirements name
        systems and labs as values)."""
        if not self.anonymise:
            return value
        if isinstance(value, str):
            for key, pseudonym in sorted(self.seen.items(), key=lambda kv: -len(kv[0])):
                value = value.replace(key.partition(":")[2], pseudonym)
            return value
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        if isinstance(value, dict):
            return {self.scrub(k): self.scrub(v) for k, v in value.items()}
        return value


@dataclass(frozen=True)
class Moments:
    """Per recipe: when its system went back to the scheduler, and when the scheduler
    first moved it (took its job in)."""

    released: Mapping[int, datetime]
    taken_in: Mapping[int, datetime]


def export_scenario(
    repo: Repository,
    settings: Settings,
    *,
    since: datetime,
    until: datetime,
    labs: Iterable[str] = (),
    anonymise: bool = False,
) -> dict[str, Any]:
    """The window ``[since, until)`` as scenario data (dump it as YAML)."""
    wanted = set(labs)
    names = Names(repo.leadership.installation_id().encode(), anonymise)
    systems = [s for s in repo.systems.list_systems() if not wanted or s.lab in wanted]
    for s in systems:  # every name first, so scrubbing knows them all
        names.of("lab", s.lab)
        names.of("system", s.fqdn)
        for pool in s.pools:
            names.of("pool", pool)
    ours = {s.fqdn for s in systems}
    t0 = epoch(since)
    history = repo.systems.usage_between(since, until, sorted(ours))
    first_condition, changes = _conditions(history, t0)
    jobs = [repo.jobs.load_job(j) for j in repo.accounting.jobs_submitted(since, until)]
    jobs = [j for j in jobs if _in_labs(j, ours, wanted)]
    for job in jobs:
        names.of("user", job.owner)
        if job.group:
            names.of("group", job.group)
    recipe_ids = [r.id for j in jobs for s in j.sets for r in s.recipes]
    moments = Moments(
        repo.accounting.released_at(recipe_ids), repo.accounting.taken_in_at(recipe_ids)
    )
    notes: list[str] = []
    # the run-time predictions the scheduler planned with, kept with each set: a replay
    # plans with the same ones, not with what it could learn itself
    planned = repo.history.predictions_of(s.id for j in jobs for s in j.sets)
    out_jobs = [_job(j, t0, epoch(until), moments, planned, names, notes) for j in jobs]
    events = [
        {"at": at, "system": names.of("system", fqdn), "condition": cond.value}
        for at, fqdn, cond in changes
        if fqdn in ours
    ]
    events += _job_events(repo, since, until, {j.id for j in jobs}, t0)
    return {
        "notes": notes or ["every set of the window ended inside it"],
        "config": _config(settings),
        "labs": sorted({names.of("lab", s.lab) for s in systems}),
        "pools": _pools(repo, names, {p for s in systems for p in s.pools}),
        "systems": [
            {
                "fqdn": names.of("system", s.fqdn),
                "lab": names.of("lab", s.lab),
                "arch": s.arch,
                "pools": sorted(names.of("pool", p) for p in s.pools),
                "attrs": names.scrub(_attributes(s.attributes, anonymise)),
                "condition": first_condition.get(s.fqdn, s.condition).value,
            }
            for s in systems
        ],
        "jobs": out_jobs,
        "events": sorted(events, key=lambda e: float(e["at"])),
    }


def _in_labs(job: JobView, ours: set[str], wanted: set[str]) -> bool:
    """A job counts when it ran on our systems, or (never placed) when no lab was asked for."""
    placed = {r.system for s in job.sets for r in s.recipes if r.system is not None}
    return bool(placed & ours) if placed else not wanted


def _conditions(
    history: Iterable[Any], t0: float
) -> tuple[dict[str, Condition], list[tuple[float, str, Condition]]]:
    """Each system's condition at the window's start, and its changes within it."""
    first: dict[str, Condition] = {}
    last: dict[str, Condition] = {}
    changes = []
    for row in history:  # ordered by system, then time
        if row.system not in first:
            first[row.system] = row.condition
        elif last[row.system] is not row.condition:
            changes.append((max(0.0, row.start - t0), row.system, row.condition))
        last[row.system] = row.condition
    return first, changes


def _attributes(attributes: Mapping[str, Any], anonymise: bool) -> dict[str, Any]:
    # an address says where the system is: never needed to replay
    kept = {k: v for k, v in attributes.items() if k != "address"}
    return {k: v for k, v in kept.items() if not (anonymise and isinstance(v, str) and "." in v)}


def _pools(repo: Repository, names: Names, used: set[str]) -> list[dict[str, Any]]:
    policy = repo.access.load_access_policy()
    out = []
    for pool in sorted(used):
        rules = policy.rules.get(pool)
        access = None
        if rules is not None:
            access = {names.of("group", g): p.label for g, p in sorted(rules.items())}
        out.append({"name": names.of("pool", pool), "access": access})
    return out


def _config(settings: Settings) -> dict[str, Any]:
    """The live scheduling settings, as the scenario's config."""
    return {
        "aging": settings.aging.model_dump(mode="json"),
        "retry": settings.retry.model_dump(mode="json"),
        "holds": settings.holds.model_dump(mode="json"),
        "queue": settings.queue.model_dump(mode="json"),
    }


def _job(
    job: JobView,
    t0: float,
    end: float,
    moments: Moments,
    planned: Mapping[int, Mapping[str, Any]],
    names: Names,
    notes: list[str],
) -> dict[str, Any]:
    first = [s for s in job.sets if s.retry_of is None]
    sets = []
    for stored, spec in zip(
        sorted(first, key=lambda s: s.position), job.spec.recipe_sets, strict=False
    ):
        recipes = [
            _recipe(r, rs, stored, t0, end, moments.released, names, notes)
            for r, rs in zip(stored.recipes, spec.recipes, strict=True)
        ]
        exported = {
            "priority": stored.spec.priority.label,
            "max_retries": stored.spec.max_retries,
            "max_time": stored.spec.max_time,
            "locks": names.scrub(dict(stored.spec.locks)),
            "recipes": recipes,
        }
        prediction = planned.get(stored.id, {}).get("seconds")
        if prediction is not None:
            exported["predicted"] = prediction
        sets.append(exported)
    out: dict[str, Any] = {
        "id": f"job-{job.id}",
        "submit_at": max(0.0, _arrival(job, first, moments.taken_in) - t0),
        "recipe_sets": sets,
    }
    if job.group:
        out["group"] = names.of("group", job.group)
    return out


def _arrival(job: JobView, first: list[RecipeSetView], taken_in: Mapping[int, datetime]) -> float:
    """When the scheduler took the job in: the replay's scheduler acts from then, as the real
    one did (the job's commit is sooner by the reaction time, which a replay does not model:
    a set started at once would otherwise replay early and carry its systems' next sets
    with it)."""
    seen = [epoch(taken_in[r.id]) for s in first for r in s.recipes if r.id in taken_in]
    return min(seen, default=epoch(job.submitted_at))


def _recipe(
    stored: RecipeView,
    spec: Any,
    rset: RecipeSetView,
    t0: float,
    end: float,
    released: Mapping[int, datetime],
    names: Names,
    notes: list[str],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "duration": _duration(stored, rset, end, released, notes),
        "outcome": _outcome(stored),
        "host": names.scrub(requirements.to_native(spec.host)),
    }
    if spec.role:
        out["role"] = spec.role
    if spec.force:
        out["force"] = names.of("system", spec.force)
    if spec.exclude:
        out["exclude"] = [names.of("system", x) for x in spec.exclude]
    if not names.anonymise:
        out["tasks"] = [{"name": t.name, **({"run": t.run} if t.run else {})} for t in spec.tasks]
    if rset.started_at is not None:
        out["recorded"] = {"start": max(0.0, epoch(rset.started_at) - t0)}
        if stored.system is not None:
            out["recorded"]["system"] = names.of("system", stored.system)
    return out


def _duration(
    recipe: RecipeView,
    rset: RecipeSetView,
    end: float,
    released: Mapping[int, datetime],
    notes: list[str],
) -> float:
    """From the set's start to the release of the recipe's system (the time it held it)."""
    if rset.started_at is None:
        return float(rset.spec.max_time or DEFAULT_DURATION)
    start = epoch(rset.started_at)
    if recipe.id in released:
        return max(0.0, epoch(released[recipe.id]) - start)
    if recipe.finished_at is not None:
        return max(0.0, epoch(recipe.finished_at) - start)
    notes.append(f"recipe {recipe.id} had not ended when the window closed: it runs to the end")
    return max(0.0, end - start)


def _outcome(recipe: RecipeView) -> Any:
    if recipe.state is RecipeState.ABORTED:
        return {"abort_on": [recipe.system]} if recipe.system else "abort"
    if recipe.result is Result.FAIL:
        return "fail"
    return "pass"


def _job_events(
    repo: Repository, since: datetime, until: datetime, jobs: set[int], t0: float
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for at, job_id, action, new in repo.accounting.job_actions(since, until):
        if job_id not in jobs:
            continue
        when = max(0.0, epoch(at) - t0)
        if action == "cancel":
            out.append({"at": when, "cancel": f"job-{job_id}"})
        elif new:
            out.append({"at": when, "job": f"job-{job_id}", "priority": new})
    return out
