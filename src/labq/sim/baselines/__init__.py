"""The scheduling policies labq replaces, implemented from the seeds for comparison.

See docs/simulation.md § Policies for what each one does and why it fails.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labq.sim.baselines.beaker_batch import BeakerBatch
from labq.sim.baselines.easy import Easy
from labq.sim.baselines.teuthology_dispatcher import TeuthologyDispatcher
from labq.sim.baselines.teuthology_workers import TeuthologyWorkers

if TYPE_CHECKING:
    from labq.sim.policy import PolicyFactory

BASELINES: dict[str, PolicyFactory] = {
    "teuthology-workers": TeuthologyWorkers,
    "teuthology-dispatcher": TeuthologyDispatcher,
    "beaker-batch": BeakerBatch,
    "easy": Easy,
}
