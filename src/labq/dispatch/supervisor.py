"""The supervisor process: runs one started recipe set and reports it to the database.

    python -m labq.dispatch.supervisor --set ID [--db URL] [--config FILE] [--data-dir DIR]
                                       [--secrets-on-stdin]

A started set carries a *claim*: the token of the one supervisor that may run
it. The dispatcher hands the database URL, the claim and the supervisor's pid
down a pipe (``--secrets-on-stdin``: one JSON line), never in the environment
or on the command line, where a task could read them; run by hand, the
supervisor takes ``--db`` (or ``$LABQ_DB``) and claims an unclaimed set itself.

It takes the claim up (:meth:`~labq.store.supervisors.SupervisorStore.confirm_claim`: records its
pid and host) and moves the recipes ``scheduled → waiting`` in one transaction,
builds a :class:`~labq.dispatch.plan.SetPlan` and a backend per system from the
lab's settings, then calls :func:`~labq.dispatch.runner.run_set` with a
:class:`~labq.dispatch.database_reporter.DatabaseReporter` whose every write is
guarded by the claim. A supervisor that finds its claim gone — at the start or
at any write or heartbeat later — stops its tasks and writes nothing more: the
set is somebody else's. One that cannot reach the database for half the
heartbeat timeout stops its tasks too, before the server may hand its systems
on. SIGTERM and SIGINT cancel the set (the recipes end ``cancelled``, logs
archived first).

Exit status: 0 when the set ran, whatever its results; 1 when it could not run
at all (a one-line reason on stderr; the recipes are left for the server to
abort); 2 for a bad command line; 3 when the claim was not (or no longer) its own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from sqlalchemy import Engine

from labq.config import LabSettings, Settings, load_settings
from labq.config import LocalBackend as LocalSettings
from labq.dispatch import containment
from labq.dispatch.access import declared_locks, set_credentials
from labq.dispatch.backends import Backend
from labq.dispatch.backends.local import LocalBackend
from labq.dispatch.database_reporter import DatabaseReporter, utc_now
from labq.dispatch.fetch import FetchOptions
from labq.dispatch.hooks import HOOK_NAMES, HookedBackend, HookSet
from labq.dispatch.identity import DYNAMIC, DynamicUsers, TaskUser, fixed_user, parse_range
from labq.dispatch.logs import set_log_dir
from labq.dispatch.plan import SetPlan, SystemInfo
from labq.dispatch.results import SetOutcome
from labq.dispatch.runner import Backends, run_set
from labq.dispatch.setplans import CannotRunError, check_runnable, load_plan
from labq.domain.states import RecipeState
from labq.errors import ClaimLost
from labq.store import default_url, make_engine, reading, transaction
from labq.vmconfig import VmProvider as VmProviderSettings

EXIT_RAN = 0
EXIT_COULD_NOT_RUN = 1
EXIT_CLAIM_LOST = 3
_MAX_REASON = 500


def lab_backends(
    settings: Settings, data_dir: Path, labs: set[str], *, set_id: int, users: list[DynamicUsers]
) -> Backends:
    """One backend per lab from its settings (hooks checked now, before anything runs).

    A dynamic task user taken for the set is added to ``users``: give it back at the end.
    """
    made: dict[str, Backend] = {}
    for lab in sorted(labs):
        config = settings.lab(lab)
        backend: Backend
        if config.backend == "ssh":
            # imported here: SSH's library is half a second of a fork server's start, which
            # preloads it only where a lab needs it (labq.dispatch.forkwire.SSH_PRELOAD)
            from labq.dispatch.backends.ssh import SshBackend, SshOptions

            backend = SshBackend(SshOptions.from_settings(config.ssh))
        else:
            backend = LocalBackend(data_dir, user=_task_user(config.local, data_dir, set_id, users))
        hooks = config.hooks
        if any(getattr(hooks, name) for name in HOOK_NAMES):
            backend = HookedBackend(backend, HookSet.from_settings(hooks))
        if config.guests is not None:
            backend = _guests_on_hosts(backend, config, data_dir, set_id)
        if config.vms is not None:
            backend = _with_vms(backend, config.vms, data_dir, set_id, guests=config.guests is None)
        made[lab] = backend
    return made


def _guests_on_hosts(backend: Backend, lab: LabSettings, data_dir: Path, set_id: int) -> Backend:
    """A lab of libvirt hypervisors: each ``<guestrecipe>`` a VM on its host recipe's
    system, through libvirt's SSH transport and the lab's SSH settings; the VMs' keys
    under ``data_dir/vms/hosts/<host>`` here, their files in ``guests.dir`` there."""
    from labq.dispatch.vms.guests import VmGuests  # SSH's library: see lab_backends
    from labq.dispatch.vms.hypervisor import Hypervisor
    from labq.dispatch.vms.libvirt import HOSTS_DIR, LibvirtProvider
    from labq.domain.vms import Hop, VmSize

    guests, ssh = lab.guests, lab.ssh
    assert guests is not None  # the caller asks

    def on_host(host: SystemInfo) -> LibvirtProvider:
        hop = Hop(host.host, ssh.port, ssh.user, ssh.identity_file, ssh.known_hosts)
        return LibvirtProvider(
            state_dir=data_dir / "vms" / HOSTS_DIR / host.fqdn,
            domain_type=guests.domain_type,
            user=guests.user,
            hypervisor=Hypervisor(hop, dir=guests.dir, session=guests.session),
        )

    return VmGuests(
        backend,
        None,
        set_id=set_id,
        on_host=on_host,
        size=VmSize(vcpus=guests.vcpus, memory_mb=guests.memory),
        boot_timeout=guests.boot_timeout,
        workspace=guests.workspace,
    )


def _with_vms(
    backend: Backend, vms: VmProviderSettings, data_dir: Path, set_id: int, *, guests: bool
) -> Backend:
    """A lab with a VM provider: its VM slots' recipes run in VMs made for them, and (with
    ``guests``) every ``<guestrecipe>`` in a VM of its own (sized by its guestargs, else
    the first size)."""
    from labq.dispatch.vms.backend import VmBackend  # SSH's library: see lab_backends
    from labq.dispatch.vms.guests import VmGuests
    from labq.dispatch.vms.providers import provider_for
    from labq.domain.vms import VmSize

    provider = provider_for(vms, data_dir)
    first = vms.sizes[0]
    if guests:
        backend = VmGuests(
            backend,
            provider,
            set_id=set_id,
            size=VmSize(vcpus=first.cpus, memory_mb=first.memory),
            boot_timeout=vms.create_timeout,
            workspace=vms.workspace,
        )
    return VmBackend(
        backend, provider, set_id=set_id, create_timeout=vms.create_timeout, workspace=vms.workspace
    )


def _task_user(
    local: LocalSettings, data_dir: Path, set_id: int, users: list[DynamicUsers]
) -> TaskUser | None:
    if local.run_as is None:
        return None
    if os.geteuid() != 0:
        raise CannotRunError(f"run_as: {local.run_as} needs the server to run as root")
    if local.run_as != DYNAMIC:
        return fixed_user(local.run_as)
    pool = DynamicUsers(data_dir, parse_range(local.dynamic_uids))
    users.append(pool)
    return pool.take(set_id)


def take_up(engine: Engine, set_id: int, claim: str, *, pid: int, host: str) -> SetPlan:
    """Confirm the claim, move the recipes ``scheduled → waiting`` and load the plan, in one
    transaction; :class:`ClaimLost` when the set is not (or no longer) this claim's."""
    now = utc_now()
    with transaction(engine) as repo:
        repo.supervisors.confirm_claim(set_id, claim, pid, host, now=now)
        plan = load_plan(repo, set_id)
        for recipe in plan.recipes:
            repo.moves.move_recipe(recipe.id, RecipeState.WAITING, now=now)
    return plan


