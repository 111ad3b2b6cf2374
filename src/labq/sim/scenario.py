"""The scenario format of ``labq sim`` (reference: docs/simulation.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from labq.config import Aging, Holds, Queue, Retry, scheduler_config
from labq.domain.distro import DistroTree
from labq.domain.job import JobSpec, PriorityField
from labq.domain.locks import LockError, parse_locks
from labq.domain.priority import Priority
from labq.domain.requirements import Scalar
from labq.domain.states import Condition
from labq.errors import InputError
from labq.formats.loader import load_job
from labq.formats.source import (
    DocPath,
    LineMap,
    format_path,
    load_yaml,
    read_document,
    validation_error,
)
from labq.scheduler.entries import SchedulerConfig
from labq.vmconfig import VmQuotaSettings

Name = Annotated[str, Field(min_length=1, max_length=255)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SimConfig(_Strict):
    """Policy knobs plus the simulator's own."""

    aging: Aging = Aging()
    retry: Retry = Retry()
    holds: Holds = Holds()
    queue: Queue = Queue()  # the predictive queue and the running limits (seed 004)
    install_time: Annotated[float, Field(ge=0)] = 0.0  # provisioning before tasks run
    consistency_every: Annotated[float, Field(gt=0)] = 600.0
    poll_every: Annotated[float, Field(gt=0)] = 60.0  # for the legacy policies that poll
    until: Annotated[float, Field(gt=0)] | None = None

    def scheduler(self) -> SchedulerConfig:
        """The core's configuration."""
        return scheduler_config(self.aging, self.retry, self.holds, self.queue)


class PoolSpec(_Strict):
    name: Name
    access: dict[Name, PriorityField] | None = None  # None: open to every group


class SystemSpec(_Strict):
    fqdn: Name
    lab: Name
    arch: Name = "x86_64"
    pools: list[Name] = Field(default_factory=list)
    attrs: dict[Name, Scalar] = Field(default_factory=dict)
    condition: Condition = Condition.AUTOMATED
    count: Annotated[int, Field(ge=1, le=100_000)] | None = None

    def expand(self) -> list[SystemSpec]:
        """``count: 8`` makes ``name-1`` … ``name-8`` (the suffix goes before the first dot)."""
        if self.count is None:
            return [self]
        head, dot, tail = self.fqdn.partition(".")
        return [
            self.model_copy(update={"fqdn": f"{head}-{i}{dot}{tail}", "count": None})
            for i in range(1, self.count + 1)
        ]


class TreeSpec(_Strict):
    """A distro tree a lab carries (``distros:``): what a recipe's ``distro`` is matched with."""

    name: Name
    arch: Name = "x86_64"
    family: str = ""  # Beaker's OSMajor: RedHatEnterpriseLinux9
    version: str = ""
    variant: str = ""
    os_type: str = ""
    os_version: str = ""
    tags: list[Name] = Field(default_factory=list)

    def tree(self, lab: str) -> DistroTree:
        """The lab's tree."""
        return DistroTree(
            lab=lab,
            name=self.name,
            arch=self.arch,
            family=self.family,
            version=self.version,
            variant=self.variant,
            os_type=self.os_type,
            os_version=self.os_version,
            tags=frozenset(self.tags),
        )


Outcome = Literal["pass", "fail", "abort"]


class AbortOn(_Strict):
    abort_on: list[Name]


class LockStepSpec(_Strict):
    """A lock plan step: take ``lock`` ``at`` seconds into the recipe's run, hold it ``for`` s."""

    lock: Annotated[str, Field(min_length=1, max_length=512)]  # LEVEL:NAME
    exclusive: bool = False
    at: Annotated[float, Field(ge=0)]
    hold: Annotated[float, Field(gt=0, alias="for")]

    @field_validator("lock")
    @classmethod
    def _level_and_name(cls, value: str) -> str:
        level, colon, name = value.partition(":")
        if not colon or not level or not name:
            raise ValueError(f"expected LEVEL:NAME (e.g. storage:nfs1), got {value!r}")
        return value

    @property
    def level(self) -> str:
        """The lock level (checked against the configured levels with the scenario)."""
        return self.lock.partition(":")[0]

    @property
    def name(self) -> str:
        """The resource name (``*``: every resource of the level)."""
        return self.lock.partition(":")[2]


class Recorded(_Strict):
    """What really happened to a recipe (``labq sim export``): when its set started, relative
    to the window's start, and on which system. The simulation ignores it; fidelity reads it."""

    start: Annotated[float, Field(ge=0)]
    system: Name | None = None


