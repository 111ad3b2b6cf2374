"""The scheduling policies labq replaces, implemented from the seeds for comparison.

See docs/simulation.md § Policies for what each one does and why it fails.
"""

from __future__ import annotations

from labq.sim.baselines.base import Baseline
from labq.sim.baselines.beaker_batch import BeakerBatch
from labq.sim.baselines.easy import Easy, EasyIdeal
from labq.sim.baselines.teuthology_dispatcher import TeuthologyDispatcher
from labq.sim.baselines.teuthology_workers import TeuthologyWorkers

# Each is a policy factory (labq.sim.policy.registry says so to mypy): the registry names the
# baselines, so they do not name it back.
BASELINES: dict[str, type[Baseline]] = {
    "teuthology-workers": TeuthologyWorkers,
    "teuthology-dispatcher": TeuthologyDispatcher,
    "beaker-batch": BeakerBatch,
    "easy": Easy,
    "easy-ideal": EasyIdeal,
}
