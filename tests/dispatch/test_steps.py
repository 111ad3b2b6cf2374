"""A set's tasks numbered with steps run step by step across its recipes (teuthology's order)."""

import threading

from labq.dispatch.plan import RecipePlan, SetPlan
from labq.dispatch.setplans import task_steps
from labq.dispatch.steps import StepGate
from labq.domain.states import RecipeState, Result

from .conftest import system, task
from .test_runner import run


def test_a_step_starts_once_every_recipe_has_finished_the_earlier_ones():
    gate = StepGate({1: [0, 2, None], 2: [1, 1]})
    assert gate.may_start(0)
    assert not gate.may_start(1)
    gate.done(1, 0)
    assert gate.may_start(1)
    assert not gate.may_start(2)
    gate.done(2, 1)
    assert not gate.may_start(2)
    gate.leave(2)  # it runs no more: its last step 1 task is not waited for
    assert gate.may_start(2)


def test_a_held_task_gives_up_when_the_set_stops():
    gate = StepGate({1: [0], 2: [1]})
    stop = threading.Event()
    assert gate.wait(None, stop)  # no step: never held
    stop.set()
    assert not gate.wait(1, stop)


def test_steps_come_from_recipe_metadata_when_they_fit():
    assert task_steps({"task_steps": [0, 1, 1]}, 3) == [0, 1, 1]
    assert task_steps({}, 2) == [None, None]
    assert task_steps({"task_steps": [0, 1]}, 3) == [None] * 3
    assert task_steps({"task_steps": [0, "1"]}, 2) == [None, None]
    assert task_steps({"task_steps": [True, 1]}, 2) == [None, None]


def test_recipes_run_one_ordered_task_list(local, data_dir, reporter, tmp_path):
    order = tmp_path / "order.txt"

    def step(task_id, step, line, first=""):
        return task(task_id, f'{first}echo {line} >> "{order}"', step=step)

    # the server's first step is slow: without steps the client's step 1 would come first
    server = (step(11, 0, "server-0", first="sleep 0.5; "), step(12, 2, "server-2"))
    client = (step(21, 1, "client-1"), step(22, 3, "client-3"), step(23, 3, "client-3b"))
    plan = SetPlan(
        id=7,
        job_id=3,
        recipes=(
            RecipePlan(id=1, role="mon.a", system=system("srv1.test"), tasks=server),
            RecipePlan(id=2, role="client.0", system=system("cli1.test"), tasks=client),
        ),
    )
    outcome = run(plan, local, data_dir, reporter)
    assert (outcome.state, outcome.result) == (RecipeState.COMPLETED, Result.PASS)
    assert order.read_text().split() == [
        "server-0",
        "client-1",
        "server-2",
        "client-3",
        "client-3b",
    ]


def test_a_recipe_that_stops_early_does_not_hold_its_partners(local, data_dir, reporter, tmp_path):
    marker = tmp_path / "ran.txt"
    server = (task(11, "sleep 60", step=0, timeout=1),)  # aborts the set at its timeout
    client = (task(21, f'echo ran > "{marker}"', step=1),)
    plan = SetPlan(
        id=7,
        job_id=3,
        recipes=(
            RecipePlan(id=1, system=system("srv1.test"), tasks=server),
            RecipePlan(id=2, system=system("cli1.test"), tasks=client),
        ),
    )
    outcome = run(plan, local, data_dir, reporter)
    assert outcome.state is RecipeState.ABORTED
    assert not marker.exists()  # held behind step 0, then stopped with the set
