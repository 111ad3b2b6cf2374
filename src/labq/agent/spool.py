"""A claimed set's directory on the agent host: how an agent and its supervisor talk.

    <agent data dir>/sets/set-<id>/
        claim.json     what the server gave (claim, lab, plan, env); mode 0600
        settings.json  the agent's settings for the supervisor (no database URL)
        pid            the supervisor's pid, for a restarted agent to adopt it
        journal.jsonl  the supervisor's reports, one JSON object a line, numbered by ``seq``
        control        the agent's word to the supervisor: ``stop`` or ``lost``
        beat           when the agent last had a heartbeat of the set confirmed
        exit           the supervisor's exit status, written as it ends
        ended          the server heard the end (or the set was lost): nothing left to send

The supervisor only appends to the journal and writes ``exit``; the agent only
reads them, and writes ``control`` and ``beat`` (each replaced whole, by rename).
Files on a local disk outlive either process, so an agent that restarts picks
up where it was, and a supervisor whose agent is gone stops by itself once
``beat`` is older than the lease (:class:`SpoolReporter`).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from labq.domain.states import RecipeState, Result
from labq.errors import LabqError

STOP: Final = "stop"
LOST: Final = "lost"
_PREFIX: Final = "set-"


class Fenced(LabqError):  # noqa: N818 - the name says what happened
    """The set's heartbeat has not been confirmed for the lease: its tasks must stop."""


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace ``path`` with ``text`` whole: a reader sees the old file or the new one.

    Writers at once (the agent and the supervisor it forked both record the supervisor's
    pid) each write a file of their own: with one shared name, one's rename took the
    other's file away under it, and the supervisor died before it ran the set."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)


@dataclass(frozen=True)
class SetDir:
    """One claimed set's directory (see the module docstring)."""

    path: Path

    @staticmethod
    def under(root: Path, set_id: int) -> SetDir:
        """``<root>/set-<id>``."""
        return SetDir(root / f"{_PREFIX}{set_id}")

    @property
    def set_id(self) -> int:
        """The set's id, from the directory's name."""
        return int(self.path.name.removeprefix(_PREFIX))

    @staticmethod
    def is_one(path: Path) -> bool:
        """Whether ``path`` is named as a set directory is."""
        rest = path.name.removeprefix(_PREFIX)
        return path.name.startswith(_PREFIX) and rest.isdigit()

    @property
    def journal(self) -> Path:
        """The supervisor's numbered reports."""
        return self.path / "journal.jsonl"

    @property
    def claim_file(self) -> Path:
        """What the server gave for the set."""
        return self.path / "claim.json"

    @property
    def settings_file(self) -> Path:
        """The settings the supervisor runs with."""
        return self.path / "settings.json"

    # -- small files --------------------------------------------------------------------

    def write_claim(self, work: dict[str, Any]) -> None:
        """Record the claim answer's entry (it holds secrets: mode 0600)."""
        self.path.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.claim_file, json.dumps(work))

    def read_claim(self) -> dict[str, Any] | None:
        """The recorded claim answer; None when there is none (or it is unreadable)."""
        data = self._read_json(self.claim_file)
        return data if isinstance(data, dict) else None

    def write_pid(self, pid: int) -> None:
        """Record the supervisor's pid."""
        write_atomic(self.path / "pid", str(pid))

    def read_pid(self) -> int | None:
        """The recorded supervisor pid."""
        return _int(self._read(self.path / "pid"))

    def write_beat(self, when: float) -> None:
        """The set's heartbeat was confirmed (``time.monotonic()`` when the beat was sent)."""
        write_atomic(self.path / "beat", repr(when))

    def read_beat(self) -> float | None:
        """When the set's heartbeat was last confirmed; None when never."""
        text = self._read(self.path / "beat")
        try:
            return None if text is None else float(text)
        except ValueError:
            return None

    def write_max_time(self, seconds: float) -> None:
        """The set's max_time as the server last said it (``labq job extend`` moves it)."""
        write_atomic(self.path / "max_time", repr(seconds))

    def read_max_time(self) -> float | None:
        """The set's max_time as the server last said it; None when it said nothing."""
        text = self._read(self.path / "max_time")
        try:
            return None if text is None else float(text)
        except ValueError:
            return None

    def write_control(self, word: str) -> None:
        """Tell the supervisor to ``stop`` (a cancel) or that the set is ``lost``."""
        if word not in (STOP, LOST):
            raise ValueError(f"not a control word: {word!r}")
        if self.read_control() == LOST:
            return  # lost is final
        write_atomic(self.path / "control", word)

    def read_control(self) -> str | None:
        """The agent's last word; None when it said nothing."""
        text = self._read(self.path / "control")
        return text if text in (STOP, LOST) else None

    def write_exit(self, code: int) -> None:
        """The supervisor's exit status."""
        write_atomic(self.path / "exit", str(code))

    def read_exit(self) -> int | None:
        """The supervisor's exit status; None while it runs, or when it was killed."""
        return _int(self._read(self.path / "exit"))

    def mark_ended(self, how: str) -> None:
        """Nothing more is to be sent for this set (``ended``, or ``lost``)."""
        write_atomic(self.path / "ended", how)

    def ended(self) -> str | None:
        """How the set was finished with; None while there is still something to send."""
        return self._read(self.path / "ended")

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            return path.read_text().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _read_json(self, path: Path) -> object:
        text = self._read(path)
        try:
            return None if text is None else json.loads(text)
        except ValueError:
            return None


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


