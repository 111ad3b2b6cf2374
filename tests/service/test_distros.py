"""Distro trees through the real service and store: placed only where a lab carries the
tree; a tree removed from every lab aborts a queued recipe with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from labq.config import Settings
from labq.domain.distro import DistroTree
from labq.domain.events import DistrosChanged, JobSubmitted, SystemAdded
from labq.domain.model import System
from labq.domain.states import RecipeState
from labq.formats.native import validate_native
from labq.service import bridge
from labq.service.inbox import ConsistencyDue
from labq.service.loop import SchedulerService
from labq.store import database, transaction
from tests.conftest import pg_copy
from tests.doubles import RecordingDispatcher

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
RHEL9 = {"family": "RedHatEnterpriseLinux9"}


def rhel9(lab: str) -> DistroTree:
    return DistroTree(
        lab=lab, name="RHEL-9.4", arch="x86_64", family="RedHatEnterpriseLinux9", added_at=NOW
    )


def fedora(lab: str) -> DistroTree:
    return DistroTree(lab=lab, name="Fedora-40", arch="x86_64", family="Fedora40", added_at=NOW)


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path) -> Iterator[Engine]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'labq.db'}"
        database.upgrade(url)
        engine = database.make_engine(url)
        yield from _filled(engine)
    else:
        with pg_copy(request.getfixturevalue("pg_server")) as pg_url:
            yield from _filled(database.make_engine(pg_url))


def _filled(engine: Engine) -> Iterator[Engine]:
    with transaction(engine) as repo:
        for lab in ("lab1", "lab2"):
            repo.systems.add_lab(lab, actor="admin", now=NOW)
        repo.people.add_user("alice", actor="admin", now=NOW)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def service(engine) -> Iterator[SchedulerService]:
    settings = Settings(consistency_every=3600)
    service = SchedulerService.elected(
        engine, settings, RecordingDispatcher(), holder="test", clock=lambda: NOW
    )
    service.start()
    try:
        yield service
    finally:
        service.stop()


def carry(engine, service, *trees: DistroTree) -> None:
    with transaction(engine) as repo:
        for tree in trees:
            repo.distros.add(tree)
    for lab in sorted({t.lab for t in trees}):
        service.post(DistrosChanged(lab))
    service.drain()


def remove(engine, service, lab: str, name: str) -> None:
    with transaction(engine) as repo:
        repo.distros.remove(lab, name, now=NOW)
    service.post(DistrosChanged(lab))
    service.drain()


def add_systems(engine, service, **labs: str) -> None:
    with transaction(engine) as repo:
        for name, lab in labs.items():
            repo.systems.add_system(System(fqdn=name, lab=lab), actor="admin", now=NOW)
    for name in labs:
        service.post(SystemAdded(name))
    service.drain()


def submit(engine, service, distro=None) -> int:
    recipe = {} if distro is None else {"metadata": {"distro_requires": distro}}
    spec = validate_native({"recipe_sets": [{"recipes": [recipe]}]}, source="t")
    with transaction(engine) as repo:
        job_id = repo.queue.submit_job(spec, owner="alice", now=NOW, source_format="native")
    service.post(JobSubmitted(job_id))
    service.drain()
    return job_id


def the_recipe(engine, job_id):
    with transaction(engine) as repo:
        (recipe_set,) = repo.jobs.load_job(job_id).sets
        (recipe,) = recipe_set.recipes
        return recipe, repo.moves.recipe_history(recipe.id)[-1].reason


def test_a_recipe_is_placed_only_in_the_lab_that_carries_its_tree(engine, service):
    carry(engine, service, fedora("lab1"), rhel9("lab2"), fedora("lab2"))
    add_systems(engine, service, a="lab1", b="lab2")
    recipe, _ = the_recipe(engine, submit(engine, service, RHEL9))
    assert recipe.system == "b"
    # a restarted scheduler loads the trees with the rest: a fresh core says the same
    with transaction(engine) as repo:
        core = bridge.rebuild(repo, Settings().scheduler())
    (klass,) = [k for k in core.index.classes.values() if k.distro is not None]
    assert core.index.systems_of[klass.key] == {"b"}


def test_a_tree_removed_from_every_lab_aborts_a_queued_recipe_with_the_reason(engine, service):
    carry(engine, service, rhel9("lab1"), fedora("lab1"), rhel9("lab2"))
    add_systems(engine, service, a="lab1", b="lab2")
    submit(engine, service)  # the two plain jobs keep both systems busy
    submit(engine, service)
    queued = submit(engine, service, RHEL9)
    recipe, _ = the_recipe(engine, queued)
    assert recipe.state is RecipeState.QUEUED
    remove(engine, service, "lab1", "RHEL-9.4")
    remove(engine, service, "lab2", "RHEL-9.4")
    service.post(ConsistencyDue())
    service.drain()
    recipe, reason = the_recipe(engine, queued)
    assert recipe.state is RecipeState.ABORTED
    assert reason == (
        f"can never run: recipe {recipe.id}: no lab carries a distro tree for"
        " family=RedHatEnterpriseLinux9 (the tree was removed)"
    )


def test_a_tree_removed_from_one_lab_leaves_the_recipe_to_the_other(engine, service):
    carry(engine, service, rhel9("lab1"), rhel9("lab2"))
    add_systems(engine, service, a="lab1", b="lab2")
    submit(engine, service)
    submit(engine, service)
    queued = submit(engine, service, RHEL9)
    remove(engine, service, "lab1", "RHEL-9.4")
    service.post(ConsistencyDue())
    service.drain()
    recipe, _ = the_recipe(engine, queued)
    assert recipe.state is RecipeState.QUEUED
