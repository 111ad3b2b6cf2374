"""The agent's forwarding of one set, against a server double with the protocol's rules
(numbered reports applied once, logs by offset), and the local copies it keeps."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from labq.agent import ledger
from labq.agent.forwarder import Forwarder
from labq.agent.launcher import Supervisor
from labq.agent.link import ClaimGone, Unreachable
from labq.agent.spool import LOST, STOP, SetDir
from labq.api.agent import append_at


class ServerDouble:
    """The server's side of report, logs and ended for one set; it can lose answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.applied: list[dict[str, Any]] = []
        self.ends: list[int | None] = []
        self.lose_next = False
        self.gone = False

    def _answer(self) -> None:
        if self.lose_next:
            self.lose_next = False
            raise Unreachable("the answer was lost")

    def report(self, set_id: int, claim: str, events: list[dict[str, Any]]) -> int:
        if self.gone:
            raise ClaimGone(f"recipe set {set_id} is not this agent's")
        last = self.applied[-1]["seq"] if self.applied else 0
        for event in sorted(events, key=lambda e: e["seq"]):
            if event["seq"] == last + 1:
                self.applied.append(event)
                last += 1
        self._answer()
        return int(last)

    def put_log(self, set_id: int, claim: str, path: str, offset: int, chunk: bytes) -> int:
        size = append_at(self.root / path, offset, chunk)
        self._answer()
        return size

    def ended(self, set_id: int, claim: str, code: int | None) -> None:
        if self.gone:
            raise ClaimGone(f"recipe set {set_id} is not this agent's")
        self.ends.append(code)


@pytest.fixture
def setup(tmp_path):
    spool = SetDir.under(ledger.sets_root(tmp_path / "agent"), 4)
    spool.write_claim({"set": 4, "claim": "c4"})
    logs = tmp_path / "agent" / "logs" / "set-4"
    logs.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = ServerDouble(tmp_path / "server")
    forwarder = Forwarder(server, spool, "c4", logs, Supervisor(spool, proc.pid, proc))  # type: ignore[arg-type]
    yield forwarder, server, proc, logs
    proc.kill()
    proc.wait()


def journal(spool: SetDir, *seqs: int) -> None:
    with spool.journal.open("a") as f:
        for seq in seqs:
            f.write(f'{{"seq": {seq}, "kind": "task_started", "task": {seq}}}\n')


def test_reports_and_logs_go_once_each_and_the_end_after_the_supervisor_exits(setup):
    forwarder, server, proc, logs = setup
    journal(forwarder.spool, 1, 2)
    (logs / "supervisor.log").write_bytes(b"one\n")
    assert forwarder.step() is False
    server.lose_next = True
    journal(forwarder.spool, 3)
    with pytest.raises(Unreachable):
        forwarder.step()  # report 3 applied, its answer lost
    assert forwarder.step() is False
    assert [e["seq"] for e in server.applied] == [1, 2, 3]
    assert server.ends == []  # the supervisor still runs
    journal(forwarder.spool, 4)
    with (logs / "supervisor.log").open("ab") as f:
        f.write(b"two\n")
    forwarder.spool.write_exit(0)
    proc.kill()
    proc.wait()
    assert forwarder.step() is True
    assert [e["seq"] for e in server.applied] == [1, 2, 3, 4]
    assert (server.root / "supervisor.log").read_bytes() == b"one\ntwo\n"
    assert server.ends == [0]  # what the supervisor wrote, not the signal that ended it
    assert forwarder.spool.ended() == "ended"
    assert forwarder.step() is True
    assert server.ends == [0]


def test_the_recipes_end_only_once_the_supervisor_exited_and_every_log_is_up(setup):
    forwarder, server, proc, logs = setup
    journal(forwarder.spool, 1)
    with forwarder.spool.journal.open("a") as f:
        f.write('{"seq": 2, "kind": "recipe", "recipe": 1, "state": "completed"}\n')
    assert forwarder.step() is False
    assert [e["seq"] for e in server.applied] == [1]  # the end waits
    (logs / "h1" / "collected").mkdir(parents=True)
    (logs / "h1" / "collected" / "messages").write_bytes(b"archived\n")
    forwarder.spool.write_exit(0)
    proc.kill()
    proc.wait()
    assert forwarder.step() is True
    assert [e["seq"] for e in server.applied] == [1, 2]
    assert (server.root / "h1" / "collected" / "messages").read_bytes() == b"archived\n"


def test_a_claim_found_gone_stops_the_supervisor_and_nothing_more_is_sent(setup):
    forwarder, server, proc, _logs = setup
    journal(forwarder.spool, 1)
    server.gone = True
    assert forwarder.step() is False  # told to stop; finished once it has
    assert forwarder.spool.read_control() == LOST
    assert server.applied == []
    proc.kill()
    proc.wait()
    assert forwarder.step() is True
    assert forwarder.spool.ended() == LOST
    assert server.ends == []


def test_each_beat_answer_reaches_the_supervisor(setup):
    forwarder, _server, _proc, _logs = setup
    forwarder.told("carry on", 100.0)
    assert forwarder.spool.read_beat() == 100.0
    forwarder.told("stop", 101.0)
    assert forwarder.spool.read_control() == STOP
    assert forwarder.spool.read_beat() == 101.0
    forwarder.told("lost", 102.0)
    assert forwarder.spool.read_control() == LOST
    assert forwarder.lost
    assert forwarder.spool.read_beat() == 101.0


def test_only_the_newest_finished_sets_are_kept(tmp_path):
    for set_id in range(1, 7):
        spool = SetDir.under(ledger.sets_root(tmp_path), set_id)
        spool.write_claim({"set": set_id})
        (tmp_path / "logs" / f"set-{set_id}").mkdir(parents=True)
        if set_id != 2:  # set 2 still runs
            spool.mark_ended("ended")
    assert ledger.prune(tmp_path, keep=2) == [1, 3, 4]
    assert [s.set_id for s in ledger.spools(tmp_path)] == [2, 5, 6]
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["set-2", "set-5", "set-6"]
    assert [s.set_id for s in ledger.unfinished(tmp_path)] == [2]


def test_one_agent_at_a_time_holds_a_data_directory(tmp_path):
    held = ledger.hold(tmp_path)
    try:
        with pytest.raises(ledger.DataDirBusyError, match="another labq agent"):
            ledger.hold(tmp_path)
    finally:
        held.close()
    ledger.hold(tmp_path).close()
