"""What the scheduling core knows of systems, recipe sets and recipes."""

from __future__ import annotations

from dataclasses import dataclass, field

from labq.domain.contention import NO_NEEDS, LockNeeds
from labq.domain.distro import DistroRequirement
from labq.domain.locks import DEFAULT_LEVELS
from labq.domain.priority import Priority
from labq.domain.requirements import Facts, Requirement, signature
from labq.domain.states import Condition, RecipeState


@dataclass(frozen=True)
class SchedulerConfig:
    """The knobs of the scheduling policy (DESIGN.md § Scheduling)."""

    aging_bump_after: float | None = 3600.0  # seconds waited per priority level; None: no aging
    aging_ceiling: Priority = Priority.HIGH
    retry_hard_limit: int = 3
    holds_per_lab: int = 1  # one reservation per lab, as EASY (docs/scheduling.md § Holds)
    holds_max_age: float | None = None  # seconds a set may hold systems without starting
    backfill_depth: int = 32  # candidates looked at past the first when seeking a backfill
    # the predictive queue (seed 004); ``predictive=False`` orders as if every weight were 0
    predictive: bool = True
    spv_base: float = 1.0
    tick: float = 30.0  # seconds per tick of age
    aging_ticks: int = 30  # K: ticks after which every weight is 0
    lock_levels: tuple[str, ...] = DEFAULT_LEVELS
    # running limits on started sets (waiting, installing, running); None: no limit
    running_limit: int | None = None
    lab_running_limits: tuple[tuple[str, int], ...] = ()
    # backfill and reservations on predicted run times, for sets that carry one (docs/
    # scheduling.md § Predictions); the watchdog still kills at max_time. How a running set
    # past its prediction is raised: domain/prediction.py
    backfill_on_predictions: bool = True
    prediction_steps: tuple[float, ...] = ()  # () raises to max_time; STEPS: step by step


@dataclass(frozen=True)
class ViabilityClass:
    """Recipes that accept exactly the same systems: same requirement, excludes, force and
    distro requirement (a system is viable only where its lab carries a tree for it)."""

    requirement: Requirement
    excluded: frozenset[str] = frozenset()
    force: str | None = None
    distro: DistroRequirement | None = None

    @property
    def key(self) -> str:
        """A text that is equal for equal classes (the index groups by it)."""
        excluded = ",".join(sorted(self.excluded))
        key = f"{signature(self.requirement)}|{excluded}|{self.force or ''}"
        # without a distro requirement, the key is what it always was
        return key if self.distro is None else f"{key}|distro:{self.distro.key}"


@dataclass
class SystemEntry:
    """A system as the core sees it."""

    fqdn: str
    lab: str
    facts: Facts
    pools: frozenset[str]
    condition: Condition = Condition.AUTOMATED
    recipe: int | None = None  # the recipe that holds it
    held_by: str | None = None  # reserved or loaned to this person: not offered to the queue
    vm: str | None = None  # a VM slot of the lab's provider: the size a VM made here has


class RecipeEntry:
    """One recipe of a set. Giving it a system, or taking it back, tells its set."""

    __slots__ = ("_system", "id", "index", "klass", "owner", "role", "set_id", "state")

    def __init__(
        self,
        id: int,
        set_id: int,
        index: int,
        klass: str,  # ViabilityClass.key
        role: str | None = None,
        state: RecipeState = RecipeState.NEW,
        system: str | None = None,
    ) -> None:
        self.id = id
        self.set_id = set_id
        self.index = index
        self.klass = klass
        self.role = role
        self.state = state
        self._system = system
        self.owner: SetEntry | None = None

    @property
    def system(self) -> str | None:
        """The system it holds."""
        return self._system

    @system.setter
    def system(self, fqdn: str | None) -> None:
        old, self._system = self._system, fqdn
        if self.owner is not None and old != fqdn:
            self.owner.placement_changed(self, old)

    def __repr__(self) -> str:
        return (
            f"RecipeEntry(id={self.id}, set_id={self.set_id}, klass={self.klass!r},"
            f" state={self.state.value}, system={self.system!r})"
        )


