"""The spool between an agent and its supervisor: the journal, the control word, the lease."""

from __future__ import annotations

import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.agent.spool import (
    LOST,
    STOP,
    Fenced,
    SetDir,
    SpoolReporter,
    last_seq,
    read_events,
    write_atomic,
)
from labq.domain.states import RecipeState, Result


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reporter(tmp_path: Path, clock: Clock | None = None, lease: float = 3.0) -> SpoolReporter:
    spool = SetDir.under(tmp_path / "sets", 7)
    spool.path.mkdir(parents=True)
    return SpoolReporter(
        spool,
        log_root=tmp_path / "logs" / "set-7",
        lease=lease,
        cancel=threading.Event(),
        lost=threading.Event(),
        monotonic=clock or Clock(),
    )


def test_reports_are_numbered_lines_with_log_paths_relative_to_the_set(tmp_path):
    r = reporter(tmp_path)
    r.recipe_state(1, RecipeState.RUNNING)
    r.task_started(5)
    log = tmp_path / "logs" / "set-7" / "h1.example" / "task-5-hello.log"
    r.task_finished(5, 0, Result.PASS, log, "exit code 0")
    r.recipe_state(1, RecipeState.ABORTED, "it broke")
    events, offset = read_events(r.spool.journal, 0)
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert [e["kind"] for e in events] == ["recipe", "task_started", "task_finished", "recipe"]
    assert events[2]["log"] == "h1.example/task-5-hello.log"
    assert events[2]["result"] == "pass"
    assert events[2]["exit_code"] == 0
    assert events[3]["reason"] == "it broke"
    assert events[3]["state"] == "aborted"
    assert all(e["at"].endswith("+00:00") for e in events)
    assert offset == r.spool.journal.stat().st_size
    assert read_events(r.spool.journal, offset) == ([], offset)