def claim_unclaimed(engine: Engine, set_id: int) -> str:
    """Claim a set nobody has claimed (a supervisor run by hand); :class:`ClaimLost` if taken."""
    claim = secrets.token_hex(16)
    with transaction(engine) as repo:
        if repo.supervisors.claim_set(set_id, claim, now=utc_now()):
            return claim
        view = repo.jobs.get_recipe_set(set_id)  # NotFoundError for no such set
    if view.started_at is None or view.finished_at is not None:
        check_runnable(view)  # says which
    raise ClaimLost(f"recipe set {set_id} is claimed by another supervisor")


# --- the process ----------------------------------------------------------------------


def supervise(
    engine: Engine,
    set_id: int,
    settings: Settings,
    data_dir: Path,
    *,
    claim: str,
    pid: int,
    host: str,
    cancel: threading.Event,
) -> SetOutcome | None:
    """Run a set to its end; None when the claim was lost on the way (nothing more written).

    Raises :class:`ClaimLost` when the claim cannot be taken up, and
    :class:`CannotRunError` (or another error) when the set cannot start.
    """
    with reading(engine) as repo:
        held = [r.system for r in repo.jobs.get_recipe_set(set_id).recipes if r.system is not None]
        labs = {repo.systems.get_system(fqdn).lab for fqdn in held}
    users: list[DynamicUsers] = []
    try:
        backends = lab_backends(settings, data_dir, labs, set_id=set_id, users=users)
        return _run(engine, set_id, settings, data_dir, backends, claim, pid, host, cancel)
    finally:
        for pool in users:
            pool.give_back()