# --- the supervisor's side: a reporter that writes the journal ---------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat()


class SpoolReporter:
    """A :class:`~labq.dispatch.results.Reporter` that appends each report to the journal.

    Each report is one line with the next ``seq``, flushed before the call
    returns, so the agent can send it (again, after a failure: the server applies
    each number once). ``heartbeat`` reads the agent's ``control`` word — ``stop``
    sets ``cancel``, ``lost`` sets ``lost`` and ``cancel`` — and the ``beat``
    file: when no heartbeat was confirmed for ``lease`` seconds the set is
    fenced (``lost`` and ``cancel``), so its tasks end before the server may give
    the systems to another set. Task log paths are written relative to
    ``log_root``, the set's log directory.
    """

    def __init__(
        self,
        spool: SetDir,
        *,
        log_root: Path,
        lease: float,
        cancel: threading.Event,
        lost: threading.Event,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spool = spool
        self.log_root = log_root
        self.lease = lease
        self.cancel = cancel
        self.lost = lost
        self.monotonic = monotonic
        self._started = monotonic()
        self._lock = threading.Lock()
        self.seq = last_seq(spool.journal)

    def _append(self, event: dict[str, Any]) -> None:
        with self._lock:
            if self.lost.is_set():
                return  # the set is not ours: the server takes nothing more
            self.seq += 1
            line = json.dumps({"seq": self.seq, **event, "at": _now()})
            with self.spool.journal.open("a", encoding="utf-8") as journal:  # flushed on close
                journal.write(line + "\n")

    def recipe_state(self, recipe_id: int, state: RecipeState, reason: str | None = None) -> None:
        """Journal a recipe's move."""
        self._append(
            {"kind": "recipe", "recipe": recipe_id, "state": state.value, "reason": reason}
        )

    def task_started(self, task_id: int) -> None:
        """Journal that a task began."""
        self._append({"kind": "task_started", "task": task_id})

    def task_finished(
        self, task_id: int, exit_code: int | None, result: Result, log_path: Path, message: str
    ) -> None:
        """Journal how a task ended, its log named relative to the set's log directory."""
        try:
            log = log_path.relative_to(self.log_root).as_posix()
        except ValueError:
            log = log_path.name
        self._append(
            {
                "kind": "task_finished",
                "task": task_id,
                "exit_code": exit_code,
                "result": result.value,
                "log": log,
                "message": message,
            }
        )

    def heartbeat(self) -> float | None:
        """Heed the agent's word and the lease; raises :class:`Fenced` once, when fenced.
        Answers the set's max_time as the server last said it (an extension moves it)."""
        if self.lost.is_set():
            return None
        word = self.spool.read_control()
        if word == LOST:
            self._lose()
            return None
        if word == STOP:
            self.cancel.set()
        confirmed = self.spool.read_beat()
        since = self.monotonic() - max(confirmed or self._started, self._started)
        if since > self.lease:
            self._lose()
            raise Fenced(
                f"no heartbeat confirmed by the server for {since:.1f} s "
                f"(lease {self.lease:g} s): the set's tasks stop"
            )
        return self.spool.read_max_time()

    def _lose(self) -> None:
        self.lost.set()
        self.cancel.set()

    def log(self, message: str) -> None:
        """Nothing to journal: the runner wrote it to ``supervisor.log``, which is uploaded."""


def last_seq(journal: Path) -> int:
    """The number of the last complete report in a journal (0 for none)."""
    events, _ = read_events(journal, 0)
    return int(events[-1]["seq"]) if events else 0


# --- the agent's side: reading the journal ---------------------------------------------


def read_events(journal: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines after byte ``offset``, decoded, and the offset after them.

    A last line without its newline is being written (or its writer died in the
    middle of it): it is left for later.
    """
    try:
        with journal.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    events = []
    for raw in data[:end].splitlines():
        if raw.strip():
            event = json.loads(raw)
            if isinstance(event, dict) and isinstance(event.get("seq"), int):
                events.append(event)
    return events, offset + end