def test_a_line_being_written_is_left_for_later(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_text('{"seq": 1, "kind": "task_started", "task": 1}\n{"seq": 2, "ki')
    events, offset = read_events(journal, 0)
    assert [e["seq"] for e in events] == [1]
    with journal.open("a") as f:
        f.write('nd": "task_started", "task": 2}\n')
    more, end = read_events(journal, offset)
    assert [e["seq"] for e in more] == [2]
    assert end == journal.stat().st_size
    assert last_seq(journal) == 2


def test_a_journal_goes_on_numbering_where_it_was(tmp_path):
    first = reporter(tmp_path)
    first.task_started(1)
    first.task_started(2)
    again = reporter_on(first.spool, tmp_path)
    again.task_started(3)
    events, _ = read_events(first.spool.journal, 0)
    assert [e["seq"] for e in events] == [1, 2, 3]


def reporter_on(spool: SetDir, tmp_path: Path) -> SpoolReporter:
    return SpoolReporter(
        spool, log_root=tmp_path, lease=3.0, cancel=threading.Event(), lost=threading.Event()
    )


def test_stop_cancels_and_lost_stops_everything_and_the_journal(tmp_path):
    r = reporter(tmp_path)
    r.spool.write_control(STOP)
    r.heartbeat()
    assert r.cancel.is_set()
    assert not r.lost.is_set()
    r.spool.write_control(LOST)
    r.heartbeat()
    assert r.lost.is_set()
    r.task_started(9)  # nothing more reaches the server
    assert read_events(r.spool.journal, 0) == ([], 0)
    r.spool.write_control(STOP)  # lost is final
    assert r.spool.read_control() == LOST


def test_the_lease_fences_the_set_when_no_beat_was_confirmed(tmp_path):
    clock = Clock()
    r = reporter(tmp_path, clock, lease=3.0)
    clock.now += 2.9
    r.heartbeat()  # the claim itself counts as the first confirmation
    assert not r.lost.is_set()
    r.spool.write_beat(clock.now)  # the agent had a beat confirmed
    clock.now += 2.9
    r.heartbeat()
    assert not r.lost.is_set()
    clock.now += 0.2
    with pytest.raises(Fenced, match=r"no heartbeat confirmed by the server for 3\.1 s"):
        r.heartbeat()
    assert r.lost.is_set()
    assert r.cancel.is_set()
    r.heartbeat()  # said once
    r.spool.write_beat(clock.now)
    r.heartbeat()
    assert r.lost.is_set()  # a fenced set stays fenced


def test_a_beat_older_than_the_supervisor_does_not_fence_it_at_once(tmp_path):
    clock = Clock()
    spool = SetDir.under(tmp_path, 3)
    spool.path.mkdir()
    spool.write_beat(clock.now - 100)  # left by an agent long ago
    r = SpoolReporter(
        spool,
        log_root=tmp_path,
        lease=3.0,
        cancel=threading.Event(),
        lost=threading.Event(),
        monotonic=clock,
    )
    r.heartbeat()
    assert not r.lost.is_set()


def test_small_files_round_trip_and_are_private(tmp_path):
    spool = SetDir.under(tmp_path, 42)
    assert spool.set_id == 42
    assert SetDir.is_one(spool.path)
    assert not SetDir.is_one(tmp_path / "set-x")
    assert not SetDir.is_one(tmp_path / "other")
    assert spool.read_claim() is None
    assert spool.read_pid() is None
    assert spool.ended() is None
    spool.write_claim({"set": 42, "claim": "c"})
    spool.write_pid(123)
    spool.write_exit(3)
    spool.mark_ended("ended")
    assert spool.read_claim() == {"set": 42, "claim": "c"}
    assert (spool.read_pid(), spool.read_exit(), spool.ended()) == (123, 3, "ended")
    assert spool.claim_file.stat().st_mode & 0o077 == 0
    with pytest.raises(ValueError, match="not a control word"):
        spool.write_control("carry on")


@given(st.lists(st.sampled_from(["recipe", "start", "finish"]), max_size=30), st.data())
def test_read_in_any_pieces_the_journal_gives_each_report_once(tmp_path_factory, kinds, data):
    tmp = tmp_path_factory.mktemp("j")
    r = reporter(tmp)
    offset, seen = 0, []
    for kind in kinds:
        if kind == "recipe":
            r.recipe_state(1, RecipeState.RUNNING)
        elif kind == "start":
            r.task_started(1)
        else:
            r.task_finished(1, 1, Result.FAIL, tmp / "x.log", "exit code 1")
        if data.draw(st.booleans()):
            events, offset = read_events(r.spool.journal, offset)
            seen.extend(e["seq"] for e in events)
    events, offset = read_events(r.spool.journal, offset)
    seen.extend(e["seq"] for e in events)
    assert seen == list(range(1, len(kinds) + 1))


def test_the_heartbeat_answers_the_max_time_the_server_last_said(tmp_path):
    r = reporter(tmp_path)
    assert r.heartbeat() is None  # nothing said: the plan's deadline stands
    r.spool.write_max_time(660.0)  # labq job extend --by 60 on a 600 s set
    assert r.heartbeat() == 660.0
    r.spool.write_control(LOST)
    assert r.heartbeat() is None  # a lost set hears nothing more


def _write_many(path: Path, text: str, times: int, failures: Any) -> None:
    for _ in range(times):
        try:
            write_atomic(path, text)
        except OSError as exc:
            failures.put(repr(exc))
            return


def test_two_processes_writing_one_file_at_once_both_succeed(tmp_path: Path) -> None:
    """The agent and the supervisor it forked record the supervisor's pid at once: neither
    write may take the other's temporary file away (the supervisor died of it)."""
    context = multiprocessing.get_context("fork")
    failures = context.SimpleQueue()
    target = tmp_path / "pid"
    writers = [
        context.Process(target=_write_many, args=(target, text, 400, failures))
        for text in ("111", "222")
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    assert failures.empty(), failures.get()
    assert target.read_text() in ("111", "222")
    assert [p.name for p in tmp_path.iterdir()] == ["pid"]  # no temporary file left
