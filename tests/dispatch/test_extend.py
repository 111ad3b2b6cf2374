"""A heartbeat's answer moves a running set's max_time: the runner keeps to the new deadline."""

import time
from collections import defaultdict

from labq.dispatch.runner import run_set
from labq.domain.states import RecipeState, Result

from .conftest import RecordingReporter, one_recipe, task


class Extending(RecordingReporter):
    """Answers every heartbeat with ``answer`` once ``after`` seconds have passed."""

    def __init__(self, answer, after=0.0):
        super().__init__()
        self.answer = answer
        self.since = time.monotonic() + after

    def heartbeat(self):
        super().heartbeat()
        return self.answer if time.monotonic() >= self.since else None


def run(plan, local, data_dir, reporter):
    return run_set(
        plan, defaultdict(lambda: local), data_dir=data_dir, reporter=reporter, heartbeat_every=0.1
    )


def test_an_extension_heard_in_a_heartbeat_keeps_the_set_past_its_max_time(local, data_dir):
    plan = one_recipe(task(1, "sleep 2.5"), max_time=1)
    reporter = Extending(answer=30.0, after=0.3)  # heard well before the second is up
    started = time.monotonic()
    outcome = run(plan, local, data_dir, reporter)
    assert time.monotonic() - started >= 2.5
    assert outcome.state is RecipeState.COMPLETED
    assert outcome.recipe(1).tasks[0].result is Result.PASS
    assert ("log", "the set's max_time is now 30 s") in reporter.events


def test_without_an_extension_the_same_set_stops_at_its_max_time(local, data_dir):
    plan = one_recipe(task(1, "sleep 2.5"), max_time=1)
    outcome = run(plan, local, data_dir, Extending(answer=None))
    assert outcome.state is RecipeState.ABORTED
    assert outcome.recipe(1).reason == "exceeded max_time of 1 s"


def test_the_stop_names_the_extended_max_time(local, data_dir):
    plan = one_recipe(task(1, "sleep 30"), max_time=1)
    outcome = run(plan, local, data_dir, Extending(answer=2.0))
    assert outcome.recipe(1).reason == "exceeded max_time of 2 s"


def test_a_set_without_max_time_gets_none_from_a_heartbeat(local, data_dir):
    plan = one_recipe(task(1, "sleep 1.5"))
    outcome = run(plan, local, data_dir, Extending(answer=0.5))
    assert outcome.state is RecipeState.COMPLETED
