"""Which started sets the server's own dispatcher runs, and which wait for a lab agent.

A lab that an unrevoked agent token names is *agent-served* (``docs/operations.md``,
Lab agents): its started sets stay claimed but untaken until an agent claims one
over the API, and the work bell wakes the agents' waiting claims at once. Every
other set goes to the server's own dispatcher, as before agents existed. Either
way the claim is the guard: exactly one taker confirms it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

from sqlalchemy import Engine

from labq.store import reading
from labq.usecases.ports import WorkBell

REFRESH_EVERY: Final = 2.0  # seconds an answer to "which labs have agents" is kept


class LocalDispatcher(Protocol):
    """What the router needs of the server's own dispatcher."""

    def start(self, set_id: int, claim: str) -> object: ...
    def stop(self, set_id: int) -> object: ...
    def kill(self, set_id: int) -> object: ...
    def running(self) -> list[int]: ...


class LabRouter:
    """The scheduler's dispatcher: local sets to ``local``, agent-served ones to the bell."""

    def __init__(
        self,
        local: LocalDispatcher,
        engine: Engine,
        bell: WorkBell,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.local = local
        self.engine = engine
        self.bell = bell
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._labs: frozenset[str] = frozenset()
        self._read_at = float("-inf")

    def agent_labs(self) -> frozenset[str]:
        """The agent-served labs (read again at most every :data:`REFRESH_EVERY` seconds)."""
        with self._lock:
            if self._monotonic() - self._read_at < REFRESH_EVERY:
                return self._labs
        with reading(self.engine) as repo:
            labs = frozenset(repo.agents.agent_labs())
        with self._lock:
            self._labs, self._read_at = labs, self._monotonic()
        return labs

    def start(self, set_id: int, claim: str) -> object:
        """Launch a local supervisor, or ring the bell for the set's lab's agents."""
        agents = self.agent_labs()
        lab = self._lab_of(set_id) if agents else None
        if lab is not None and lab in agents:
            self.bell.ring(lab)
            return None
        return self.local.start(set_id, claim)

    def stop(self, set_id: int) -> object:
        """A local set's supervisor stops; an agent's hears "stop" at its next heartbeat."""
        return self.local.stop(set_id)

    def kill(self, set_id: int) -> object:
        """Only a local supervisor can be killed from here."""
        return self.local.kill(set_id)

    def running(self) -> list[int]:
        """The sets the server's own dispatcher runs."""
        return self.local.running()

    def _lab_of(self, set_id: int) -> str | None:
        with reading(self.engine) as repo:
            return repo.agents.lab_of_set(set_id)
