"""Large job documents are parsed in turn; small ones never wait for them."""

from __future__ import annotations

import threading

from labq.gateway.gate import DocumentGate


def test_a_large_document_waits_for_the_one_being_parsed_and_a_small_one_does_not() -> None:
    gate = DocumentGate(slots=1, large=1000)
    entered = threading.Event()

    def second_large() -> None:
        with gate.turn(5000):
            entered.set()

    with gate.turn(1000):
        with gate.turn(999):  # small: through at once, beside the large one
            pass
        waiting = threading.Thread(target=second_large)
        waiting.start()
        assert not entered.wait(0.3)  # held while the first is parsed
    assert entered.wait(30)  # and let through once it is done
    waiting.join(30)
