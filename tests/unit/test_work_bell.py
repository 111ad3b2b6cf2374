"""The work bell wakes the waiting claims of the lab whose set started, and no others."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine

from labq.gateway.events import WorkBell


async def _rung(event: asyncio.Event) -> bool:
    await asyncio.sleep(0.05)  # call_soon_threadsafe runs on the loop's next turns
    return event.is_set()


def test_a_ring_for_a_lab_wakes_only_the_claims_of_its_agents() -> None:
    async def scenario() -> None:
        bell = WorkBell()
        with (
            bell.listening(["far"]) as far,
            bell.listening(["near", "other"]) as near,
            bell.listening() as anything,
        ):
            bell.ring("far")
            assert await _rung(far)
            assert not await _rung(near)
            assert await _rung(anything)  # a claim for every lab hears every ring
            thread = threading.Thread(target=bell.ring, args=("other",))  # rung off the loop
            thread.start()
            thread.join()
            assert await _rung(near)
        with bell.listening(["near"]) as later:
            bell.ring()  # no lab named: every waiting claim
            assert await _rung(later)
        bell.ring("far")  # nobody listens: nothing to wake, nothing kept
        with bell.listening(["far"]) as after:
            assert not await _rung(after)

    run_alone(scenario)


def run_alone(scenario: Callable[[], Coroutine[object, object, None]]) -> None:
    """Run a coroutine on a loop of its own thread: a test run before this one in the same
    process (a browser test) may have left an event loop running in the main thread."""
    failed: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(scenario())
        except BaseException as exc:  # handed to the test's thread
            failed.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
