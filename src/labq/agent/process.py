"""``labq agent``: the long-running process beside a lab (:func:`run`).

It says hello, takes back the sets its data directory records (adopting the
supervisors still running, finishing up for the others), then runs three loops
until SIGTERM or SIGINT:

- **claim** (a thread): a long poll for up to as many sets as it has free
  slots; each set it gets is recorded in its spool and its supervisor started;
- **beat** (a thread): one call every ``heartbeat_every`` for the agent and
  every set it has not finished with; each set's answer goes to its spool
  (``beat``, or ``control``), where the supervisor reads it;
- **forward** (the main thread): each set's new reports and log bytes, and its
  end (:class:`~labq.agent.forwarder.Forwarder`); a finished set's local copy
  is kept for the newest ``keep_sets`` sets only.

Stopping leaves the supervisors running: a restarted agent adopts them (a
restart within the lease loses nothing). Network failures are retried, with
backoff, and said once per outage; an unknown or revoked token ends the agent
with that one line. The agent never sees the database URL: the server
is HTTP only.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any, Final

import platformdirs

from labq import __version__
from labq.agent import ledger
from labq.agent.forwarder import Forwarder
from labq.agent.launcher import SUPERVISOR_OUTPUT, Launcher, Supervisor
from labq.agent.link import Link, LinkError, TokenRefused, Unreachable, retrying
from labq.agent.spool import SetDir, write_atomic
from labq.config import Settings, load_settings
from labq.dispatch import containment
from labq.dispatch.logs import set_log_dir
from labq.errors import LabqError

DEFAULT_MAX_SETS: Final = 20
DEFAULT_KEEP_SETS: Final = 50
CLAIM_WAIT: Final = 5.0  # seconds a claim waits for work (a stop waits for one to return)
STEP_EVERY: Final = 0.25  # seconds between forwarding rounds
BACKOFF: Final = (0.5, 10.0)  # first and longest wait after a network failure


def default_data_dir() -> Path:
    """Where an agent keeps its sets when not told: the user's data directory."""
    return Path(platformdirs.user_data_dir("labq-agent"))


def say(message: str) -> None:
    """One line on standard error, with the time."""
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{when} labq agent: {message}", file=sys.stderr, flush=True)


def run(
    *,
    url: str,
    token: str,
    labs: Sequence[str] = (),
    name: str | None = None,
    data_dir: str | None = None,
    max_sets: int | None = None,
    config: str | None = None,
    keep_sets: int | None = None,
) -> int:
    """Run the agent until SIGTERM or SIGINT; the exit status (1 with a one-line reason)."""
    stop = threading.Event()
    with _stopped_by_signals(stop):
        try:
            agent = Agent(
                Link(url, token),
                token,
                load_settings(config),
                Path(data_dir) if data_dir else default_data_dir(),
                max_sets=DEFAULT_MAX_SETS if max_sets is None else max_sets,
                keep_sets=DEFAULT_KEEP_SETS if keep_sets is None else keep_sets,
                stop=stop,
            )
            return agent.serve(labs=tuple(labs), name=name)
        except LabqError as exc:
            print(f"labq agent: {exc}", file=sys.stderr)
            return 1
        except Exception as exc:  # never a traceback: one line, and systemd starts us again
            print(f"labq agent: unexpected error: {exc!r}", file=sys.stderr)
            return 1


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)


