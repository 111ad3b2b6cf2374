"""labq's storage: SQLAlchemy 2 on SQLite (embedded) or PostgreSQL, migrated by Alembic.

Typical use::

    engine = make_engine(default_url())
    upgrade(default_url())
    with transaction(engine) as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=now, source_format="native")
"""

from labq.store.columns import epoch, from_epoch
from labq.store.database import (
    current_revision,
    default_url,
    downgrade,
    head_revision,
    make_engine,
    upgrade,
)
from labq.store.repository import Repository, reading, transaction
from labq.store.views import (
    ActivityEntry,
    Credential,
    HistoryEntry,
    JobView,
    RecipeSetView,
    RecipeView,
    TaskView,
    TokenView,
    UnfinishedRecipe,
    UnfinishedSet,
)

__all__ = [
    "ActivityEntry",
    "Credential",
    "HistoryEntry",
    "JobView",
    "RecipeSetView",
    "RecipeView",
    "Repository",
    "TaskView",
    "TokenView",
    "UnfinishedRecipe",
    "UnfinishedSet",
    "current_revision",
    "default_url",
    "downgrade",
    "epoch",
    "from_epoch",
    "head_revision",
    "make_engine",
    "reading",
    "transaction",
    "upgrade",
]
