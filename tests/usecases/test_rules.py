"""The rules live in the use cases: a refusal raises a domain error, stores nothing and
posts nothing for the scheduler."""

from __future__ import annotations

import pytest

from labq.domain.events import Event, JobSubmitted, ReservationChanged, SystemAdded
from labq.domain.job import JobSpec
from labq.domain.model import System, User
from labq.errors import ConflictError, ForbiddenError, NotFoundError
from labq.store import Repository
from labq.usecases import notices, people, reservations, systems
from tests.contract.conftest import at

ADMIN = User("root", admin=True)
ALICE = User("alice", groups=frozenset({"kernel-qe"}))
BOB = User("bob")


class Posted:
    """An event sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def post(self, event: Event) -> None:
        self.events.append(event)


def submit(repo: Repository, caller: User, spec: JobSpec) -> int:
    return repo.queue.submit_job(spec, owner=caller.name, now=at(1), source_format="native")


def test_a_non_admin_may_not_add_a_system(seeded: Repository) -> None:
    sink = Posted()
    with pytest.raises(ForbiddenError, match="only admins may do this, and 'alice' is not one"):
        systems.add_system(seeded, ALICE, System("s9.lab", "lab1"), now=at(1), sink=sink)
    with pytest.raises(NotFoundError):
        seeded.systems.get_system("s9.lab")
    assert sink.events == []


def test_an_admin_adds_a_system_and_the_scheduler_hears_of_it(seeded: Repository) -> None:
    sink = Posted()
    added, by_agent = systems.add_system(
        seeded, ADMIN, System("s9.lab", "lab1"), now=at(1), sink=sink
    )
    assert (added.fqdn, by_agent) == ("s9.lab", False)
    assert sink.events == [SystemAdded("s9.lab")]


def test_a_system_someone_else_holds_may_not_be_reserved(seeded: Repository) -> None:
    sink = Posted()
    reservations.loan_system(
        seeded, ADMIN, "s1.lab", "bob", seconds=None, reason="debugging", now=at(1), sink=sink
    )
    assert sink.events == [ReservationChanged("s1.lab")]
    jobs_before = len(seeded.jobs.list_jobs())
    with pytest.raises(ConflictError, match=r"s1\.lab is already"):
        reservations.reserve_system(seeded, ALICE, "s1.lab", 3600, submit=submit, sink=sink)
    assert len(seeded.jobs.list_jobs()) == jobs_before  # no reservation job queued
    assert sink.events == [ReservationChanged("s1.lab")]


def test_a_free_system_is_reserved_by_a_job_pinned_to_it(seeded: Repository) -> None:
    sink = Posted()
    job_id = reservations.reserve_system(seeded, ALICE, "s2.lab", 3600, submit=submit, sink=sink)
    job = seeded.jobs.load_job(job_id)
    assert job.owner == "alice"
    assert job.spec.recipe_sets[0].recipes[0].force == "s2.lab"
    assert sink.events == [JobSubmitted(job_id)]


def test_only_the_holder_or_an_admin_releases(seeded: Repository) -> None:
    sink = Posted()
    reservations.loan_system(
        seeded, ADMIN, "s1.lab", "bob", seconds=3600, reason=None, now=at(1), sink=sink
    )
    with pytest.raises(ForbiddenError, match="only they or an admin may release it"):
        reservations.release_system(seeded, ALICE, "s1.lab", now=at(2), sink=sink)
    released = reservations.release_system(seeded, BOB, "s1.lab", now=at(2), sink=sink)
    assert released.holder == "bob"
    assert seeded.reservations.reservation_of("s1.lab") is None


def test_a_non_admin_may_not_loan(seeded: Repository) -> None:
    sink = Posted()
    with pytest.raises(ForbiddenError):
        reservations.loan_system(
            seeded, ALICE, "s1.lab", "alice", seconds=None, reason=None, now=at(1), sink=sink
        )
    assert seeded.reservations.reservation_of("s1.lab") is None
    assert sink.events == []


def test_only_admins_manage_another_users_tokens() -> None:
    assert people.tokens_owner(ALICE, None) == "alice"
    assert people.tokens_owner(ADMIN, "bob") == "bob"
    with pytest.raises(ForbiddenError, match="only admins may manage another user's tokens"):
        people.tokens_owner(ALICE, "bob")


def test_a_webhook_for_someone_else_is_refused(seeded: Repository) -> None:
    with pytest.raises(ForbiddenError, match="'alice' may not add a webhook for user 'bob'"):
        notices.add_webhook(seeded, ALICE, "https://example.com/hook", user="bob", now=at(1))
    assert notices.visible_webhooks(seeded, ADMIN) == []
