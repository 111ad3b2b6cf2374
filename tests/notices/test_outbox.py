"""The sender: real SMTP and HTTP receivers, a hand-moved clock, restarts between passes."""

from __future__ import annotations

import json

from labq.config import Notify, Smtp
from labq.domain.notices import DELIVERY_HEADER, SIGNATURE_HEADER, verify
from labq.service.outbox import Outbox
from labq.store import reading, transaction
from tests.notices.conftest import T0, ended_job, open_job
from tests.notices.receivers import http_receiver, smtp_server


def settings(port: int | None = None, **kw: object) -> Notify:
    smtp = Smtp(host="127.0.0.1", port=port, owner_domain="lab.example") if port else Smtp()
    return Notify(smtp=smtp, backoff=30.0, backoff_max=600.0, **kw)  # type: ignore[arg-type]


def add_hook(engine, url: str, **whose: str | None) -> str:
    with transaction(engine) as repo:
        repo.notices.add_webhook(url, "s3cret-" + url[-4:], actor="root", now=T0, **whose)
    return "s3cret-" + url[-4:]


def test_a_job_end_is_emailed_and_posted_signed_once_across_restarts(engine, clock):
    with smtp_server() as mailbox, http_receiver() as hooks:
        secret = add_hook(engine, hooks.url, user="alice", group=None)
        job_id = ended_job(
            engine, T0, metadata={"cc": ["qa@lab.example", "not an address"]}, whiteboard="nightly"
        )
        outbox = Outbox(engine, settings(mailbox.port), clock, ui_base="http://labq.example")
        assert outbox.run_once() == (2, 2)
        # a second pass, and a restarted sender, send nothing more
        assert outbox.run_once() == (0, 0)
        assert Outbox(engine, settings(mailbox.port), clock).run_once() == (0, 0)

    [(to, mail)] = mailbox.mails
    assert to == ["alice@lab.example", "qa@lab.example"]
    assert mail["Subject"] == f"[labq] job {job_id} cancelled nightly"
    assert f"http://labq.example/ui/jobs/{job_id}" in mail.get_payload()
    [(headers, body)] = hooks.posts
    assert verify(secret, body, headers[SIGNATURE_HEADER.lower()])
    assert not verify("another secret", body, headers[SIGNATURE_HEADER.lower()])
    payload = json.loads(body)
    assert payload["event"] == "job.ended"
    assert payload["job"]["id"] == job_id
    assert payload["job"]["state"] == "cancelled"
    assert payload["job"]["cc"] == ["qa@lab.example"]
    with reading(engine) as repo:
        sent = repo.notices.job_notifications(job_id)
    assert [(n.kind, n.state, n.attempts) for n in sent] == [
        ("email", "sent", 1),
        ("webhook", "sent", 1),
    ]
    assert headers[DELIVERY_HEADER.lower()] == str(sent[1].id)


def test_email_is_off_without_an_smtp_host_and_jobs_still_running_wait(engine, clock):
    with http_receiver() as hooks:
        add_hook(engine, hooks.url, user=None, group="kernel-qe")
        running = open_job(engine, T0)
        outbox = Outbox(engine, settings(), clock)
        assert outbox.run_once() == (0, 0)
        ended = ended_job(engine, T0, group="kernel-qe", owner="alice")
        assert outbox.run_once() == (1, 1)
    [(_, body)] = hooks.posts
    assert json.loads(body)["job"]["id"] == ended
    with reading(engine) as repo:
        assert repo.notices.job_notifications(running) == []


def test_a_failing_receiver_is_retried_with_backoff_then_given_up(engine, clock):
    with http_receiver() as hooks:
        hooks.status = 500
        add_hook(engine, hooks.url, user="alice", group=None)
        job_id = ended_job(engine, T0)
        outbox = Outbox(engine, settings(attempts=3), clock)
        assert outbox.run_once() == (1, 0)
        assert outbox.run_once() == (0, 0)  # not due again yet
        clock.advance(seconds=29)
        assert outbox.run_once() == (0, 0)
        clock.advance(seconds=1)
        assert outbox.run_once() == (0, 0)  # second try, failed: next in 60 s
        with reading(engine) as repo:
            [item] = repo.notices.job_notifications(job_id)
        assert (item.state, item.attempts) == ("pending", 2)
        assert (item.next_at - clock.now).total_seconds() == 60  # doubled from 30
        assert item.last_error is not None
        assert "HTTP 500" in item.last_error
        clock.advance(seconds=60)
        assert outbox.run_once() == (0, 0)  # third and last
        clock.advance(days=1)
        assert outbox.run_once() == (0, 0)
    assert len(hooks.posts) == 3
    with reading(engine) as repo:
        [item] = repo.notices.job_notifications(job_id)
        log = repo.log.activity(kind="job", object_id=job_id)
    assert (item.state, item.attempts) == ("failed", 3)
    assert any(e.action == "webhook-failed" for e in log)


def test_a_receiver_that_recovers_gets_it_on_the_retry(engine, clock):
    with http_receiver() as hooks:
        hooks.status = 503
        add_hook(engine, hooks.url, user="alice", group=None)
        job_id = ended_job(engine, T0)
        outbox = Outbox(engine, settings(), clock)
        outbox.run_once()
        hooks.status = 204
        clock.advance(seconds=30)
        assert outbox.run_once() == (0, 1)
    with reading(engine) as repo:
        [item] = repo.notices.job_notifications(job_id)
    assert (item.state, item.attempts, item.sent_at) == ("sent", 2, clock.now)
    assert len(hooks.posts) == 2


def test_no_smtp_server_listening_is_a_failure_in_one_line(engine, clock):
    from tests.notices.receivers import free_port

    job_id = ended_job(engine, T0, metadata={"cc": ["qa@lab.example"]})
    outbox = Outbox(engine, settings(free_port()), clock)
    assert outbox.run_once() == (1, 0)
    with reading(engine) as repo:
        [item] = repo.notices.job_notifications(job_id)
    assert item.state == "pending"
    assert item.last_error is not None
    assert item.last_error.startswith("SMTP 127.0.0.1:")
    assert "\n" not in item.last_error


def test_a_removed_webhook_fails_its_pending_posts_without_retrying(engine, clock):
    with http_receiver() as hooks:
        add_hook(engine, hooks.url, user="alice", group=None)
        job_id = ended_job(engine, T0)
        outbox = Outbox(engine, settings(), clock)
        assert outbox.notice() == 1
        with transaction(engine) as repo:
            [hook] = repo.notices.list_webhooks()
            repo.notices.remove_webhook(hook.id, actor="alice", now=T0)
        assert outbox.send_due() == 0
    assert hooks.posts == []
    with reading(engine) as repo:
        [item] = repo.notices.job_notifications(job_id)
    assert (item.state, item.last_error) == ("failed", "the webhook was removed")


def test_jobs_ended_before_the_upgrade_are_not_noticed(tmp_path, clock):
    # A database at 0009 with an ended job, upgraded: that job's end is old news.
    from labq.store import make_engine, upgrade
    from labq.store.database import downgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    upgrade(url)
    engine = make_engine(url)
    with transaction(engine) as repo:
        repo.people.add_user("alice", actor="setup", now=T0)
    old = ended_job(engine, T0)
    downgrade(url, "0009")
    upgrade(url)
    new = ended_job(engine, T0)
    with reading(engine) as repo:
        assert repo.notices.unnoticed_ended_jobs() == [new]
    assert old < new
    engine.dispose()
