"""VM providers in the service: each lab's slots in the store, and orphans destroyed.

A lab with a VM provider (``labs.NAME.vms``) has its quota's slots as systems
(:mod:`labq.scheduler.vms`); the leader adds the missing ones before it rebuilds
the core, so a slot is in the usage history like any system. When a leader
starts, it lists every provider's VMs and destroys each one whose recipe set no
longer runs (a server killed while a VM was being made leaves one); a VM whose set
still runs is left to that set's supervisor (adopted), and so is a VM a recipe's
``<reservesys>`` keeps while its slot stays reserved. When that reservation is
released or runs out, :func:`destroy_kept` destroys the VM.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from datetime import datetime
from pathlib import Path

from sqlalchemy.engine import Engine

from labq.config import Settings
from labq.dispatch.vms.providers import provider_for
from labq.domain.model import System
from labq.domain.states import Condition
from labq.domain.vms import name_for, set_of
from labq.errors import ConflictError, LabqError, NotFoundError
from labq.scheduler.vms import slots, vm_attributes
from labq.store.repository import Repository, reading

log = logging.getLogger(__name__)
ACTOR = "labq"


def add_slots(repo: Repository, settings: Settings, *, now: datetime) -> list[str]:
    """Add the slots of every lab's provider that the store lacks; their names."""
    added = []
    labs = set(repo.systems.list_labs())
    for lab, config in sorted(settings.labs.items()):
        if config.vms is None:
            continue
        if lab not in labs:
            with contextlib.suppress(ConflictError):  # an admin made it since we looked
                repo.systems.add_lab(lab, actor=ACTOR, now=now)
        quota = config.vms.quota(lab)
        _retire_stale(repo, lab, {fqdn for fqdn, _ in slots(quota)}, now=now)
        for pool in sorted(quota.pools - set(repo.access.list_pools())):
            with contextlib.suppress(ConflictError):  # an admin made it since we looked
                repo.access.add_pool(pool, actor=ACTOR, now=now)
        for fqdn, size in slots(quota):
            try:
                repo.systems.get_system(fqdn)
                continue
            except NotFoundError:
                pass
            slot = System(fqdn, lab, quota.arch, vm_attributes(quota, size), quota.pools)
            repo.systems.add_system(slot, actor=ACTOR, now=now)
            added.append(fqdn)
    return added


def _retire_stale(repo: Repository, lab: str, wanted: set[str], *, now: datetime) -> None:
    """Slots of an earlier, larger quota are removed: the quota is never exceeded."""
    for system in repo.systems.list_systems(lab=lab):
        stale = "vm_size" in system.attributes and system.fqdn not in wanted
        if stale and system.condition is not Condition.REMOVED:
            why = "the lab's VM quota has no such slot any more"
            repo.systems.set_condition(
                system.fqdn, Condition.REMOVED, now=now, actor=ACTOR, reason=why
            )


def destroy_orphans(engine: Engine, settings: Settings, data_dir: Path) -> list[str]:
    """Destroy every provider's VM whose recipe set is not running; the names destroyed."""
    gone = []
    for lab, config in sorted(settings.labs.items()):
        if config.vms is None:
            continue
        provider = provider_for(config.vms, data_dir)
        try:
            names = provider.list()
        except LabqError as exc:
            log.warning("lab %s: cannot list its VMs: %s", lab, exc)
            continue
        for name in names:
            set_id = set_of(name)
            if set_id is not None and _running(engine, set_id):
                log.info("lab %s: VM %s is set %s's, which runs: adopted", lab, name, set_id)
                continue
            if set_id is not None and _kept(engine, name, set_id):
                log.info("lab %s: VM %s is kept for a <reservesys>: left", lab, name)
                continue
            try:
                provider.destroy(name)
                gone.append(name)
                log.info("lab %s: VM %s belonged to no running set: destroyed", lab, name)
            except LabqError as exc:
                log.warning("lab %s: cannot destroy VM %s: %s", lab, name, exc)
    return gone


def _running(engine: Engine, set_id: int) -> bool:
    with reading(engine) as repo:
        try:
            view = repo.jobs.get_recipe_set(set_id)
        except NotFoundError:
            return False
    return view.started_at is not None and view.finished_at is None


def _kept(engine: Engine, name: str, set_id: int) -> bool:
    """Whether a recipe of ``set_id`` holds the VM's slot reserved (``<reservesys>``)."""
    with reading(engine) as repo:
        for found in repo.reservations.open_reservations().values():
            if found.recipe is not None and name == name_for(found.fqdn, set_id):
                try:
                    view = repo.jobs.get_recipe_set(set_id)
                except NotFoundError:
                    return False
                return found.recipe in {r.id for r in view.recipes}
    return False


class Reaper:
    """Destroys the VMs kept for reservations that ended, one after another, off the
    scheduler's thread: a provider's destroy may take its hook's whole timeout, and
    scheduling must not wait for it. A set given the slot meanwhile destroys the VM
    itself before it makes its own (:meth:`labq.dispatch.vms.backend.VmBackend._clear`),
    so the quota holds whichever comes first; one left when the server stops is the
    next leader's sweep's."""

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self._slots: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def destroy(self, slot: str) -> None:
        """Destroy what ``slot``'s ended reservation kept, soon."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="labq-vm-reaper", daemon=True)
            self._thread.start()
        self._slots.put(slot)

    def stop(self, timeout: float) -> None:
        """Finish the destroys asked for so far (within ``timeout``), then end."""
        if self._thread is not None:
            self._slots.put(None)
            self._thread.join(timeout)

    def _run(self) -> None:
        while (slot := self._slots.get()) is not None:
            try:
                destroy_kept(self.engine, self.settings, slot)
            except Exception:  # the next leader's sweep destroys what is left
                log.exception("destroying the VM kept on %s failed", slot)


def destroy_kept(engine: Engine, settings: Settings, slot: str) -> list[str]:
    """The reservation of VM slot ``slot`` ended: destroy the VMs made on it whose set
    no longer runs (the one a ``<reservesys>`` kept); the names destroyed. A failure is
    logged: the next leader's sweep destroys what is left."""
    with reading(engine) as repo:
        try:
            lab = repo.systems.get_system(slot).lab
        except NotFoundError:
            return []
    config = settings.labs.get(lab)
    if config is None or config.vms is None:
        return []
    provider = provider_for(config.vms, settings.data_path())
    gone = []
    try:
        for name in provider.list():
            set_id = set_of(name)
            if set_id is None or name != name_for(slot, set_id) or _running(engine, set_id):
                continue
            provider.destroy(name)
            gone.append(name)
            log.info("lab %s: VM %s: its reservation ended, destroyed", lab, name)
    except LabqError as exc:
        log.warning("lab %s: cannot destroy the VM kept on %s: %s", lab, slot, exc)
    return gone
