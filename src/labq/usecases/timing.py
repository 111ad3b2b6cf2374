"""How long the scheduler service takes over each event, for ``/metrics``.

One histogram for the process, kept out of prometheus_client's global registry:
``labq.api.metrics`` collects it into its own. It lives below both the scheduler service
(which observes it) and the API (which must not import the service). Only a process that
schedules (the leader) observes anything; a standby's histogram stays empty.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Histogram

# Decisions take milliseconds; a consistency pass over a big lab may take seconds.
BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

DECISION_SECONDS: Final = Histogram(
    "labq_scheduling_decision_seconds",
    "Seconds the scheduler service spent on one event: the core's decisions and their commit.",
    ["event"],
    buckets=BUCKETS,
    registry=None,
)
