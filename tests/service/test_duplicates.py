"""Events may arrive twice (a direct call and a NOTIFY, a rebuild's catch-up): harmless."""

from __future__ import annotations

import pytest

from labq.domain.events import (
    AccessChanged,
    ConditionChanged,
    JobsCancelled,
    JobSubmitted,
    PauseChanged,
    PriorityChanged,
    ReservationChanged,
    SetEnded,
    SystemAdded,
    decode,
    encode,
)
from labq.formats.native import validate_native
from labq.service.inbox import ConsistencyDue
from labq.store import transaction
from tests.service.test_loop import (
    NOW,
    RecordingDispatcher,
    add_systems,
    engine,
    make_service,
    submit,
)

__all__ = ["engine"]


def test_every_event_told_twice_changes_nothing_the_second_time(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a", "b", "c")
    service.post(SystemAdded("a"))
    job_id = submit(engine, service, recipes=2)
    before = service.handled
    for _ in range(2):
        service.post(JobSubmitted(job_id))
        service.post(JobSubmitted(job_id))  # the same again, as by NOTIFY
        service.post(PriorityChanged(job_id))
        service.post(ConditionChanged("c"))
        service.post(ConsistencyDue())
    service.drain()
    assert len(dispatcher.started) == 1, "the set was started once"
    # the two submissions told back to back are taken together: 4 events a round
    assert service.handled == before + 8, "every event handled, none failed into a rebuild"
    assert service.core is not None
    assert len(service.core.sets) == 1
    service.stop()


def test_a_job_stored_without_its_event_is_caught_by_the_consistency_pass(engine):
    dispatcher = RecordingDispatcher()
    service = make_service(engine, dispatcher)
    add_systems(engine, service, "a")
    spec = validate_native({"recipe_sets": [{"recipes": [{}]}]}, source="t")
    with transaction(engine) as repo:
        repo.queue.submit_job(spec, owner="alice", now=NOW, source_format="native")
    service.post(ConsistencyDue())  # as after a NOTIFY nobody heard
    service.drain()
    assert len(dispatcher.started) == 1
    service.stop()


@pytest.mark.parametrize(
    "event",
    [
        JobSubmitted(7),
        JobsCancelled(1),
        PriorityChanged(12),
        SystemAdded("a.lab1"),
        AccessChanged(),
        SetEnded(3),
        PauseChanged("lab1"),
    ],
)
def test_a_payload_decodes_to_what_was_encoded(event):
    assert decode(encode(event)) == event


def test_the_wire_names_stay_as_they_were():
    assert encode(JobSubmitted(7)) == "submit:7"
    assert encode(AccessChanged()) == "access:"
    assert encode(ReservationChanged("a.lab1")) == "reservation:a.lab1"


@pytest.mark.parametrize("payload", ["", "nothing", "submit:x", "wake:", "consistency:"])
def test_an_unknown_payload_is_refused(payload):
    assert decode(payload) is None
