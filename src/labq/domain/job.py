"""The canonical job description: what every job format is parsed into.

Jobs are made of recipe sets (the unit of gang scheduling), recipes (what runs
on one system) and tasks (one step of a recipe). The native YAML/JSON format is
exactly this model; ``docs/job-format.md`` is its reference.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from labq.domain import dependencies, fetch, filters, requirements
from labq.domain import locks as lockdecl
from labq.domain.priority import Priority
from labq.domain.requirements import Requirement

MAX_NAME: Final = 255
MAX_COMMAND: Final = 64 * 1024
MAX_SECONDS: Final = 10 * 365 * 24 * 3600  # ten years; also fits an integer column
# a recipe metadata key the store keeps for itself (fetches and guests, see store/packing.py)
RESERVED_METADATA: Final = "labq:stored"


def _read_priority(value: object) -> Priority:
    if isinstance(value, bool) or not isinstance(value, str | Priority):
        names = ", ".join(p.label for p in Priority)
        raise ValueError(f"unknown priority {value!r} (expected one of {names})")
    return Priority.parse(value)


def _read_requirement(value: object) -> Requirement:
    try:
        return requirements.parse(value, path="")
    except requirements.RequirementError as exc:
        # ctx["path"] lets the error reporter point inside the expression
        raise PydanticCustomError(
            "requirement", "{problem}", {"problem": exc.problem, "path": exc.path.lstrip(".")}
        ) from None


def _read_locks(value: object) -> dict[str, Any]:
    try:
        return lockdecl.parse_locks(value)
    except lockdecl.LockError as exc:
        raise PydanticCustomError(
            "locks", "{problem}", {"problem": exc.problem, "path": exc.path}
        ) from None


def _write_locks(value: dict[str, Any]) -> dict[str, Any]:
    return {k: (v if isinstance(v, bool) else v.to_native()) for k, v in value.items()}


def _read_dependency(value: object) -> dependencies.Dependency:
    if isinstance(value, dependencies.Dependency):
        return value
    try:
        return dependencies.parse(value)
    except dependencies.DependencyError as exc:
        raise PydanticCustomError(
            "dependency", "{problem}", {"problem": exc.problem, "path": exc.path}
        ) from None


def _read_reason(value: object) -> object:
    if isinstance(value, str):
        try:
            filters.check_reason(value)
        except filters.FilterError as exc:
            raise PydanticCustomError("reason", "{problem}", {"problem": str(exc)}) from None
    return value


PriorityField = Annotated[
    Priority,
    BeforeValidator(_read_priority),
    PlainSerializer(lambda p: p.label, return_type=str),
    WithJsonSchema({"enum": [p.label for p in Priority]}),
]
RequirementField = Annotated[
    Requirement,
    BeforeValidator(_read_requirement),
    PlainSerializer(requirements.to_native, return_type=dict),
    WithJsonSchema({"type": "object", "description": "host requirement expression"}),
]
LocksField = Annotated[
    dict[str, Any],
    BeforeValidator(_read_locks),
    PlainSerializer(_write_locks, return_type=dict),
    WithJsonSchema({"type": "object", "description": "lock declarations per level"}),
]
DependencyField = Annotated[
    dependencies.Dependency,
    BeforeValidator(_read_dependency),
    PlainSerializer(lambda d: d.to_native()),
    WithJsonSchema(
        {"description": "a job id, a job name, or {job: ID, on: [completed, aborted, …]}"}
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
ParamValue = str | int | float | bool


class Spec(BaseModel):
    """Shared settings: unknown keys are errors, values are not coerced across types."""

    model_config = ConfigDict(extra="forbid", strict=False, frozen=True, str_strip_whitespace=False)


class FetchSpec(Spec):
    """Where a task is downloaded from at run time (restraint's ``<fetch>``)."""

    url: Annotated[str, Field(min_length=1, max_length=4096)]
    subdir: Annotated[str, Field(min_length=1, max_length=4096)] | None = None

    @model_validator(mode="after")
    def _usable(self) -> FetchSpec:
        try:
            fetch.parse_source(self.url, self.subdir)
        except fetch.SourceError as exc:
            raise PydanticCustomError("fetch", "{problem}", {"problem": str(exc)}) from None
        return self


class TaskSpec(Spec):
    """One step of a recipe: a shell command, a named task from the workspace, or a task
    fetched at run time (whose name, when none is given, is made from its URL)."""

    name: Name
    run: Annotated[str, Field(min_length=1, max_length=MAX_COMMAND)] | None = None
    fetch: FetchSpec | None = None
    params: dict[Name, ParamValue] = Field(default_factory=dict)
    timeout: Annotated[int, Field(gt=0, le=MAX_SECONDS)] | None = None
    role: Name | None = None

    @model_validator(mode="before")
    @classmethod
    def _name_from_fetch(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("name") is None:
            source = data.get("fetch")
            if isinstance(source, dict) and isinstance(source.get("url"), str):
                subdir = source.get("subdir")
                named = fetch.task_name(source["url"], subdir if isinstance(subdir, str) else None)
                return {**data, "name": named}
        return data

    @model_validator(mode="after")
    def _one_way_to_run(self) -> TaskSpec:
        if self.run is not None and self.fetch is not None:
            raise PydanticCustomError(
                "task", "a task has either run or fetch, not both", {"path": "run"}
            )
        return self


class GuestSpec(Spec):
    """A guest recipe: runs on a guest its host recipe's system provides, never on a pool
    system (Beaker's ``<guestrecipe>``)."""

    name: Name | None = Field(default=None, description="the guest's name (Beaker guestname)")
    args: Annotated[str, Field(max_length=MAX_COMMAND)] | None = Field(
        default=None, description="how to make the guest (Beaker guestargs), for the guest hook"
    )
    role: Name | None = None
    tasks: list[TaskSpec] = Field(default_factory=list)
    whiteboard: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RecipeSpec(Spec):
    """What runs on one system."""

    role: Name | None = None
    host: RequirementField = Field(default=requirements.ANY_SYSTEM)
    force: Name | None = Field(
        default=None, description="run on this system whatever its condition (Beaker force=)"
    )
    exclude: list[Name] = Field(default_factory=list)
    tasks: list[TaskSpec] = Field(default_factory=list)
    guests: list[GuestSpec] = Field(default_factory=list)
    whiteboard: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _guest_names(self) -> RecipeSpec:
        if RESERVED_METADATA in self.metadata:
            raise PydanticCustomError(
                "metadata", "metadata key {key!r} is reserved", {"key": RESERVED_METADATA}
            )
        names = [g.name for g in self.guests if g.name is not None]
        for name in names:
            if names.count(name) > 1:
                raise PydanticCustomError(
                    "guests", "two guests of one recipe are both named {name!r}", {"name": name}
                )
        return self


class RecipeSetSpec(Spec):
    """Recipes that start together, each on its own system, all in one lab."""

    priority: PriorityField = Priority.NORMAL
    max_retries: Annotated[int, Field(ge=0, le=1000)] = 0
    max_time: Annotated[int, Field(gt=0, le=MAX_SECONDS)] | None = None
    locks: LocksField = Field(default_factory=dict)
    recipes: Annotated[list[RecipeSpec], Field(min_length=1)]


class RefSpec(Spec):
    """A workspace to pin: a git repository and branch, resolved to one commit."""

    repo: Annotated[str, Field(min_length=1, max_length=4096)]
    branch: Name = "main"
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{7,64}$")] | None = None


class JobSpec(Spec):
    """A whole job, as submitted."""

    whiteboard: str | None = None
    group: Name | None = None
    owner: Name | None = None
    depends: list[DependencyField] = Field(default_factory=list)
    # why it was submitted; ``rate-limit:N:label`` items cap such jobs running at once
    reason: Annotated[str, BeforeValidator(_read_reason), Field(max_length=2000)] | None = None
    ref: RefSpec | None = None
    recipe_sets: Annotated[list[RecipeSetSpec], Field(min_length=1)]
    metadata: dict[str, Any] = Field(default_factory=dict)

    def canonical(self) -> dict[str, Any]:
        """The native form, defaults included: what ``labq validate`` prints."""
        return self.model_dump(mode="json")
