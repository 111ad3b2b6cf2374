"""The job page tells what retention did to a job's logs and what its end sent."""

from __future__ import annotations

from datetime import timedelta

from labq.config import Notify, Retention
from labq.service.outbox import Outbox
from labq.store import transaction
from labq.usecases.retention import prune
from tests.api.conftest import T0, Lab, submit
from tests.ui.test_pages import UI, log_in


def test_the_job_page_says_logs_deleted_on_and_shows_failed_notifications(lab: Lab) -> None:
    job_id = submit(lab, "alice", group="kernel-qe")
    with transaction(lab.engine) as repo:
        repo.queue.cancel_job(job_id, actor="alice", now=T0)
        # nothing listens on port 9: the POST fails and the page says so
        repo.notices.add_webhook(
            "http://127.0.0.1:9/hook", "s", user="alice", group=None, actor="alice", now=T0
        )
    Outbox(lab.engine, Notify(timeout=2.0), lab.clock).run_once()
    log_in(lab, "alice")
    before = lab.client.get(f"{UI}/jobs/{job_id}").text
    assert "kept until" in before
    assert "webhook to http://127.0.0.1:9/hook is failing after 1 try" in before
    prune(lab.engine, Retention(), lab.data_dir, now=T0 + timedelta(days=30))
    after = lab.client.get(f"{UI}/jobs/{job_id}").text
    assert "logs deleted on" in after
    lab.client.cookies.clear()
    log_in(lab, "bob")
    other = lab.client.get(f"{UI}/jobs/{job_id}").text
    assert "logs deleted on" in other  # retention is everyone's to see
    assert "http://127.0.0.1:9/hook" not in other  # notifications are not
