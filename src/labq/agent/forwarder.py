"""What an agent does for one claimed set while (and after) its supervisor runs.

Each :meth:`Forwarder.step` sends the log files' new bytes
(:class:`~labq.agent.uploader.LogUploader`), then the journal's new reports
(numbered: the server answers the last number it applied, so a report sent
again after a lost answer applies once, and one the answer did not cover is
sent again) — all but the recipes' final moves, which wait for the supervisor's
exit and the last of its logs. Once the supervisor has exited — seen *before*
the journal is read, so that everything it wrote is sent — and every report and
log got through, it says ``ended``. A claim found gone (the server ended the
set, or a beat said ``lost``) tells the supervisor to stop at once, and nothing
more is sent.

A network failure raises :class:`~labq.agent.link.Unreachable` out of
:meth:`~Forwarder.step`; the next step goes on from where this one got.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from labq.agent.launcher import Supervisor
from labq.agent.link import ClaimGone, Link
from labq.agent.spool import LOST, STOP, SetDir, read_events
from labq.agent.uploader import LogUploader
from labq.dispatch import containment
from labq.domain.states import RecipeState

BATCH: Final = 500  # reports in one call (the server takes up to 1000)
CARRY_ON: Final = "carry on"
_FINAL: Final = frozenset(s.value for s in RecipeState if s.is_final)


class Forwarder:
    """Forwards one set's reports and logs, and its end, to the server."""

    def __init__(
        self, link: Link, spool: SetDir, claim: str, log_root: Path, supervisor: Supervisor
    ) -> None:
        self.link = link
        self.spool = spool
        self.set_id = spool.set_id
        self.claim = claim
        self.supervisor = supervisor
        self.offset = 0  # in the journal, after the last report read
        self.pending: list[dict[str, Any]] = []  # read, not yet known applied
        self.uploader = LogUploader(log_root, self._put)
        self.lost = spool.read_control() == LOST
        self.finished = spool.ended() is not None
        self._reaped = False

    def _put(self, rel: str, offset: int, chunk: bytes) -> int:
        return self.link.put_log(self.set_id, self.claim, rel, offset, chunk)

    @property
    def running(self) -> bool:
        """Whether its supervisor still runs."""
        return self.supervisor.alive()

    def told(self, word: str, sent_at: float, max_time: float | None = None) -> None:
        """A beat sent at ``sent_at`` (``time.monotonic()``) was answered ``word`` for the set,
        and the set's ``max_time`` as it stands now (an extension moves it)."""
        if word == LOST:
            self.lose()
            return
        if word == STOP:
            self.spool.write_control(STOP)
        if word in (CARRY_ON, STOP):
            if max_time is not None:
                self.spool.write_max_time(max_time)
            self.spool.write_beat(sent_at)

    def lose(self) -> None:
        """The set is not ours any more: its supervisor stops at once, nothing more is sent."""
        self.lost = True
        self.spool.write_control(LOST)

    def step(self) -> bool:
        """Send what is new; True once the set is finished with (ended or lost, and its
        supervisor and everything it ran gone)."""
        if self.finished:
            return True
        exited = not self.supervisor.alive()
        if exited and not self._reaped:
            # in group mode, whatever its tasks left behind dies before the server hears the end
            containment.reap(containment.run_mark(self.claim))
            self._reaped = True
        if not self.lost:
            try:
                if self._send(exited):
                    self.link.ended(self.set_id, self.claim, self.supervisor.code())
                    return self._finish("ended")
            except ClaimGone:
                self.lose()
        if self.lost and exited:
            return self._finish(LOST)
        return False

    def _send(self, exited: bool) -> bool:
        """Send new log bytes, then the reports they precede; True when everything, to the
        end, got through."""
        events, self.offset = read_events(self.spool.journal, self.offset)
        self.pending.extend(events)
        # logs read after the reports: a task's log is whole on the server before its end is
        whole = self.uploader.upload(final=exited)
        ready = self.pending if exited and whole else _before_the_end(self.pending)
        while ready:
            applied = self.link.report(self.set_id, self.claim, ready[:BATCH])
            left = [e for e in ready if int(e["seq"]) > applied]
            if len(left) == len(ready):
                break  # the server took none: a gap it waits to see filled (try again later)
            ready = left
            self.pending = [e for e in self.pending if int(e["seq"]) > applied]
        return exited and whole and not self.pending

    def _finish(self, how: str) -> bool:
        self.spool.mark_ended(how)
        self.finished = True
        return True


def _before_the_end(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reports before the first final recipe move. The runner makes those last, after
    archiving; they wait until the supervisor has exited and every log (``collected/`` ones
    too) is on the server, so whoever sees the job end finds its logs whole."""
    for n, event in enumerate(events):
        if event.get("kind") == "recipe" and event.get("state") in _FINAL:
            return events[:n]
    return events
