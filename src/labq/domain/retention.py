"""Log retention (Beaker's ``retention_tag``): how long a job's logs are kept after it ends.

Pure: the prune pass gives ``now``. A tag maps to a lifetime in days, or to None (kept
forever, like Beaker's ``audit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from labq.errors import InputError

Tags = Mapping[str, float | None]


def job_tag(metadata: Mapping[str, Any], default: str) -> str:
    """The job's tag: ``metadata.retention_tag`` (every format keeps it there), else ``default``."""
    tag = metadata.get("retention_tag")
    return tag if isinstance(tag, str) and tag else default


def check_tag(tag: str, tags: Tags) -> str:
    """A tag the settings know; refused in one line otherwise."""
    if tag not in tags:
        raise InputError(
            f"retention tag {tag!r} is not one of {', '.join(sorted(tags))}",
            place="metadata.retention_tag",
        )
    return tag


def expires_at(ended_at: datetime, tag: str, tags: Tags) -> datetime | None:
    """When the logs of a job that ended at ``ended_at`` expire; None: never.

    A tag the settings no longer know keeps its logs: nothing is deleted on a guess.
    """
    days = tags.get(tag)
    return None if days is None else ended_at + timedelta(days=days)


def expired(ended_at: datetime, tag: str, tags: Tags, now: datetime) -> bool:
    """Whether the logs are due for deletion at ``now``."""
    until = expires_at(ended_at, tag, tags)
    return until is not None and until <= now
