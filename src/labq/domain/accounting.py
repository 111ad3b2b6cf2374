"""Accounting (Slurm's ``sacct``/``sreport``): who used what, from the usage history.

Pure: the store hands over the busy stretches of systems with the recipe they
served, the recipes that ended and the sets that started in a window; this
module adds them up per user, group, pool or lab. A system in several pools
counts in each of them (pools overlap); one in none counts under ``(no pool)``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

By = Literal["user", "group", "pool", "lab"]
BY_KEYS: Final = ("user", "group", "pool", "lab")
NO_GROUP: Final = "(no group)"
NO_POOL: Final = "(no pool)"


@dataclass(frozen=True)
class Served:
    """Who a recipe ran for and where: the keys it is counted under."""

    recipe: int
    job: int
    owner: str
    group: str | None
    system: str
    lab: str


@dataclass(frozen=True)
class Busy:
    """A stretch of time (epoch seconds, clipped to the window) a system served a recipe."""

    recipe: int
    start: float
    end: float


@dataclass(frozen=True)
class Ended:
    """A recipe that ended in the window, and whether it passed."""

    recipe: int
    passed: bool


@dataclass(frozen=True)
class Started:
    """A set that started in the window: its recipes, and how long it waited to start."""

    recipes: tuple[int, ...]
    waited: float


@dataclass(frozen=True)
class UsageRow:
    """One row of the report."""

    key: str
    system_hours: float
    jobs: int
    recipes: int
    passed: int
    mean_wait_s: float | None

    @property
    def pass_rate(self) -> float | None:
        """Recipes that passed over recipes that ended (None: none ended)."""
        return None if self.recipes == 0 else self.passed / self.recipes


def keys_of(by: By, served: Served, pools: Mapping[str, frozenset[str]]) -> tuple[str, ...]:
    """The rows a recipe counts in."""
    if by == "user":
        return (served.owner,)
    if by == "group":
        return (served.group or NO_GROUP,)
    if by == "lab":
        return (served.lab,)
    return tuple(sorted(pools.get(served.system) or {NO_POOL}))


def report(
    by: By,
    served: Mapping[int, Served],
    busy: Iterable[Busy],
    ended: Iterable[Ended],
    started: Iterable[Started],
    pools: Mapping[str, frozenset[str]],
) -> list[UsageRow]:
    """The report's rows, by key: system-hours, jobs run, recipes ended and passed, mean wait.

    A set's wait counts once in each row one of its recipes falls in.
    """
    keys: Callable[[int], tuple[str, ...]] = lambda recipe: (  # noqa: E731 - a short lookup
        keys_of(by, served[recipe], pools) if recipe in served else ()
    )
    hours: dict[str, float] = defaultdict(float)
    for stretch in busy:
        for key in keys(stretch.recipe):
            hours[key] += (stretch.end - stretch.start) / 3600
    jobs: dict[str, set[int]] = defaultdict(set)
    recipes: dict[str, int] = defaultdict(int)
    passed: dict[str, int] = defaultdict(int)
    for end in ended:
        for key in keys(end.recipe):
            jobs[key].add(served[end.recipe].job)
            recipes[key] += 1
            passed[key] += int(end.passed)
    waits: dict[str, list[float]] = defaultdict(list)
    for start in started:
        for key in sorted({k for recipe in start.recipes for k in keys(recipe)}):
            waits[key].append(start.waited)
    rows = []
    for key in sorted(set(hours) | set(recipes) | set(waits)):
        wait = waits.get(key)
        rows.append(
            UsageRow(
                key=key,
                system_hours=hours.get(key, 0.0),
                jobs=len(jobs.get(key, ())),
                recipes=recipes.get(key, 0),
                passed=passed.get(key, 0),
                mean_wait_s=None if not wait else sum(wait) / len(wait),
            )
        )
    return rows
