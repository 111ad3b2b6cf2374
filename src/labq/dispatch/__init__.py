"""The execution library: everything a supervisor does for a recipe set, no database.

The supervisor process builds a :class:`SetPlan`, picks a backend per system
(:class:`LocalBackend` or :class:`SshBackend`, wrapped in :class:`HookedBackend`
when its lab has hooks) and calls :func:`run_set` with a :class:`Reporter` that
maps the callbacks onto the database. ``docs/execution.md`` is the user's and
admin's guide.
"""

from labq.dispatch.backends import Backend, Outcome
from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.backends.ssh import SshBackend, SshError, SshOptions
from labq.dispatch.environment import check_plan, role_variable, task_environment
from labq.dispatch.hooks import HookedBackend, HookError, HookSet, render, run_hook
from labq.dispatch.plan import (
    GuestPlan,
    PlanError,
    RecipePlan,
    SetPlan,
    SystemInfo,
    TaskPlan,
    Workspace,
)
from labq.dispatch.results import (
    WARN_EXIT,
    RecipeOutcome,
    Reporter,
    SetOutcome,
    TaskOutcome,
)
from labq.dispatch.runner import Backends, run_set
from labq.dispatch.workspace import RefError, checkout, resolve_ref

__all__ = [
    "WARN_EXIT",
    "Backend",
    "Backends",
    "GuestPlan",
    "HookError",
    "HookSet",
    "HookedBackend",
    "LocalBackend",
    "Outcome",
    "PlanError",
    "RecipeOutcome",
    "RecipePlan",
    "RefError",
    "Reporter",
    "SetOutcome",
    "SetPlan",
    "SshBackend",
    "SshError",
    "SshOptions",
    "SystemInfo",
    "TaskOutcome",
    "TaskPlan",
    "Workspace",
    "check_plan",
    "checkout",
    "render",
    "resolve_ref",
    "role_variable",
    "run_hook",
    "run_set",
    "task_environment",
]
