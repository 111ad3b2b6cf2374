"""What the set runner is given, fixed before it starts, and the ref it checked out.

:class:`SetContext` holds every input of one run of a set (the plan, the
reporter, the backends, the clock, the cancel and lost events, the locks, how
tasks are fetched); nothing in it changes while the set runs. :class:`Checkout`
is the plan as the tasks see it once the pinned ref is checked out.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from labq.dispatch.backends import Backend
from labq.dispatch.fetch import FetchOptions
from labq.dispatch.logs import set_log_dir
from labq.dispatch.plan import SetPlan
from labq.dispatch.reporting import SafeReporter
from labq.dispatch.workspace import cached_checkout
from labq.domain.locktable import Outcome

Backends = Mapping[str, Backend]  # lab -> the backend its systems are reached by


@dataclass(frozen=True)
class SetContext:
    """Everything one run of a set needs; see :func:`labq.dispatch.runner.run_set`."""

    plan: SetPlan
    backends: Backends
    data_dir: Path
    reporter: SafeReporter  # writes the set's supervisor.log, secrets masked
    heartbeat_every: float
    clock: Callable[[], float]
    cancel: threading.Event | None  # set from any thread: end everything, recipes cancelled
    lost: threading.Event | None  # set: the set is someone else's now, touch nothing more
    take_locks: Callable[[], Outcome] | None  # None: the set declares no locks
    fetch: FetchOptions

    @property
    def set_dir(self) -> Path:
        """The set's log directory (supervisor.log, and a directory per system)."""
        return set_log_dir(self.data_dir, self.plan.id)


@dataclass(frozen=True)
class Checkout:
    """The plan as the tasks see it, and the pinned ref's checkout (None: no pinned ref)."""

    plan: SetPlan
    directory: Path | None = None

    @staticmethod
    def of(plan: SetPlan, data_dir: Path) -> Checkout:
        """Check out the plan's pinned ref (cached under ``data_dir/refs``); an abbreviated
        commit, now known in full, is written in full in the plan."""
        assert plan.ref_repo is not None
        assert plan.ref_commit is not None  # check_plan saw to it
        directory = cached_checkout(plan.ref_repo, plan.ref_commit, data_dir / "refs")
        if directory.name != plan.ref_commit:
            plan = dataclasses.replace(plan, ref_commit=directory.name)
        return Checkout(plan, directory)
