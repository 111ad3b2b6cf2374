"""Events may arrive twice (a direct call and a NOTIFY, a rebuild's catch-up): harmless."""

from __future__ import annotations

import pytest

from labq.formats.native import validate_native
from labq.service.notify import decode, encode
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
    service.system_added("a")
    job_id = submit(engine, service, recipes=2)
    before = service.handled
    for _ in range(2):
        service.job_submitted(job_id)
        service.post("submit", job_id)
        service.priority_changed(job_id)
        service.condition_changed("c")
        service.post("consistency")
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
    service.post("consistency")  # as after a NOTIFY nobody heard
    service.drain()
    assert len(dispatcher.started) == 1
    service.stop()


@pytest.mark.parametrize(
    ("kind", "key"),
    [("submit", 7), ("cancel", 1), ("priority", 12), ("system", "a.lab1"), ("access", None)],
)
def test_a_payload_decodes_to_what_was_encoded(kind, key):
    assert decode(encode(kind, key)) == (kind, key)


@pytest.mark.parametrize("payload", ["", "nothing", "submit:x", "wake:", "consistency:"])
def test_an_unknown_payload_is_refused(payload):
    assert decode(payload) is None
