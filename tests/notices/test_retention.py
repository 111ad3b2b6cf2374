"""The pruning pass, on a clock the test sets: expired logs go, the rest stay."""

from __future__ import annotations

from datetime import timedelta

from labq.config import Retention
from labq.dispatch.logs import set_log_dir
from labq.store import reading
from labq.usecases.retention import prune
from tests.notices.conftest import T0, ended_job, open_job


def logs_of(engine, data_dir, job_id):
    with reading(engine) as repo:
        sets = [s.id for s in repo.jobs.load_job(job_id).sets]
    for set_id in sets:
        folder = set_log_dir(data_dir, set_id) / "s1.lab"
        folder.mkdir(parents=True)
        (folder / "task-1-t.log").write_text("hello\n")
        (set_log_dir(data_dir, set_id) / "supervisor.log").write_text("ok\n")
    return [set_log_dir(data_dir, s) for s in sets]


def test_expired_logs_are_pruned_and_recorded_others_kept(engine, tmp_path):
    data = tmp_path / "data"
    scratch = ended_job(engine, T0)  # the default tag: scratch, 30 days
    sixty = ended_job(engine, T0, metadata={"retention_tag": "60days"})
    audit = ended_job(engine, T0, metadata={"retention_tag": "audit"})
    running = open_job(engine, T0)
    folders = {j: logs_of(engine, data, j) for j in (scratch, sixty, audit, running)}
    retention = Retention()

    assert prune(engine, retention, data, now=T0 + timedelta(days=29, hours=23)) == []
    done = prune(engine, retention, data, now=T0 + timedelta(days=30))
    assert [(p.job_id, p.tag, p.files, p.bytes) for p in done] == [(scratch, "scratch", 2, 9)]
    assert not any(f.exists() for f in folders[scratch])
    assert all(f.exists() for j in (sixty, audit, running) for f in folders[j])
    # done once: a later pass finds nothing more for it
    later = prune(engine, retention, data, now=T0 + timedelta(days=365))
    assert [p.job_id for p in later] == [sixty]
    assert all(f.exists() for j in (audit, running) for f in folders[j])
    with reading(engine) as repo:
        record = repo.retention.prune_record(scratch)
        log = repo.log.activity(kind="job", object_id=scratch)
        assert repo.retention.prune_record(audit) is None
    assert record is not None
    assert record.deleted_at == T0 + timedelta(days=30)
    assert next((e.action, e.actor, e.reason) for e in log) == (
        "logs-deleted",
        "labq",
        "retention tag scratch",
    )


def test_lifetimes_and_the_default_tag_come_from_the_settings(engine, tmp_path):
    data = tmp_path / "data"
    plain = ended_job(engine, T0)
    unknown = ended_job(engine, T0, metadata={"retention_tag": "gone-from-settings"})
    for job in (plain, unknown):
        logs_of(engine, data, job)
    retention = Retention(tags={"short": 1.0, "forever": None}, default="short")
    done = prune(engine, retention, data, now=T0 + timedelta(days=2), actor="root")
    assert [(p.job_id, p.tag) for p in done] == [(plain, "short")]  # unknown tags are kept


def test_nothing_is_pruned_when_every_tag_is_kept_forever(engine, tmp_path):
    ended_job(engine, T0)
    retention = Retention(tags={"audit": None}, default="audit")
    assert prune(engine, retention, tmp_path, now=T0 + timedelta(days=10_000)) == []
