import pytest

from labq.dispatch.environment import check_plan, role_members, role_variable, task_environment
from labq.dispatch.plan import PlanError, RecipePlan, SetPlan

from .conftest import system, task


@pytest.mark.parametrize(
    ("role", "variable"),
    [("servers", "SERVERS"), ("client.0", "CLIENT_0"), ("mon-a b", "MON_A_B"), ("0th", "_0TH")],
)
def test_role_variables_are_upper_case_identifiers(role, variable):
    assert role_variable(role) == variable


def test_task_roles_add_the_system_to_that_role():
    a = RecipePlan(id=1, role="server", system=system("a.test"), tasks=(task(1, "x", role="mon"),))
    b = RecipePlan(id=2, role="server", system=system("b.test"), tasks=(task(2, "x"),))
    plan = SetPlan(id=1, job_id=1, recipes=(a, b), ref_repo="r", ref_commit="c" * 40)
    assert role_members(plan) == {"SERVER": ["a.test", "b.test"], "MON": ["a.test"]}
    env = task_environment(plan, a, a.tasks[0])
    assert env["LABQ_ROLE"] == "mon"
    assert env["LABQ_ROLES"] == "SERVER MON"
    assert env["SERVER"] == "a.test b.test"
    assert env["LABQ_REF_COMMIT"] == "c" * 40


@pytest.mark.parametrize("role", ["path", "ld.preload", "labq-fqdn"])
def test_roles_that_would_override_reserved_variables_are_refused(role):
    recipe = RecipePlan(id=1, role=role, system=system("a.test"))
    with pytest.raises(PlanError, match="role variable"):
        check_plan(SetPlan(id=1, job_id=1, recipes=(recipe,)))


def test_a_parameter_may_not_replace_a_role_variable_or_an_extra_variable():
    recipe = RecipePlan(
        id=1, role="servers", system=system("a.test"), tasks=(task(1, "x", params={"SERVERS": 1}),)
    )
    with pytest.raises(PlanError, match="parameter 'SERVERS' would override a variable"):
        check_plan(SetPlan(id=1, job_id=1, recipes=(recipe,)))
    recipe = RecipePlan(id=1, system=system("a.test"), tasks=(task(1, "x", params={"TOKEN": 1}),))
    with pytest.raises(PlanError, match="parameter 'TOKEN'"):
        check_plan(SetPlan(id=1, job_id=1, recipes=(recipe,), env={"TOKEN": "t"}))


@pytest.mark.parametrize("name", ["PATH", "LD_LIBRARY_PATH", "LABQ_FQDN", "1X"])
def test_extra_variables_are_checked_too(name):
    recipe = RecipePlan(id=1, system=system("a.test"))
    with pytest.raises(PlanError, match="extra variable"):
        check_plan(SetPlan(id=1, job_id=1, recipes=(recipe,), env={name: "v"}))


def test_parameter_values_become_text():
    recipe = RecipePlan(
        id=1, system=system("a.test"), tasks=(task(1, "x", params={"A": True, "B": 2, "C": 1.5}),)
    )
    env = task_environment(SetPlan(id=1, job_id=1, recipes=(recipe,)), recipe, recipe.tasks[0])
    assert (env["A"], env["B"], env["C"]) == ("true", "2", "1.5")
