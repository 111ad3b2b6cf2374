"""Test doubles shared by the service and API tests."""

from __future__ import annotations


class RecordingDispatcher:
    """Starts nothing; remembers what it was told (the test plays each supervisor).

    ``claims`` keeps the claim each set was launched under, so a test can report
    the set's end as its supervisor would (``service.post(SupervisorExited(id, code, claim))``).
    """

    def __init__(self) -> None:
        self.started: list[int] = []
        self.stopped: list[int] = []
        self.killed: list[int] = []
        self.claims: dict[int, str] = {}

    def start(self, set_id: int, claim: str) -> None:
        self.started.append(set_id)
        self.claims[set_id] = claim

    def stop(self, set_id: int) -> None:
        self.stopped.append(set_id)

    def kill(self, set_id: int) -> None:
        self.killed.append(set_id)

    def running(self) -> list[int]:
        return []