class SimRecipe(_Strict):
    """A recipe with what the simulation needs: how long it runs and how it ends."""

    duration: Annotated[float, Field(ge=0)] = 60.0
    outcome: Outcome | AbortOn = "pass"
    role: Name | None = None
    host: dict[str, Any] | None = None
    distro: dict[str, Any] | None = None  # a distro requirement (native form), as distroRequires
    force: Name | None = None
    exclude: list[Name] = Field(default_factory=list)
    tasks: list[dict[str, Any]] = Field(default_factory=list)
    lock_plan: list[LockStepSpec] = Field(default_factory=list)
    recorded: Recorded | None = None

    @model_validator(mode="after")
    def _plan_fits(self) -> SimRecipe:
        for i, step in enumerate(self.lock_plan):
            if step.at + step.hold > self.duration:
                problem = (
                    f"a lock step must end within the recipe's duration:"
                    f" at {step.at:g} + for {step.hold:g} > duration {self.duration:g} s"
                )
                raise PydanticCustomError(
                    "lock_plan", "{problem}", {"problem": problem, "path": f"lock_plan[{i}]"}
                )
        return self


class SimRecipeSet(_Strict):
    priority: PriorityField = Priority.NORMAL
    max_retries: Annotated[int, Field(ge=0)] = 0
    max_time: Annotated[float, Field(gt=0)] | None = None
    predicted: Annotated[float, Field(gt=0)] | None = None  # the run time the core is told
    locks: dict[str, Any] = Field(default_factory=dict)  # read with the configured lock levels
    recipes: Annotated[list[SimRecipe], Field(min_length=1)]