def _run(
    engine: Engine,
    set_id: int,
    settings: Settings,
    data_dir: Path,
    backends: Backends,
    claim: str,
    pid: int,
    host: str,
    cancel: threading.Event,
) -> SetOutcome | None:
    plan = take_up(engine, set_id, claim, pid=pid, host=host)
    credentials = set_credentials(engine, set_id, claim, os.environ.get("LABQ_URL"))
    mark = {containment.MARK_VARIABLE: containment.run_mark(claim)}
    plan = dataclasses.replace(plan, env={**plan.env, **credentials, **mark})
    lost = threading.Event()
    reporter = DatabaseReporter(
        engine,
        set_id,
        claim,
        cancel=cancel,
        lost=lost,
        lease=settings.health.heartbeat_timeout / 2,
        log_root=set_log_dir(data_dir, set_id),
    )
    outcome = run_set(
        plan,
        backends,
        data_dir=data_dir,
        reporter=reporter,
        heartbeat_every=settings.heartbeat_every,
        cancel=cancel,
        lost=lost,
        take_locks=declared_locks(engine, set_id, claim),
        fetch=fetch_options(settings, data_dir, {r.system.lab for r in plan.recipes}),
    )
    return None if lost.is_set() else outcome


def fetch_options(settings: Settings, data_dir: Path, labs: set[str]) -> FetchOptions:
    """How this set fetches tasks: the cache, the rewrites, whether job file:// URLs may
    be read (not by default where tasks run as another user than the server's)."""
    allowed = settings.fetch.file_urls
    if allowed is None:
        allowed = all(settings.lab(lab).local.run_as is None for lab in labs)
    return FetchOptions(data_dir / "fetched", dict(settings.fetch.rewrite), allowed)


def read_secrets(stream: IO[str]) -> dict[str, object]:
    """The one JSON line the dispatcher writes on the supervisor's standard input."""
    line = stream.readline()
    stream.close()
    data = json.loads(line) if line.strip() else {}
    if not isinstance(data, dict):
        raise ValueError("the secrets on standard input are not a JSON object")
    return data


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m labq.dispatch.supervisor", description="Run one started recipe set."
    )
    parser.add_argument("--set", type=int, required=True, dest="set_id", help="recipe set id")
    parser.add_argument("--db", help="database URL (default: $LABQ_DB)")
    parser.add_argument("--config", help="settings file (default: $LABQ_CONFIG)")
    parser.add_argument("--data-dir", help="where workspaces and logs go")
    parser.add_argument(
        "--secrets-on-stdin",
        action="store_true",
        help="read the database URL, the claim and the pid as one JSON line on standard input",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the set named on the command line; the exit status (see the module docstring)."""
    args = parse_args(argv)
    cancel = prepare()
    try:
        given = read_secrets(sys.stdin) if args.secrets_on_stdin else {}
    except ValueError as exc:  # a JSONDecodeError too
        print(f"labq supervisor: set {args.set_id} cannot run: {exc}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    return run(
        args.set_id, given, config=args.config, data_dir=args.data_dir, db=args.db, cancel=cancel
    )


def prepare() -> threading.Event:
    """Make this process private and turn SIGTERM and SIGINT into the returned cancel event."""
    containment.keep_private()  # a task of the same user cannot read our memory or environment
    cancel = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        cancel.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return cancel


def run(
    set_id: int,
    given: Mapping[str, object],
    *,
    config: str | None,
    data_dir: str | None,
    db: str | None = None,
    cancel: threading.Event,
) -> int:
    """Run one set with the secrets ``given`` (database, claim, pid); the exit status.

    Shared by :func:`main` and a supervisor forked by :mod:`labq.dispatch.forkserver`.
    """
    engine: Engine | None = None
    try:
        settings = load_settings(config)
        data_path = Path(data_dir) if data_dir else settings.data_path()
        url = str(given.get("database") or db or settings.database or default_url())
        engine = make_engine(url)
        claim = str(given["claim"]) if given.get("claim") else claim_unclaimed(engine, set_id)
        outcome = supervise(
            engine,
            set_id,
            settings,
            data_path,
            claim=claim,
            pid=int(str(given.get("pid") or os.getpid())),
            host=socket.gethostname(),
            cancel=cancel,
        )
    except ClaimLost as exc:
        print(f"labq supervisor: set {set_id} is not ours: {exc}", file=sys.stderr)
        return EXIT_CLAIM_LOST
    except Exception as exc:
        reason = " ".join(str(exc).split())[:_MAX_REASON] or type(exc).__name__
        print(f"labq supervisor: set {set_id} cannot run: {reason}", file=sys.stderr)
        return EXIT_COULD_NOT_RUN
    finally:
        if engine is not None:
            engine.dispose()
    if outcome is None:
        print(f"labq supervisor: set {set_id} was taken from us; stopped", file=sys.stderr)
        return EXIT_CLAIM_LOST
    result = outcome.result.value if outcome.result else "none"
    print(f"labq supervisor: set {set_id} ended {outcome.state.value}, result {result}")
    return EXIT_RAN


if __name__ == "__main__":
    sys.exit(main())
