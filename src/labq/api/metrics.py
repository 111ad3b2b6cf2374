"""``/metrics``: the lab's figures for Prometheus, read from the database at scrape time.

Every figure but the latency histogram is counted from the database when
Prometheus scrapes, so it agrees with the API at that moment and survives
restarts; any server of a deployment answers the same. The collector goes into
a registry of its own per scrape, never prometheus_client's global one. See
``docs/metrics.md`` for the metrics and a scrape configuration.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from typing import Final

from fastapi import APIRouter, Request, Response
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from sqlalchemy import Engine

from labq.domain.priority import Priority
from labq.domain.states import Condition, RecipeState, Usage
from labq.gateway.deps import StateDep, UserDep
from labq.scheduler.entries import SchedulerConfig, SetEntry
from labq.scheduler.order import aged_priority
from labq.store import Repository, epoch, reading
from labq.usecases.timing import DECISION_SECONDS

# Not in the OpenAPI document: it is not JSON, and docs/metrics.md describes it.
router = APIRouter(tags=["metrics"], include_in_schema=False)
OUTCOMES: Final = (RecipeState.COMPLETED, RecipeState.ABORTED, RecipeState.CANCELLED)


@router.get("/metrics")
def metrics(request: Request, state: StateDep, _: UserDep) -> Response:
    """Prometheus text format (OpenMetrics when the scraper asks for it)."""
    registry = CollectorRegistry()
    collector = LabCollector(state.engine, state.settings.scheduler(), state.clock())
    collector.heartbeat_timeout = state.settings.health.heartbeat_timeout
    registry.register(collector)
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(registry), media_type=content_type)


class LabCollector:
    """Reads the database once per scrape; one read transaction for every figure."""

    def __init__(self, engine: Engine, config: SchedulerConfig, now: datetime) -> None:
        self.engine = engine
        self.config = config
        self.now = now
        self.heartbeat_timeout = 60.0  # an agent unheard for longer is offline

    def collect(self) -> Iterable[Metric]:
        """Every labq metric family."""
        with reading(self.engine) as repo:
            families = [
                queue_length(repo, self.config, self.now),
                systems(repo),
                *recipe_sets(repo),
                *lock_service(repo, self.now),
                *agents(repo, self.now, self.heartbeat_timeout),
            ]
        return [*families, *DECISION_SECONDS.collect()]


def agents(repo: Repository, now: datetime, timeout: float) -> list[Metric]:
    """Each unrevoked lab agent: online or not, sets it runs, seconds since it was heard."""
    up = GaugeMetricFamily(
        "labq_agent_up", "1 when the lab agent heart-beat within the timeout", labels=["agent"]
    )
    running = GaugeMetricFamily(
        "labq_agent_sets_running", "Recipe sets the agent said it runs", labels=["agent"]
    )
    quiet = GaugeMetricFamily(
        "labq_agent_last_seen_seconds", "Seconds since the agent was last heard", labels=["agent"]
    )
    for agent in repo.agents.list_agents():
        if agent.revoked_at is not None:
            continue
        up.add_metric([agent.name], 1.0 if agent.online(now, timeout) else 0.0)
        running.add_metric([agent.name], float(agent.running))
        if agent.last_seen_at is not None:
            quiet.add_metric([agent.name], max(0.0, (now - agent.last_seen_at).total_seconds()))
    return [up, running, quiet]


def queue_length(repo: Repository, config: SchedulerConfig, now: datetime) -> Metric:
    """Sets neither started nor ended, by the lab they hold systems in and nominal priority.

    As ``GET /queue`` shows them: the lab is ``""`` while a set holds nothing,
    and the nominal priority is after aging (``aging.bump_after``).
    """
    at = epoch(now)
    counts: Counter[tuple[str, str]] = Counter()
    for queued in repo.figures.queued_sets():
        entry = SetEntry(
            id=queued.id,
            job=queued.job_id,
            priority=Priority.parse(queued.priority),
            submitted=epoch(queued.submitted_at),
            recipes=[],
        )
        counts[queued.lab or "", aged_priority(entry, at, config).label] += 1
    family = GaugeMetricFamily(
        "labq_queue_length",
        "Recipe sets queued (not started, not ended), by the lab they hold systems in"
        ' ("" while they hold none) and nominal priority after aging, as GET /api/v1/queue.',
        labels=["lab", "priority"],
    )
    for lab in ["", *repo.systems.list_labs()]:
        for level in Priority:
            family.add_metric([lab, level.label], counts[lab, level.label])
    return family


def systems(repo: Repository) -> Metric:
    """Systems by lab, condition and usage, as ``GET /systems`` lists them (zeros included)."""
    counts = repo.figures.system_counts()
    family = GaugeMetricFamily(
        "labq_systems",
        "Systems by lab, condition and usage, as GET /api/v1/systems lists them.",
        labels=["lab", "condition", "usage"],
    )
    for lab in repo.systems.list_labs():
        for condition in Condition:
            for usage in Usage:
                key = (lab, condition.value, usage.value)
                family.add_metric(list(key), counts.get(key, 0))
    return family


def recipe_sets(repo: Repository) -> list[Metric]:
    """Sets started, ended (by outcome) and retried since the database began.

    A set's outcome is its derived state (see :meth:`~labq.store.figures.FigureStore.set_totals`);
    retried counts the clones made by retries, the sets with ``retry_of``.
    """
    totals = repo.figures.set_totals()
    started_family = CounterMetricFamily(
        "labq_recipe_sets_started",
        "Recipe sets that started (got all their systems).",
        totals.started,
    )
    finished = CounterMetricFamily(
        "labq_recipe_sets_finished",
        "Recipe sets that ended, by outcome: completed, aborted or cancelled.",
        labels=["outcome"],
    )
    for outcome in OUTCOMES:
        finished.add_metric([outcome.value], totals.ended.get(outcome, 0))
    retried_family = CounterMetricFamily(
        "labq_recipe_sets_retried",
        "Recipe sets retried: the clones made of aborted sets.",
        totals.retried,
    )
    return [started_family, finished, retried_family]


def lock_service(repo: Repository, now: datetime) -> list[Metric]:
    """Sets waiting for locks (``labq_lock_waits``, by level) and locks held, as ``GET /locks``."""
    waits = GaugeMetricFamily(
        "labq_lock_waits", "Recipe sets waiting for a lock, by lock level", labels=["level"]
    )
    per_level: dict[str, int] = {}
    for wait in repo.locks.lock_waits(now=now):
        for level in sorted({g.level for g in wait.grants}):
            per_level[level] = per_level.get(level, 0) + 1
    for level, count in sorted(per_level.items()):
        waits.add_metric([level], count)
    held = GaugeMetricFamily(
        "labq_locks_held", "Locks held by running recipe sets", labels=["level", "mode"]
    )
    counts: dict[tuple[str, str], int] = {}
    for grants in repo.locks.held_locks().values():
        for grant in grants:
            key = (grant.level, "exclusive" if grant.exclusive else "shared")
            counts[key] = counts.get(key, 0) + 1
    for (level, mode), count in sorted(counts.items()):
        held.add_metric([level, mode], count)
    return [waits, held]
