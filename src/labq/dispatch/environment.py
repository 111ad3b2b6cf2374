"""The environment every task gets, as Beaker gives its tasks theirs.

Role variables (``SERVERS``, ``CLIENTS``, …) list the FQDNs of each role;
``LABQ_*`` variables say which job, set, recipe and task is running; task
parameters and the set's extra variables come on top. Nothing a user writes may
replace ``PATH``, the dynamic loader's variables or labq's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

from labq.dispatch.plan import (
    PlanError,
    RecipePlan,
    SetPlan,
    SystemInfo,
    TaskPlan,
    scalar_text,
)

_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NOT_IDENT: Final = re.compile(r"[^A-Za-z0-9_]")

# Names that would change how every program in the task runs, not just the test.
RESERVED_NAMES: Final = frozenset({"PATH", "IFS", "ENV", "BASH_ENV"})
RESERVED_PREFIXES: Final = ("LD_", "LABQ_")
# The LABQ_ names that labq itself sets; the set's extra variables may add others.
LABQ_NAMES: Final = frozenset(
    {
        "LABQ_JOB_ID",
        "LABQ_SET_ID",
        "LABQ_RECIPE_ID",
        "LABQ_TASK_ID",
        "LABQ_TASK_NAME",
        "LABQ_ROLE",
        "LABQ_ROLES",
        "LABQ_FQDN",
        "LABQ_LAB",
        "LABQ_ARCH",
        "LABQ_REF_COMMIT",
        "LABQ_WORKSPACE",
        "LABQ_LOG_DIR",
        "LABQ_HOST_FQDN",
    }
)


def role_variable(role: str) -> str:
    """The variable that lists a role's FQDNs: upper case, other characters as ``_``."""
    name = _NOT_IDENT.sub("_", role.upper())
    return f"_{name}" if name[:1].isdigit() else name


def role_members(plan: SetPlan) -> dict[str, list[str]]:
    """Each role variable and its FQDNs, in recipe order.

    A recipe belongs to its own role and to every role one of its tasks names; so does
    each guest (with its own name), after its host.
    """
    members: dict[str, list[str]] = {}
    places = [
        (system, role, tasks)
        for recipe in plan.recipes
        for system, role, tasks in [
            (recipe.system, recipe.role, recipe.tasks),
            *((g.system, g.role, g.tasks) for g in recipe.guests),
        ]
    ]
    for system, own, tasks in places:
        for role in [own, *(t.role for t in tasks)]:
            if not role:
                continue
            fqdns = members.setdefault(role_variable(role), [])
            if system.fqdn not in fqdns:
                fqdns.append(system.fqdn)
    return members


def _reserved(name: str) -> bool:
    return name in RESERVED_NAMES or name.startswith(RESERVED_PREFIXES)


def check_names(names: Iterable[str], *, what: str, taken: Iterable[str] = ()) -> None:
    """Refuse names that are not environment names or that would override ours."""
    taken_set = set(taken)
    for name in names:
        if not _NAME.match(name):
            raise PlanError(
                f"{what} {name!r} is not a valid environment variable name "
                "(letters, digits and _, not starting with a digit)"
            )
        if _reserved(name):
            raise PlanError(
                f"{what} {name!r} would override {name}: PATH, IFS, ENV, BASH_ENV, "
                "LD_* and LABQ_* are set by labq or the system"
            )
        if name in taken_set:
            raise PlanError(f"{what} {name!r} would override a variable labq sets for the set")


def check_plan(plan: SetPlan) -> None:
    """Raise :class:`PlanError` for anything that would stop a task's environment being built."""
    roles = role_members(plan)
    for var in roles:
        if _reserved(var):
            raise PlanError(f"role variable {var} would override a reserved variable")
    for name, value in plan.env.items():
        if not _NAME.match(name):
            raise PlanError(f"extra variable {name!r} is not a valid environment variable name")
        if name in RESERVED_NAMES or name.startswith("LD_") or name in LABQ_NAMES:
            raise PlanError(f"extra variable {name!r} would override a variable labq sets")
        if name in roles:
            raise PlanError(f"extra variable {name!r} would override a role variable")
        if "\0" in value:
            raise PlanError(f"extra variable {name!r} contains a NUL character")
    hosts = [r.system.fqdn for r in plan.recipes]
    guests = [g.system.fqdn for r in plan.recipes for g in r.guests]
    for name in hosts:
        if hosts.count(name) > 1:
            raise PlanError(f"system {name} is given to two recipes")
    for name in guests:
        if (hosts + guests).count(name) > 1:
            raise PlanError(f"guest {name} has the name of another system or guest of the set")
    for recipe in plan.recipes:
        for task in (*recipe.tasks, *(t for g in recipe.guests for t in g.tasks)):
            where = f"task {task.id} ({task.name}) of recipe {recipe.id}"
            try:
                check_names(task.params, what="parameter", taken=[*roles, *plan.env])
                for param in task.params.values():
                    if "\0" in scalar_text(param):
                        raise PlanError("a parameter value contains a NUL character")
            except PlanError as exc:
                raise PlanError(f"{where}: {exc}") from None
            if task.timeout is not None and task.timeout <= 0:
                raise PlanError(f"{where}: timeout must be positive")
    if bool(plan.ref_repo) != bool(plan.ref_commit):
        raise PlanError(
            "a pinned ref needs both its repository and its commit "
            "(the branch is resolved to a commit when the job is submitted)"
        )
    if plan.max_time is not None and plan.max_time <= 0:
        raise PlanError("max_time must be positive")


def task_environment(
    plan: SetPlan,
    recipe: RecipePlan,
    task: TaskPlan,
    roles: Mapping[str, list[str]] | None = None,
    *,
    system: SystemInfo | None = None,
    role: str | None = None,
) -> dict[str, str]:
    """The variables labq gives one task (the backend adds the workspace's own).

    ``system`` and ``role`` are where it runs when that is not the recipe's own
    system: a guest of it (``LABQ_HOST_FQDN`` then names the host).
    """
    system = system or recipe.system
    role = role if system is not recipe.system else recipe.role
    roles = role_members(plan) if roles is None else roles
    env = {k: scalar_text(v) for k, v in task.params.items()}
    env.update(plan.env)
    env.update({var: " ".join(fqdns) for var, fqdns in roles.items()})
    env.update(
        LABQ_JOB_ID=str(plan.job_id),
        LABQ_SET_ID=str(plan.id),
        LABQ_RECIPE_ID=str(recipe.id),
        LABQ_TASK_ID=str(task.id),
        LABQ_TASK_NAME=task.name,
        LABQ_ROLE=task.role or role or "",
        LABQ_ROLES=" ".join(roles),
        LABQ_FQDN=system.fqdn,
        LABQ_LAB=system.lab,
        LABQ_ARCH=system.arch,
    )
    if system.guest_of is not None:
        env["LABQ_HOST_FQDN"] = system.guest_of
    if plan.ref_commit:
        env["LABQ_REF_COMMIT"] = plan.ref_commit
    return env
