"""The schema: one class per table, read like SQL (``update(Recipes).where(...)``).

Enum columns hold the enum's ``.value`` and carry a CHECK constraint; further
CHECKs forbid combinations the lifecycle can never produce. The migration in
``migrations/versions`` builds exactly this schema (a test compares them). The
tables live in modules by area; importing this package declares them all on
:data:`Base.metadata`.
"""

from labq.store.tables.control import (
    FILTER_ACTIONS,
    Agents,
    Filters,
    Installation,
    LabPauses,
    Leadership,
    LockGrants,
    LockWaiters,
)
from labq.store.tables.jobs import (
    JobDependencies,
    Jobs,
    JobSources,
    RecipeExcludes,
    RecipeHistory,
    Recipes,
    RecipeSets,
    RunHistory,
    Runs,
    Tasks,
)
from labq.store.tables.people import Groups, Memberships, Tokens, Users
from labq.store.tables.records import (
    NOTIFICATION_KINDS,
    NOTIFICATION_STATES,
    Activity,
    JobNotices,
    LogPrunes,
    Notifications,
    Webhooks,
)
from labq.store.tables.schema import (
    FINAL_TASK_STATUSES,
    FREE_USAGES,
    NAMING,
    PRIORITIES,
    TASK_STATUSES,
    Base,
    EnumText,
    Name,
)
from labq.store.tables.systems import (
    AccessRules,
    DistroTrees,
    Labs,
    Pools,
    SystemPools,
    SystemReservations,
    Systems,
    UsageHistory,
)

__all__ = [
    "FILTER_ACTIONS",
    "FINAL_TASK_STATUSES",
    "FREE_USAGES",
    "NAMING",
    "NOTIFICATION_KINDS",
    "NOTIFICATION_STATES",
    "PRIORITIES",
    "TASK_STATUSES",
    "AccessRules",
    "Activity",
    "Agents",
    "Base",
    "DistroTrees",
    "EnumText",
    "Filters",
    "Groups",
    "Installation",
    "JobDependencies",
    "JobNotices",
    "JobSources",
    "Jobs",
    "LabPauses",
    "Labs",
    "Leadership",
    "LockGrants",
    "LockWaiters",
    "LogPrunes",
    "Memberships",
    "Name",
    "Notifications",
    "Pools",
    "RecipeExcludes",
    "RecipeHistory",
    "RecipeSets",
    "Recipes",
    "RunHistory",
    "Runs",
    "SystemPools",
    "SystemReservations",
    "Systems",
    "Tasks",
    "Tokens",
    "UsageHistory",
    "Users",
    "Webhooks",
]
