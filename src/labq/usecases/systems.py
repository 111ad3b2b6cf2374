"""Systems: add one, change its facts, set its condition, take it out of service (admins).

Each change is written in the caller's transaction; what the scheduler must hear is
posted on ``sink``, which the adapter delivers once the transaction has committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from labq.config import Settings
from labq.domain.events import AccessChanged, ConditionChanged, EventSink, SystemAdded
from labq.domain.inventory import Inventory
from labq.domain.model import System, User
from labq.domain.shortfall import recorded
from labq.domain.states import Condition
from labq.domain.summary import summarise
from labq.errors import InputError
from labq.store import Repository
from labq.store.sysedit import Removal
from labq.usecases.permissions import require_admin


@dataclass(frozen=True)
class RunsOn:
    """Where a lab's tasks run: ``agent``, ``ssh`` or ``local``, and a note saying so."""

    backend: str
    note: str


def add_system(
    repo: Repository, caller: User, system: System, *, now: datetime, sink: EventSink
) -> tuple[System, bool]:
    """Add ``system`` (admins); automated systems become pending for the scheduler.

    Returns the system as stored and whether a lab agent serves its lab.
    """
    require_admin(caller)
    repo.systems.add_system(system, actor=caller.name, now=now)
    added = repo.systems.get_system(system.fqdn)
    by_agent = system.lab in repo.agents.agent_labs()
    sink.post(SystemAdded(system.fqdn))
    return added, by_agent


def runs_on(settings: Settings, system: System, *, by_agent: bool) -> RunsOn:
    """Where the lab's tasks will run, said when the system is added: a lab with no
    backend configured runs them on the server's own host, whatever the fqdn says;
    a VM slot (a ``vm_size`` in a lab with a provider) runs them in its VMs."""
    lab = system.lab
    if by_agent:
        note = f"lab {lab!r} is served by a lab agent: it runs the tasks as its settings say"
        return RunsOn("agent", note)
    vms = settings.lab(lab).vms
    if vms is not None and "vm_size" in system.attributes:
        note = (
            f"a VM slot of lab {lab!r}: each recipe placed here gets a VM of size"
            f" {system.attributes['vm_size']} from the lab's {vms.kind} provider, and its"
            " tasks run in that VM over ssh; see VM providers in docs/operations.md"
        )
        return RunsOn(vms.kind, note)
    if settings.lab(lab).backend == "ssh":
        user = settings.lab(lab).ssh.user
        return RunsOn("ssh", f"runs tasks on {system.fqdn} over ssh as {user}")
    why = "is set to it" if lab in settings.labs else "has no backend configured"
    note = (
        f"runs tasks on the labq server's host: local backend (lab {lab!r} {why}),"
        f" not on {system.fqdn}; see Backends in docs/execution.md"
    )
    return RunsOn("local", note)


def set_condition(
    repo: Repository,
    caller: User,
    fqdn: str,
    condition: Condition,
    *,
    reason: str | None,
    now: datetime,
    sink: EventSink,
) -> tuple[System, bool]:
    """Change a system's condition, with a reason (admins); returns it and whether it changed."""
    require_admin(caller)
    changed = repo.systems.set_condition(fqdn, condition, now=now, actor=caller.name, reason=reason)
    system = repo.systems.get_system(fqdn)
    if changed:
        sink.post(ConditionChanged(fqdn))
    return system, changed


def change_system(
    repo: Repository,
    caller: User,
    fqdn: str,
    *,
    inventory: Inventory | None,
    edits: dict[str, Any],
    now: datetime,
    sink: EventSink,
) -> tuple[System, list[str]]:
    """Change a system (admins): its inventory (replaced whole) and the ``edits`` of
    :meth:`~labq.store.sysedit.SystemEditStore.edit_system`; returns it and the fields that changed.
    The scheduler re-reads which jobs it suits, as after a pool change."""
    require_admin(caller)
    if inventory is None and not edits:
        raise InputError("nothing to change: send inventory, lab, arch, attributes or pools")
    fields = [] if inventory is None else ["inventory"]
    if inventory is not None and not repo.systems.set_inventory(
        fqdn, inventory, actor=caller.name, now=now
    ):
        fields = []
    fields += repo.system_edits.edit_system(fqdn, actor=caller.name, now=now, **edits)
    system = repo.systems.get_system(fqdn)
    if fields:  # its facts changed, so may the classes it meets
        sink.post(AccessChanged())
    return system, fields


def remove_system(
    repo: Repository,
    caller: User,
    fqdn: str,
    *,
    force: bool,
    reason: str | None,
    now: datetime,
    sink: EventSink,
) -> tuple[System, Removal]:
    """Mark a system removed for good (admins); refused while it serves a recipe, unless
    ``force``, which aborts that recipe. Its row and history stay."""
    require_admin(caller)
    done = repo.system_edits.remove_system(
        fqdn, actor=caller.name, now=now, force=force, reason=reason
    )
    system = repo.systems.get_system(fqdn)
    if done.changed:
        sink.post(ConditionChanged(fqdn))
    return system, done


def summary(repo: Repository, lab: str | None = None) -> list[dict[str, object]]:
    """How many systems each lab (optionally one) and pool has idle, held, running, broken,
    manual and reserved (Slurm's ``sinfo``); removed systems are left out."""
    systems = repo.systems.list_systems(lab=lab)
    reserved = frozenset(repo.reservations.open_reservations())
    return summarise(systems, reserved)


def recorded_properties(repo: Repository) -> frozenset[str]:
    """The properties at least one system records: with labq's own, all a host
    requirement can match."""
    return recorded(s.facts() for s in repo.systems.list_systems())