@dataclass
class SetEntry:
    """A recipe set: the unit of gang scheduling."""

    id: int
    job: int
    priority: Priority
    submitted: float
    recipes: list[RecipeEntry]
    group: str | None = None
    max_time: float | None = None
    max_retries: int = 0
    attempt: int = 1
    retry_of: int | None = None
    # the predicted run time (None: none), and the time the core plans with: the prediction
    # when backfilling on predictions (raised while it runs past it), else max_time
    predicted: float | None = None
    plan: float | None = None
    # seconds its systems may stay reserved for its owner once it ends (<reservesys>): planned
    # as busy that long too, so it never backfills onto a system it would keep past a start
    kept: float = 0.0
    lab: str | None = None  # the lab it holds or runs in
    held_since: float | None = None
    started_at: float | None = None
    finished: bool = False
    locks: LockNeeds = NO_NEEDS  # what it declares (seed 004)
    spv: float = 1.0  # its static predictive value against the running sets now
    blocked: str | None = None  # why it may not run yet: a dependency, a filter (the service)
    throttle: str | None = None  # a full rate-limit bucket (the core)
    buckets: tuple[tuple[str, int], ...] = ()  # (rate-limit bucket, most running at once)
    missing: int = field(default=0, init=False)  # recipes without a system
    held: set[str] = field(default_factory=set, init=False, repr=False)  # systems it has
    # per class, its recipes without a system (kept as recipes get and lose systems)
    _open: dict[str, dict[int, RecipeEntry]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _unplaced: list[RecipeEntry] | None = field(default=None, repr=False, compare=False)
    _demands: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for recipe in self.recipes:
            recipe.owner = self
            if recipe.system is None:
                self._open.setdefault(recipe.klass, {})[recipe.id] = recipe
                self.missing += 1
            else:
                self.held.add(recipe.system)

    def placement_changed(self, recipe: RecipeEntry, old: str | None) -> None:
        """A recipe got, lost or changed its system: keep the counts, forget the cached list."""
        self._unplaced = None
        if old is not None:
            self.held.discard(old)
        else:
            del self._open[recipe.klass][recipe.id]
            self.missing -= 1
        if recipe.system is not None:
            self.held.add(recipe.system)
        else:
            self._open.setdefault(recipe.klass, {})[recipe.id] = recipe
            self.missing += 1

    @property
    def started(self) -> bool:
        """Whether every recipe got its system and the set was handed on to run."""
        return self.started_at is not None

    @property
    def eligible(self) -> bool:
        """Whether it may take systems now (nothing blocks or throttles it)."""
        return self.blocked is None and self.throttle is None

    @property
    def waiting(self) -> bool:
        """Not started and not finished: it still wants systems."""
        return not self.finished and self.started_at is None

    @property
    def busy_for(self) -> float | None:
        """Seconds its systems are away from the queue once it starts: its plan and what its
        ``<reservesys>`` may keep after (None: no end is known)."""
        return None if self.plan is None else self.plan + self.kept

    @property
    def width(self) -> int:
        """How many systems the whole set takes."""
        return len(self.recipes)

    def unplaced(self) -> list[RecipeEntry]:
        """Recipes without a system yet, in their order (do not change the list)."""
        if self._unplaced is None:
            self._unplaced = [r for r in self.recipes if r.system is None]
        return self._unplaced

    def wants(self, klass: str) -> bool:
        """Whether a recipe of this class still has no system."""
        return bool(self._open.get(klass))

    def open_recipe(self, klass: str) -> RecipeEntry | None:
        """A recipe of this class without a system, if any."""
        recipes = self._open.get(klass)
        return next(iter(recipes.values())) if recipes else None

    def demands(self) -> dict[str, int]:
        """How many recipes of each class the whole set has (do not change the mapping)."""
        if self._demands is None:
            counts: dict[str, int] = {}
            for recipe in self.recipes:
                counts[recipe.klass] = counts.get(recipe.klass, 0) + 1
            self._demands = counts
        return self._demands

    def placed(self) -> list[RecipeEntry]:
        """Recipes holding a system."""
        return [r for r in self.recipes if r.system is not None]


@dataclass(frozen=True)
class Eligibility:
    """What the service decides about a waiting set outside the core: blocks and buckets."""

    blocked: str | None = None  # a dependency not met yet, a pausing filter rule
    buckets: tuple[tuple[str, int], ...] = ()  # (rate-limit bucket, most running at once)


@dataclass(frozen=True)
class RecipeSubmission:
    """A recipe as handed to the core."""

    id: int
    requirement: Requirement
    role: str | None = None
    excluded: frozenset[str] = frozenset()
    force: str | None = None
    distro: DistroRequirement | None = None  # a tree its system's lab must carry


@dataclass(frozen=True)
class SetSubmission:
    """A recipe set as handed to the core (by the service, the simulator or a test)."""

    id: int
    job: int
    recipes: tuple[RecipeSubmission, ...]
    priority: Priority = Priority.NORMAL
    submitted: float = 0.0
    group: str | None = None
    max_time: float | None = None
    max_retries: int = 0
    attempt: int = 1
    retry_of: int | None = None
    locks: LockNeeds = NO_NEEDS
    blocked: str | None = None
    buckets: tuple[tuple[str, int], ...] = ()
    predicted: float | None = None  # seconds it is expected to run (domain/prediction.py)
    kept: float = 0.0  # seconds its systems may stay reserved once it ends (<reservesys>)


def plan_of(predicted: float | None, max_time: float | None, on_predictions: bool) -> float | None:
    """The run time the core plans a set with: its prediction (at most its max_time) when
    backfilling on predictions and it has one, else its declared max_time."""
    if not on_predictions or predicted is None:
        return max_time
    return predicted if max_time is None else min(predicted, max_time)


def set_entry(
    submission: SetSubmission, recipes: list[RecipeEntry], on_predictions: bool = False
) -> SetEntry:
    """The core's entry for a submitted set with these recipes."""
    return SetEntry(
        id=submission.id,
        job=submission.job,
        priority=submission.priority,
        submitted=submission.submitted,
        recipes=recipes,
        group=submission.group,
        max_time=submission.max_time,
        max_retries=submission.max_retries,
        attempt=submission.attempt,
        retry_of=submission.retry_of,
        predicted=submission.predicted,
        plan=plan_of(submission.predicted, submission.max_time, on_predictions),
        kept=submission.kept,
        locks=submission.locks,
        blocked=submission.blocked,
        buckets=submission.buckets,
    )