class Agent:
    """One agent: its link to the server, its settings, its data directory and its sets."""

    def __init__(
        self,
        link: Link,
        token: str,
        settings: Settings,
        data_dir: Path,
        *,
        max_sets: int,
        keep_sets: int,
        stop: threading.Event,
    ) -> None:
        self.link = link
        self.token = token
        self.settings = settings
        self.data_dir = data_dir
        self.max_sets = max_sets
        self.keep_sets = keep_sets
        self.stop = stop
        self.launcher = Launcher(data_dir, containment.available_mode())
        self.heartbeat_every = 5.0
        self.lease = 30.0
        self.fatal: LabqError | None = None
        self.labs: list[str] | None = None  # claimed for only these (--lab), else all the token's
        self._sets: dict[int, Forwarder] = {}
        self._lock = threading.Lock()
        self._slot = threading.Event()  # a set finished: the claimer may take another
        self._outage = False

    # -- the whole run -----------------------------------------------------------------

    def serve(self, *, labs: tuple[str, ...], name: str | None) -> int:
        """Hello, adopt, then claim, beat and forward until stopped; the exit status."""
        with ledger.hold(self.data_dir):
            self._hello(labs, name)
            self.launcher.warm()
            self._adopt()
            threads = [
                threading.Thread(target=self._guard, args=(loop,), name=loop.__name__, daemon=True)
                for loop in (self._claim_loop, self._beat_loop)
            ]
            for thread in threads:
                thread.start()
            self._forward_loop()
            self.stop.set()
            for thread in threads:  # a claim under way is waited for: its sets get started
                thread.join(CLAIM_WAIT + 30)
            self.launcher.close()
        self.link.close()
        if self.fatal is not None:
            raise self.fatal
        say("stopped; supervisors still running are adopted by the next start")
        return 0

    def _guard(self, loop: Callable[[], None]) -> None:
        """Run a loop; an unknown or revoked token (or anything unforeseen) stops the agent."""
        try:
            loop()
        except Exception as exc:
            self._die(exc if isinstance(exc, LabqError) else LabqError(f"{loop.__name__}: {exc!r}"))

    def _die(self, exc: LabqError) -> None:
        self.fatal = exc
        self.stop.set()

    def _hello(self, labs: tuple[str, ...], name: str | None) -> None:
        host = socket.gethostname()
        answer = retrying(
            lambda: self.link.hello(version=__version__, host=host, max_sets=self.max_sets),
            stop=self.stop,
            on_failure=self._trouble,
            first=BACKOFF[0],
            most=BACKOFF[1],
        )
        self._clear()
        served = [str(lab) for lab in answer["labs"]]
        if name is not None and name != answer["name"]:
            raise LabqError(f"the agent token is {answer['name']}'s, not {name}'s")
        unknown = sorted(set(labs) - set(served))
        if unknown:
            raise LabqError(
                f"the agent token does not serve lab(s) {', '.join(unknown)} "
                f"(it serves {', '.join(served) or 'none'})"
            )
        if labs and set(labs) != set(served):
            self.labs = sorted(set(labs))
            served = self.labs
        self.heartbeat_every = float(answer["heartbeat_every"])
        self.lease = float(answer["lease"])
        say(
            f"{answer['name']} serves {', '.join(served) or 'no lab'} from {self.data_dir} "
            f"(up to {self.max_sets} sets; heartbeat every {self.heartbeat_every:g} s, "
            f"lease {self.lease:g} s)"
        )

    def _adopt(self) -> None:
        for spool in ledger.unfinished(self.data_dir):
            work = spool.read_claim()
            if work is None:  # stopped before its claim was written down: nothing ran
                spool.mark_ended("unrecorded")
                continue
            supervisor = Supervisor.adopt(spool)
            state = "running" if supervisor.alive() else "exited"
            say(f"set {spool.set_id}: adopted (its supervisor {state})")
            self._track(spool, str(work["claim"]), supervisor)

    def _track(self, spool: SetDir, claim: str, supervisor: Supervisor) -> None:
        log_root = set_log_dir(self.data_dir, spool.set_id)
        forwarder = Forwarder(self.link, spool, claim, log_root, supervisor)
        with self._lock:
            self._sets[spool.set_id] = forwarder

    def _snapshot(self) -> list[Forwarder]:
        with self._lock:
            return list(self._sets.values())

    # -- network trouble, said once per outage -------------------------------------------

    def _trouble(self, exc: LinkError) -> None:
        if not self._outage:
            self._outage = True
            say(f"{exc}; retrying")

    def _clear(self) -> None:
        if self._outage:
            self._outage = False
            say("the server answers again")

    # -- claim ---------------------------------------------------------------------------

    def _claim_loop(self) -> None:
        delay = BACKOFF[0]
        while not self.stop.is_set():
            free = self.max_sets - sum(1 for f in self._snapshot() if f.running)
            if free <= 0:
                self._slot.wait(1.0)
                self._slot.clear()
                continue
            sent = time.monotonic()
            try:
                works = self.link.claim(free, CLAIM_WAIT, self.labs)
            except Unreachable as exc:
                self._trouble(exc)
                self.stop.wait(delay)
                delay = min(delay * 2, BACKOFF[1])
                continue
            delay = BACKOFF[0]
            self._clear()
            for work in works:  # also once stopped: these sets are ours now
                self._start(work, sent)

    def _start(self, work: dict[str, Any], sent: float) -> None:
        """Record a claimed set and start its supervisor (the claim counts as a beat)."""
        set_id, claim = int(work["set"]), str(work["claim"])
        spool = SetDir.under(ledger.sets_root(self.data_dir), set_id)
        spool.write_claim(work)
        write_atomic(spool.settings_file, self.settings.model_dump_json(exclude={"database"}))
        spool.write_beat(sent)
        secrets = {
            "claim": claim,
            "plan": work["plan"],
            "env": work.get("env") or {},
            "url": self.link.url,
            "token": self.token,
            "lease": self.lease,
            "heartbeat_every": self.heartbeat_every,
            "settings": str(spool.settings_file),
            "data_dir": str(self.data_dir),
        }
        log = set_log_dir(self.data_dir, set_id) / SUPERVISOR_OUTPUT
        try:
            supervisor = self.launcher.start(spool, secrets, log=log)
        except OSError as exc:  # the server ends it (aborted) when it hears the end
            say(f"set {set_id}: cannot start its supervisor: {exc}")
            supervisor = Supervisor(spool, None, None)
        say(f"set {set_id} ({work.get('lab')}): claimed, supervisor {supervisor.pid}")
        self._track(spool, claim, supervisor)

    # -- beat ----------------------------------------------------------------------------

    def _beat_loop(self) -> None:
        # the first at once: adopted supervisors have gone without one since the agent stopped
        while True:
            self._beat()
            if self.stop.wait(self.heartbeat_every):
                return

    def _beat(self) -> None:
        """One beat for the agent and every set it has not finished with."""
        sets = [f for f in self._snapshot() if not f.finished and not f.lost]
        sent = time.monotonic()
        running = sum(1 for f in sets if f.running)
        try:
            answer, deadlines = self.link.beat([(f.set_id, f.claim) for f in sets], running)
        except Unreachable as exc:
            self._trouble(exc)
            return
        self._clear()
        for forwarder in sets:
            word = answer.get(forwarder.set_id)
            if word is not None:
                forwarder.told(word, sent, deadlines.get(forwarder.set_id))

    # -- forward -------------------------------------------------------------------------

    def _forward_loop(self) -> None:
        delay = STEP_EVERY
        while not self.stop.wait(delay):
            delay = STEP_EVERY
            for forwarder in self._snapshot():
                try:
                    if forwarder.step():
                        self._finished(forwarder)
                except Unreachable as exc:
                    self._trouble(exc)
                    delay = BACKOFF[0]
                    break
                except TokenRefused as exc:
                    self._die(exc)
                    return
                except Exception as exc:  # a refusal, a full disk: said, tried again later
                    say(f"set {forwarder.set_id}: {exc}")
                    delay = BACKOFF[1]

    def _finished(self, forwarder: Forwarder) -> None:
        with self._lock:
            self._sets.pop(forwarder.set_id, None)
        how = "lost (the server ended it)" if forwarder.lost else "ended, everything sent"
        say(f"set {forwarder.set_id}: {how}")
        self._slot.set()
        ledger.prune(self.data_dir, self.keep_sets)