class SimJob(_Strict):
    """A job arriving at ``submit_at``: from a file, inline native form, or inline sets."""

    id: Name
    submit_at: Annotated[float, Field(ge=0)] = 0.0
    group: Name | None = None
    file: str | None = None
    job: dict[str, Any] | None = None
    recipe_sets: list[SimRecipeSet] | None = None
    duration: Annotated[float, Field(ge=0)] = 60.0  # for recipes of `file`/`job` jobs
    outcome: Outcome = "pass"
    # the kind of work, finest level first: [level, key] pairs (domain/prediction.py)
    signature: list[tuple[str, str]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_source(self) -> SimJob:
        given = [k for k in ("file", "job", "recipe_sets") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a job needs exactly one of file, job or recipe_sets")
        return self


class SimEvent(_Strict):
    """Something that happens at ``at``: a condition change, a cancel, a priority change,
    a system reserved or loaned to a person (for ``for`` seconds, or until released),
    a release, a lab's queue paused or resumed, a lab's distro trees changed."""

    at: Annotated[float, Field(ge=0)]
    system: Name | None = None
    condition: Condition | None = None
    reserve: Name | None = None  # the person who reserves the system
    loan: Name | None = None  # the person it is loaned to
    hold: Annotated[float | None, Field(gt=0)] = Field(default=None, alias="for")
    release: Literal[True] | None = None
    lab: Name | None = None
    pause: bool | None = None  # true: the lab's queue pauses; false: it resumes
    distros: list[TreeSpec] | None = None  # the lab's trees from now on (none: [])
    cancel: Name | None = None
    job: Name | None = None
    priority: PriorityField | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SimEvent:
        on_system = self.system is not None
        kinds = [
            on_system and self.condition is not None,
            on_system and self.reserve is not None,
            on_system and self.loan is not None,
            on_system and self.release is not None,
            self.lab is not None and self.pause is not None,
            self.lab is not None and self.distros is not None,
            self.cancel is not None,
            self.job is not None and self.priority is not None,
        ]
        if sum(kinds) != 1:
            raise ValueError(
                "an event is one of {system, condition}, {system, reserve[, for]},"
                " {system, loan[, for]}, {system, release}, {lab, pause}, {lab, distros},"
                " {cancel} or {job, priority}"
            )
        if self.hold is not None and self.person is None:
            raise ValueError("for goes with reserve or loan")
        return self

    @property
    def person(self) -> str | None:
        """Who a reserve or loan event gives the system to."""
        return self.reserve or self.loan


class Scenario(_Strict):
    notes: list[str] = Field(default_factory=list)  # for people: what the file leaves out
    config: SimConfig = SimConfig()
    labs: list[Name] = Field(default_factory=list)
    pools: list[PoolSpec] = Field(default_factory=list)
    systems: list[SystemSpec] = Field(default_factory=list)
    distros: dict[Name, list[TreeSpec]] = Field(default_factory=dict)  # lab -> its trees
    vms: dict[Name, VmQuotaSettings] = Field(default_factory=dict)  # lab -> its VM quota
    jobs: list[SimJob] = Field(default_factory=list)
    events: list[SimEvent] = Field(default_factory=list)

    def all_systems(self) -> list[SystemSpec]:
        """Every system, ``count`` expanded."""
        return [s for spec in self.systems for s in spec.expand()]


def load_scenario(path: str | Path) -> tuple[Scenario, dict[str, JobSpec]]:
    """Read a scenario file; also reads the job files it names (relative to it)."""
    text = read_document(path, limit=64 * 1024 * 1024)
    data, lines = load_yaml(text, source=str(path))
    scenario = parse_scenario(data, source=str(path), lines=lines)
    base = Path(path).parent
    files = {job.id: load_job(base / job.file) for job in scenario.jobs if job.file is not None}
    return scenario, files


def with_config(scenario: Scenario, path: str | Path) -> Scenario:
    """The scenario with the ``config`` section read from a file laid over its own.

    The file is a YAML mapping of the section's keys (``holds``, ``queue``,
    ``aging``, …); each key given replaces the scenario's, whole. A ``pools`` key
    maps pool names to their new ``access`` (group: highest priority; null: open
    to every group): what-if for a pool's caps.
    """
    source = str(path)
    data, lines = load_yaml(read_document(path), source=source)
    if not isinstance(data, dict):
        raise InputError(
            "expected a mapping of config keys (holds, queue, aging, …)", source=source
        )
    data = dict(data)
    pools = _pool_changes(scenario, data.pop("pools", None), source)
    merged = {**scenario.config.model_dump(by_alias=True, exclude_unset=True), **data}
    try:
        config = SimConfig.model_validate(merged)
    except ValidationError as exc:
        raise validation_error(exc, source=source, lines=lines) from None
    return scenario.model_copy(update={"config": config, "pools": pools})


def _pool_changes(scenario: Scenario, changes: object, source: str) -> list[PoolSpec]:
    """The scenario's pools with the access rules the settings file gives."""
    if changes is None:
        return list(scenario.pools)
    if not isinstance(changes, dict):
        raise InputError("pools: expected a mapping of pool names to access", source=source)
    known = {p.name for p in scenario.pools}
    for name in changes:
        if name not in known:
            raise InputError(f"pools: no pool {name!r} in the scenario", source=source)
    out = []
    for pool in scenario.pools:
        if pool.name not in changes:
            out.append(pool)
            continue
        try:
            out.append(PoolSpec.model_validate({"name": pool.name, "access": changes[pool.name]}))
        except ValidationError as exc:
            raise validation_error(exc, source=source, lines=LineMap()) from None
    return out


def parse_scenario(data: object, *, source: str, lines: LineMap | None = None) -> Scenario:
    """Validate scenario data, with errors that name the place."""
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source=source, lines=lines or LineMap()) from None
    _check_references(scenario, source)
    _check_locks(scenario, source, lines or LineMap())
    return scenario


def _check_locks(scenario: Scenario, source: str, lines: LineMap) -> None:
    """Lock declarations and plans name configured levels; limits name known labs."""
    levels = scenario.config.queue.lock_levels

    def fail(problem: str, path: DocPath) -> None:
        raise InputError(problem, source=source, place=format_path(path), line=lines.line_of(path))

    labs = set(scenario.labs) | {s.lab for s in scenario.systems}
    for lab in scenario.config.queue.lab_running_limits:
        if lab not in labs:
            fail(f"unknown lab {lab!r}", ("config", "queue", "lab_running_limits", lab))
    for j, job in enumerate(scenario.jobs):
        for k, recipe_set in enumerate(job.recipe_sets or []):
            where: DocPath = ("jobs", j, "recipe_sets", k)
            try:
                parse_locks(recipe_set.locks, levels)
            except LockError as exc:
                inner = tuple(p for p in exc.path.split(".") if p)
                fail(exc.problem, (*where, "locks", *inner))
            for r, recipe in enumerate(recipe_set.recipes):
                for i, step in enumerate(recipe.lock_plan):
                    if step.level not in levels:
                        fail(
                            f"unknown lock level {step.level!r} (expected one of"
                            f" {', '.join(levels)})",
                            (*where, "recipes", r, "lock_plan", i, "lock"),
                        )


def _check_references(scenario: Scenario, source: str) -> None:
    ids = [job.id for job in scenario.jobs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(f"job ids must be unique: {', '.join(dupes)}", source=source, place="jobs")
    fqdns = [s.fqdn for s in scenario.all_systems()]
    seen: set[str] = set()
    for fqdn in fqdns:
        if fqdn in seen:
            raise InputError(f"system {fqdn} is listed twice", source=source, place="systems")
        seen.add(fqdn)
    pools = {p.name for p in scenario.pools}
    labs = set(scenario.labs) | {s.lab for s in scenario.systems}
    for lab in scenario.vms:
        if scenario.labs and lab not in scenario.labs:
            raise InputError(f"unknown lab {lab!r}", source=source, place=f"vms.{lab}")
    labs |= set(scenario.vms)
    for i, system in enumerate(scenario.systems):
        if scenario.labs and system.lab not in scenario.labs:
            raise InputError(
                f"unknown lab {system.lab!r}", source=source, place=f"systems[{i}].lab"
            )
        for pool in system.pools:
            if pool not in pools:
                raise InputError(
                    f"unknown pool {pool!r}", source=source, place=f"systems[{i}].pools"
                )
    for lab in scenario.distros:
        if lab not in labs:
            raise InputError(f"no lab {lab!r}", source=source, place=f"distros.{lab}")
    for i, event in enumerate(scenario.events):
        named = event.cancel or event.job
        if named is not None and named not in ids:
            raise InputError(f"no job {named!r}", source=source, place=f"events[{i}]")
        if event.lab is not None and event.lab not in labs:
            raise InputError(f"no lab {event.lab!r}", source=source, place=f"events[{i}].lab")
        if event.system is not None and event.system not in seen:
            raise InputError(
                f"no system {event.system!r}", source=source, place=f"events[{i}].system"
            )
