"""The issue 14 verbs' forms: reserve, release, loan and remove a system; cancel the jobs a
filter shows; webhooks on the account page. Each allowed and refused, as the API allows.

Uses the API tests' ``lab``: root (admin); alice and carol in kernel-qe; bob in no group.
"""

from __future__ import annotations

import re

from sqlalchemy import select

from labq.domain.states import Condition, RecipeState
from labq.store import reading
from labq.store.tables import Webhooks
from tests.api.conftest import Lab, submit
from tests.ui.test_pages import UI, csrf_of, log_in, message


def switch_to(lab: Lab, who: str) -> None:
    """Log out of the client's session (by forgetting it) and in as ``who``."""
    lab.client.cookies.clear()
    log_in(lab, who)


def test_a_user_reserves_a_free_system_for_some_hours(lab: Lab) -> None:
    log_in(lab, "bob")
    assert "Reserve for" in lab.client.get(f"{UI}/systems/s2.lab").text
    answer = lab.client.post(
        f"{UI}/systems/s2.lab/reserve",
        data={"csrf": csrf_of(lab), "hours": "2"},
        follow_redirects=False,
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/systems/s2.lab?note=reserved"
    assert lab.events.names()[-1] == "JobSubmitted"
    with reading(lab.engine) as repo:
        (job,) = repo.jobs.list_jobs()
    assert job.owner == "bob"
    assert job.spec.whiteboard == "reserve s2.lab for bob"
    reservesys = job.sets[0].spec.recipes[0].metadata["reservesys"]
    assert reservesys["duration"] == 7200
    shown = lab.client.get(f"{UI}/systems/s2.lab?note=reserved")
    assert "A reservation job was queued" in message(shown, "note")


def test_a_held_system_cannot_be_reserved_and_a_bad_duration_is_refused(lab: Lab) -> None:
    log_in(lab, "root")
    loaned = lab.client.post(
        f"{UI}/systems/s1.lab/loan", data={"csrf": csrf_of(lab), "to": "alice"}
    )
    assert loaned.status_code == 200
    switch_to(lab, "bob")
    page = lab.client.get(f"{UI}/systems/s1.lab")
    assert "loaned to alice" in page.text
    assert "Reserve for" not in page.text
    refused = lab.client.post(
        f"{UI}/systems/s1.lab/reserve", data={"csrf": csrf_of(lab), "hours": "2"}
    )
    assert refused.status_code == 409
    assert message(refused).startswith("s1.lab is already loaned to alice")
    assert "s1.lab" in refused.text  # the system's page, not a bare error page
    too_long = lab.client.post(
        f"{UI}/systems/s2.lab/reserve", data={"csrf": csrf_of(lab), "hours": "100000"}
    )
    assert too_long.status_code == 422
    with reading(lab.engine) as repo:
        assert repo.jobs.list_jobs() == []


def test_only_the_holder_or_an_admin_may_release(lab: Lab) -> None:
    log_in(lab, "root")
    lab.client.post(
        f"{UI}/systems/s1.lab/loan", data={"csrf": csrf_of(lab), "to": "alice", "hours": "3"}
    )
    switch_to(lab, "bob")
    assert ">Release<" not in lab.client.get(f"{UI}/systems/s1.lab").text
    refused = lab.client.post(f"{UI}/systems/s1.lab/release", data={"csrf": csrf_of(lab)})
    assert refused.status_code == 403
    assert "only they or an admin may release it" in message(refused)
    free = lab.client.post(f"{UI}/systems/s2.lab/release", data={"csrf": csrf_of(lab)})
    assert free.status_code == 409
    assert message(free) == "s2.lab is neither reserved nor loaned"
    switch_to(lab, "alice")
    assert ">Release<" in lab.client.get(f"{UI}/systems/s1.lab").text
    answer = lab.client.post(
        f"{UI}/systems/s1.lab/release", data={"csrf": csrf_of(lab)}, follow_redirects=False
    )
    assert answer.headers["location"] == "/ui/systems/s1.lab?note=released"
    assert lab.events.names()[-1] == "ReservationChanged"
    with reading(lab.engine) as repo:
        assert repo.reservations.reservation_of("s1.lab") is None


def test_only_an_admin_is_offered_and_allowed_a_loan(lab: Lab) -> None:
    log_in(lab, "alice")
    assert "Loan to" not in lab.client.get(f"{UI}/systems/s2.lab").text
    refused = lab.client.post(
        f"{UI}/systems/s2.lab/loan", data={"csrf": csrf_of(lab), "to": "alice"}
    )
    assert refused.status_code == 403
    switch_to(lab, "root")
    assert "Loan to" in lab.client.get(f"{UI}/systems/s2.lab").text
    unknown = lab.client.post(
        f"{UI}/systems/s2.lab/loan", data={"csrf": csrf_of(lab), "to": "nobody"}
    )
    assert unknown.status_code == 404
    assert "nobody" in message(unknown)
    answer = lab.client.post(
        f"{UI}/systems/s2.lab/loan",
        data={"csrf": csrf_of(lab), "to": "carol", "hours": "1.5", "reason": "bisect"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == "/ui/systems/s2.lab?note=loaned"
    with reading(lab.engine) as repo:
        held = repo.reservations.reservation_of("s2.lab")
    assert held is not None
    assert held.holder == "carol"
    assert held.until is not None
    assert (held.until - held.since).total_seconds() == 5400


def test_only_an_admin_may_remove_a_system(lab: Lab) -> None:
    log_in(lab, "alice")
    assert "Remove system" not in lab.client.get(f"{UI}/systems/s2.lab").text
    refused = lab.client.post(f"{UI}/systems/s2.lab/remove", data={"csrf": csrf_of(lab)})
    assert refused.status_code == 403
    switch_to(lab, "root")
    assert "Remove system" in lab.client.get(f"{UI}/systems/s2.lab").text
    answer = lab.client.post(
        f"{UI}/systems/s2.lab/remove",
        data={"csrf": csrf_of(lab), "force": "true", "reason": "dead disk"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == "/ui/systems/s2.lab?note=removed"
    with reading(lab.engine) as repo:
        assert repo.systems.get_system("s2.lab").condition is Condition.REMOVED
        assert repo.systems.condition_reason("s2.lab") == "dead disk"
    page = lab.client.get(f"{UI}/systems/s2.lab")
    assert "Remove system" not in page.text
    assert "Reserve for" not in page.text
    again = lab.client.post(
        f"{UI}/systems/s2.lab/remove", data={"csrf": csrf_of(lab)}, follow_redirects=False
    )
    assert again.headers["location"] == "/ui/systems/s2.lab?note=already-removed"


def test_cancelling_the_jobs_shown_cancels_those_allowed_and_lists_the_refused(
    lab: Lab,
) -> None:
    alices = [submit(lab, "alice", whiteboard=f"nightly {i}") for i in range(2)]
    bobs = submit(lab, "bob", whiteboard="nightly 3")
    other = submit(lab, "alice", whiteboard="weekly")
    log_in(lab, "alice")
    assert "Cancel the" not in lab.client.get(f"{UI}/jobs").text  # no filter: no bulk form
    assert "Cancel the 3 jobs shown" in lab.client.get(f"{UI}/jobs?whiteboard=nightly*").text
    answer = lab.client.post(
        f"{UI}/jobs/cancel",
        data={"csrf": csrf_of(lab), "whiteboard": "nightly*", "state": "", "reason": "bad build"},
    )
    assert answer.status_code == 200
    assert message(answer, "note") == (
        f"2 of the 3 jobs matched were cancelled (J:{alices[0]}, J:{alices[1]}). 1 refused (below)."
    )
    assert f"job {bobs} belongs to &#39;bob&#39;; &#39;alice&#39; may not change it" in answer.text
    assert lab.events.names()[-1] == "JobsCancelled"
    with reading(lab.engine) as repo:
        assert [repo.jobs.load_job(i).state for i in alices] == [RecipeState.CANCELLED] * 2
        assert repo.jobs.load_job(bobs).state is RecipeState.NEW
        assert repo.jobs.load_job(other).state is RecipeState.NEW


def test_cancelling_with_no_filter_is_refused(lab: Lab) -> None:
    job = submit(lab, "alice")
    log_in(lab, "alice")
    answer = lab.client.post(f"{UI}/jobs/cancel", data={"csrf": csrf_of(lab), "owner": ""})
    assert answer.status_code == 422
    assert message(answer) == "give job ids or at least one filter"
    bad = lab.client.post(f"{UI}/jobs/cancel", data={"csrf": csrf_of(lab), "owner": "a\x00b"})
    assert bad.status_code == 422
    with reading(lab.engine) as repo:
        assert repo.jobs.load_job(job).state is RecipeState.NEW


def test_a_webhook_is_added_with_its_secret_shown_once_and_removed(lab: Lab) -> None:
    log_in(lab, "alice")
    assert "No webhook yet." in lab.client.get(f"{UI}/account").text
    added = lab.client.post(
        f"{UI}/account/webhooks", data={"csrf": csrf_of(lab), "url": "https://ci.example/hook"}
    )
    assert added.status_code == 200
    with reading(lab.engine) as repo:
        (hook,) = repo.notices.list_webhooks()
    assert (hook.url, hook.user, hook.created_by) == ("https://ci.example/hook", "alice", "alice")
    with lab.engine.connect() as conn:
        stored = conn.execute(select(Webhooks.secret).where(Webhooks.id == hook.id)).scalar_one()
    shown = re.search(r'<code id="webhook-secret">([^<]+)<', added.text)
    assert shown is not None
    assert shown.group(1) == stored
    assert f"Webhook {hook.id} added" in message(added, "note")
    later = lab.client.get(f"{UI}/account").text
    assert "https://ci.example/hook" in later
    assert stored not in later
    removed = lab.client.post(
        f"{UI}/account/webhooks/{hook.id}/remove",
        data={"csrf": csrf_of(lab)},
        follow_redirects=False,
    )
    assert removed.headers["location"] == "/ui/account?note=webhook-removed"
    with reading(lab.engine) as repo:
        assert repo.notices.list_webhooks() == []


def test_a_bad_url_and_someone_elses_webhook_are_refused(lab: Lab) -> None:
    log_in(lab, "alice")
    bad = lab.client.post(
        f"{UI}/account/webhooks", data={"csrf": csrf_of(lab), "url": "ftp://ci.example/x"}
    )
    assert bad.status_code == 422
    assert message(bad).startswith("url: a webhook URL is http:// or https:// with a host")
    lab.client.post(
        f"{UI}/account/webhooks", data={"csrf": csrf_of(lab), "url": "http://a.example"}
    )
    with reading(lab.engine) as repo:
        (hook,) = repo.notices.list_webhooks()
    switch_to(lab, "bob")
    assert "http://a.example" not in lab.client.get(f"{UI}/account").text
    refused = lab.client.post(
        f"{UI}/account/webhooks/{hook.id}/remove", data={"csrf": csrf_of(lab)}
    )
    assert refused.status_code == 403
    assert message(refused) == f"'bob' may not remove webhook {hook.id}"
    with reading(lab.engine) as repo:
        assert [h.id for h in repo.notices.list_webhooks()] == [hook.id]
