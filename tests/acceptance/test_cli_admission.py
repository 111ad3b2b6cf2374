"""``labq filter`` and ``labq queue pause|resume|pauses`` against a real ``labq server``."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def run(labq, live_server):
    """Run ``labq`` against the live server as its admin."""

    def call(*args: str, ok: bool = True):
        env = {"LABQ_URL": live_server.url, "LABQ_TOKEN": live_server.token}
        result = labq(*args, env=env, timeout=30)
        if ok:
            assert result.returncode == 0, (args, result.stderr)
        return result

    return call


def refused(result, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("labq: ")
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr


def test_filter_rules_from_the_command_line(run) -> None:
    added = run(
        "filter", "add", "--action", "rate-limit", "--rate", "2", "--priority", "5",
        "--match", "owner=alice", "--match", "whiteboard~nightly*", "--comment", "share", "--json",
    )  # fmt: skip
    rule = json.loads(added.stdout)
    assert (rule["action"], rule["rate"], rule["priority"]) == ("rate-limit", 2, 5)
    assert rule["predicates"] == ["owner=alice", "whiteboard~nightly*"]
    plain = run("filter", "add", "--action", "pause", "--comment", "maintenance")
    assert plain.stdout.startswith("added filter ")
    assert "pause if every job (priority 0)" in plain.stdout
    listed = json.loads(run("filter", "list", "--json").stdout)["filters"]
    assert [f["action"] for f in listed] == ["pause", "rate-limit"]  # tried in this order
    table = run("filter", "list").stdout
    assert "rate-limit 2" in table
    assert "owner=alice whiteboard~nightly*" in table
    refused(run("filter", "add", "--action", "pause", "--match", "colour=red", ok=False), "colour")
    refused(run("filter", "add", "--action", "rate-limit", ok=False), "needs a rate")
    deleted = run("filter", "delete", str(rule["id"]), "--json")
    assert json.loads(deleted.stdout) == {"id": rule["id"], "deleted": True}
    refused(run("filter", "delete", str(rule["id"]), ok=False), f"no filter {rule['id']}")


def test_pausing_and_resuming_a_lab_queue(run) -> None:
    run("lab", "add", "lab1")
    paused = json.loads(
        run("queue", "pause", "lab1", "--for", "2h", "--reason", "move", "--json").stdout
    )
    assert (paused["lab"], paused["reason"], paused["paused_by"]) == ("lab1", "move", "admin")
    assert paused["until"] is not None
    shown = run("queue", "pauses").stdout
    assert "lab1" in shown
    assert "move" in shown
    again = run("queue", "pause", "lab1", "--until", "2999-01-01T02:00:00+02:00").stdout
    assert again.strip() == "paused lab1 until 2999-01-01 00:00:00 UTC"  # a new pause, no reason
    refused(run("queue", "pause", "lab1", "--for", "soon", ok=False), "--for", "not a duration")
    refused(run("queue", "pause", "lab1", "--for", "1h", "--until", "2999-01-01", ok=False))
    refused(run("queue", "pause", "nowhere", ok=False), "no lab named 'nowhere'")
    assert run("queue", "resume", "lab1").stdout.strip() == "resumed lab1"
    assert run("queue", "resume", "lab1").stdout.strip() == "lab1 was not paused"
    assert json.loads(run("queue", "pauses", "--json").stdout) == {"pauses": []}
    assert json.loads(run("queue", "--json").stdout) == {"queue": []}  # the listing still works


def test_the_queue_says_where_each_set_stands_and_why(run, tmp_path) -> None:
    run("lab", "add", "lab1")
    run("system", "add", "s1.lab1", "--lab", "lab1")
    run("queue", "pause", "lab1", "--reason", "rack move")
    job = tmp_path / "job.yaml"
    job.write_text(
        "recipe_sets:\n  - locks: {storage: {exclusive: [nfs1]}}\n"
        "    recipes:\n      - tasks: [{name: t, run: 'true'}]\n"
    )
    submitted = json.loads(run("job", "submit", str(job), "--json").stdout)
    rows = json.loads(run("queue", "--json").stdout)["queue"]
    assert [r["job_id"] for r in rows] == [submitted["id"]]
    (row,) = rows
    # nothing runs: it takes a free exclusive lock, so it goes first (spv 0, not base 1)
    assert (row["spv"], row["age_ticks"]) == (0.0, 0)
    assert row["waits_for"] == "the queue of lab1 is paused"
    table = run("queue").stdout
    for heading in ("owner", "spv", "weight", "waited (ticks)", "whiteboard", "reason"):
        assert heading in table
    assert "the queue of lab1 is paused" in table
