"""Each scheduler event has one handler, in one table; handlers never reach the loop."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from labq.domain.events import Event
from labq.service.events import ROUTES
from labq.service.inbox import ConsistencyDue, Submissions, SupervisorExited, TimerDue

SERVICE = Path(__file__).parents[2] / "src" / "labq" / "service"


def test_every_event_the_loop_handles_has_a_route() -> None:
    handled = {*get_args(Event), SupervisorExited, ConsistencyDue, TimerDue, Submissions}
    assert set(ROUTES) == handled


def test_no_handler_module_imports_the_loop() -> None:
    for module in ("events.py", "eligibility.py", "reservations.py", "inbox.py", "outcome.py"):
        tree = ast.parse((SERVICE / module).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "labq.service.loop" not in imported, module
