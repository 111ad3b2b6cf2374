"""Job dependencies: a job waits until other jobs have ended, in states it accepts.

A dependency names a job by id, or by name — the newest earlier job whose
whiteboard is that name — and lists the end states that satisfy it
(``completed`` unless told otherwise). While a dependency has not ended the
job is blocked; once every one has ended in an accepted state it may run; if
one ends in another state the job can never run and is cancelled. Ganeti's job
dependencies work the same way (``[job, [statuses]]``).

Everything here is pure: the store resolves names and reads states, the
service acts on the verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from labq.domain.states import RecipeState

END_STATES: Final = (RecipeState.COMPLETED, RecipeState.CANCELLED, RecipeState.ABORTED)
DEFAULT_ON: Final = (RecipeState.COMPLETED,)
MAX_NAME: Final = 255
_KEYS: Final = ("job", "on")


class DependencyError(ValueError):
    """A dependency that cannot be read; ``path`` is the place inside it (``on[1]``)."""

    def __init__(self, problem: str, path: str = ""):
        super().__init__(problem)
        self.problem = problem
        self.path = path


@dataclass(frozen=True)
class Dependency:
    """One entry of a job's ``depends``: which job, and which of its end states will do."""

    job: int | str  # an id, or a name (the whiteboard of the newest earlier job)
    on: tuple[RecipeState, ...] = DEFAULT_ON

    def to_native(self) -> int | str | dict[str, object]:
        """The short form (an id or a name) when ``on`` is the default, else the mapping."""
        if self.on == DEFAULT_ON:
            return self.job
        return {"job": self.job, "on": [s.value for s in self.on]}

    def __str__(self) -> str:
        """``12``, ``nightly``, ``12 (completed or aborted)``: as pages and messages show it."""
        if self.on == DEFAULT_ON:
            return str(self.job)
        return f"{self.job} ({states_text(self.on)})"


@dataclass(frozen=True)
class Edge:
    """A resolved dependency: ``job`` waits for ``on`` to end in one of ``accepts``."""

    on: int
    accepts: tuple[RecipeState, ...]


@dataclass(frozen=True)
class Verdict:
    """What a job's dependencies say now: nothing, wait (``waiting``), or never (``failed``)."""

    waiting: str | None = None
    failed: str | None = None

    @property
    def satisfied(self) -> bool:
        """Every dependency ended in a state it accepts."""
        return self.waiting is None and self.failed is None


def parse(value: object) -> Dependency:
    """One ``depends`` entry: ``12``, ``"nightly"`` or ``{job: 12, on: [completed, aborted]}``."""
    if isinstance(value, Mapping):
        # YAML 1.1 (PyYAML) reads a bare ``on`` key as the boolean true
        value = {("on" if k is True else k): v for k, v in value.items()}
        unknown = [k for k in value if k not in _KEYS]
        if unknown:
            raise DependencyError(f"unknown key {unknown[0]!r} (expected job, on)", str(unknown[0]))
        if "job" not in value:
            raise DependencyError("missing required key 'job'", "job")
        try:
            target = _target(value["job"])
        except DependencyError as exc:
            raise DependencyError(exc.problem, "job") from None
        return Dependency(target, _states(value.get("on", [s.value for s in DEFAULT_ON])))
    return Dependency(_target(value))


def _target(value: object) -> int | str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise DependencyError(
            f"a dependency is a job id, a job name or {{job: ID, on: [states]}}, not {value!r}"
        )
    if isinstance(value, int):
        if value < 1:
            raise DependencyError(f"job ids start at 1, not {value}")
        return value
    if not value.strip():
        raise DependencyError("a job name must not be empty")
    if len(value) > MAX_NAME:
        raise DependencyError(f"a job name is at most {MAX_NAME} characters")
    return value


def _states(value: object) -> tuple[RecipeState, ...]:
    names = ", ".join(s.value for s in END_STATES)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise DependencyError(f"'on' is a non-empty list of end states ({names})", "on")
    out: list[RecipeState] = []
    for index, item in enumerate(value):
        state = next((s for s in END_STATES if s.value == item), None)
        if state is None:
            raise DependencyError(
                f"{item!r} is not an end state (expected one of {names})", f"on[{index}]"
            )
        if state not in out:
            out.append(state)
    return tuple(out)


def states_text(states: Iterable[RecipeState]) -> str:
    """``completed``, ``completed or aborted``, ``completed, cancelled or aborted``."""
    names = [s.value for s in states]
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} or {names[-1]}"


def verdict(edges: Sequence[Edge], ended: Mapping[int, RecipeState]) -> Verdict:
    """Judge a job's dependencies against the end states of the jobs that have ended.

    The first dependency that ended in a state it does not accept makes the job
    fail; else those that have not ended keep it waiting.
    """
    for edge in edges:
        state = ended.get(edge.on)
        if state is not None and state not in edge.accepts:
            return Verdict(
                failed=f"job {edge.on} ended {state.value}; "
                f"this job needed {states_text(edge.accepts)}"
            )
    pending = [e for e in edges if e.on not in ended]
    if not pending:
        return Verdict()
    parts = [f"job {e.on} to end (needs {states_text(e.accepts)})" for e in pending]
    return Verdict(waiting="waits for " + ", ".join(parts))


def find_cycle(graph: Mapping[int, Iterable[int]], start: int) -> list[int] | None:
    """A path of dependencies from ``start`` back to itself, if there is one.

    ``graph`` maps a job to the jobs it depends on. The answer lists the jobs
    along the way, ``start`` first and last (``[7, 5, 7]``).
    """
    parents: dict[int, int] = {}
    stack = [start]
    seen = {start}
    while stack:
        job = stack.pop()
        for target in sorted(graph.get(job, ())):
            if target == start:
                back = [job]
                while back[-1] != start:
                    back.append(parents[back[-1]])
                return [*reversed(back), start]
            if target not in seen:
                seen.add(target)
                parents[target] = job
                stack.append(target)
    return None
