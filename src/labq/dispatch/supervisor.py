"""The supervisor process: runs one started recipe set and reports it to the database.

    python -m labq.dispatch.supervisor --set ID [--db URL] [--config FILE] [--data-dir DIR]

It loads the set (recipes, systems, tasks, the job's pinned commit, ``max_time``),
builds a :class:`~labq.dispatch.plan.SetPlan` and a backend per system from the
lab's settings, moves the recipes ``scheduled → waiting`` and records its pid
and host in the same transaction, then calls :func:`~labq.dispatch.runner.run_set`
with a :class:`~labq.dispatch.database_reporter.DatabaseReporter`. SIGTERM and
SIGINT cancel the set (the recipes end ``cancelled``, logs archived first).

Exit status: 0 when the set ran, whatever its results; 1 when it could not run
at all (a one-line reason on stderr; the recipes are left for the server to
abort); 2 for a bad command line. ``--db`` defaults to ``$LABQ_DB``, which is
how the dispatcher passes it, so a password never shows on a command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from sqlalchemy import Engine

from labq.config import Settings, load_settings
from labq.dispatch.access import declared_locks, set_credentials
from labq.dispatch.backends import Backend
from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.backends.ssh import SshBackend, SshOptions
from labq.dispatch.database_reporter import DatabaseReporter, utc_now
from labq.dispatch.hooks import HookedBackend, HookSet
from labq.dispatch.logs import set_log_dir
from labq.dispatch.plan import RecipePlan, SetPlan, SystemInfo, TaskPlan
from labq.dispatch.results import SetOutcome
from labq.dispatch.runner import BackendFor, run_set
from labq.domain.states import RecipeState
from labq.errors import LabqError
from labq.store import Repository, default_url, make_engine, reading, transaction
from labq.store.views import RecipeSetView

EXIT_RAN = 0
EXIT_COULD_NOT_RUN = 1
_MAX_REASON = 500


class CannotRunError(LabqError):
    """The set cannot be run by this supervisor; the message says why, in one line."""


# --- building the plan --------------------------------------------------------------


def load_plan(repo: Repository, set_id: int) -> SetPlan:
    """The plan of a started, unfinished set whose recipes all still wait to run."""
    view = repo.get_recipe_set(set_id)
    _check_runnable(view)
    job = repo.load_job(view.job_id)
    recipes = []
    for recipe, spec in zip(view.recipes, view.spec.recipes, strict=True):
        assert recipe.system is not None  # _check_runnable saw to it
        system = repo.get_system(recipe.system)
        address = system.attributes.get("address")
        info = SystemInfo(
            fqdn=system.fqdn,
            lab=system.lab,
            arch=system.arch,
            attributes=dict(system.attributes),
            address=address if isinstance(address, str) else None,
        )
        tasks = tuple(
            TaskPlan(
                id=stored.id,
                name=task.name,
                command=task.run,
                params=dict(task.params),
                timeout=None if task.timeout is None else float(task.timeout),
                role=task.role,
            )
            for stored, task in zip(recipe.tasks, spec.tasks, strict=True)
        )
        recipes.append(RecipePlan(id=recipe.id, system=info, tasks=tasks, role=spec.role))
    ref = job.spec.ref
    return SetPlan(
        id=view.id,
        job_id=view.job_id,
        recipes=tuple(recipes),
        max_time=None if view.spec.max_time is None else float(view.spec.max_time),
        ref_repo=None if ref is None else ref.repo,
        ref_commit=None if ref is None else ref.commit,
    )


def _check_runnable(view: RecipeSetView) -> None:
    if view.started_at is None:
        raise CannotRunError(f"recipe set {view.id} has not been started by the scheduler")
    if view.finished_at is not None:
        raise CannotRunError(f"recipe set {view.id} has ended already")
    if view.stop_reason is not None:
        raise CannotRunError(f"recipe set {view.id} was asked to stop: {view.stop_reason}")
    for recipe in view.recipes:
        if recipe.system is None:
            raise CannotRunError(f"recipe {recipe.id} holds no system")
        if recipe.state not in (RecipeState.SCHEDULED, RecipeState.WAITING):
            # Tasks may have run already: running them again is not ours to decide.
            raise CannotRunError(
                f"recipe {recipe.id} is {recipe.state.value}: another supervisor ran this set"
            )


def backends(settings: Settings, data_dir: Path, labs: set[str]) -> BackendFor:
    """One backend per lab from its settings (hooks checked now, before anything runs)."""
    made: dict[str, Backend] = {}
    for lab in sorted(labs):
        config = settings.lab(lab)
        backend: Backend
        if config.backend == "ssh":
            backend = SshBackend(SshOptions.from_settings(config.ssh))
        else:
            backend = LocalBackend(data_dir)
        hooks = config.hooks
        if any((hooks.power_on, hooks.power_off, hooks.reimage, hooks.cleanup)):
            backend = HookedBackend(backend, HookSet.from_settings(hooks))
        made[lab] = backend

    def backend_for(system: SystemInfo) -> Backend:
        return made[system.lab]

    return backend_for


def claim(engine: Engine, set_id: int, *, pid: int, host: str) -> SetPlan:
    """Load the plan, move its recipes ``scheduled → waiting`` and record this supervisor."""
    with reading(engine) as repo:
        plan = load_plan(repo, set_id)
    now = utc_now()
    with transaction(engine) as repo:
        _check_runnable(repo.get_recipe_set(set_id))  # nobody moved it in between
        for recipe in plan.recipes:
            repo.move_recipe(recipe.id, RecipeState.WAITING, now=now)
        repo.record_supervisor(set_id, pid, host, now=now)
    return plan


# --- the process ----------------------------------------------------------------------


def supervise(
    engine: Engine,
    set_id: int,
    settings: Settings,
    data_dir: Path,
    *,
    pid: int,
    host: str,
    cancel: threading.Event,
) -> SetOutcome:
    """Run a set to its end; raises :class:`CannotRunError` (or another error) before it starts."""
    with reading(engine) as repo:
        held = [r.system for r in repo.get_recipe_set(set_id).recipes if r.system is not None]
        labs = {repo.get_system(fqdn).lab for fqdn in held}
    backend_for = backends(settings, data_dir, labs)
    plan = claim(engine, set_id, pid=pid, host=host)
    credentials = set_credentials(engine, set_id, os.environ.get("LABQ_URL"))
    plan = dataclasses.replace(plan, env={**plan.env, **credentials})
    reporter = DatabaseReporter(
        engine, set_id, cancel=cancel, log_root=set_log_dir(data_dir, set_id), pid=pid
    )
    return run_set(
        plan,
        backend_for,
        data_dir=data_dir,
        reporter=reporter,
        heartbeat_every=settings.heartbeat_every,
        cancel=cancel,
        take_locks=declared_locks(engine, set_id),
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m labq.dispatch.supervisor", description="Run one started recipe set."
    )
    parser.add_argument("--set", type=int, required=True, dest="set_id", help="recipe set id")
    parser.add_argument("--db", help="database URL (default: $LABQ_DB)")
    parser.add_argument("--config", help="settings file (default: $LABQ_CONFIG)")
    parser.add_argument("--data-dir", help="where workspaces and logs go")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the set named on the command line; the exit status (see the module docstring)."""
    args = parse_args(argv)
    cancel = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        cancel.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    engine: Engine | None = None
    try:
        settings = load_settings(args.config)
        data_dir = Path(args.data_dir) if args.data_dir else settings.data_path()
        engine = make_engine(args.db or settings.database or default_url())
        outcome = supervise(
            engine,
            args.set_id,
            settings,
            data_dir,
            pid=os.getpid(),
            host=socket.gethostname(),
            cancel=cancel,
        )
    except Exception as exc:
        reason = " ".join(str(exc).split())[:_MAX_REASON] or type(exc).__name__
        print(f"labq supervisor: set {args.set_id} cannot run: {reason}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    finally:
        if engine is not None:
            engine.dispose()
    result = outcome.result.value if outcome.result else "none"
    print(f"labq supervisor: set {args.set_id} ended {outcome.state.value}, result {result}")
    return EXIT_RAN


if __name__ == "__main__":
    sys.exit(main())
