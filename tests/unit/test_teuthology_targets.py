"""teuthology's targets, overrides and shared role names (issue 12, items 6-8)."""

import contextlib
import json
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain import requirements
from labq.errors import InputError
from labq.formats.loader import detect_format
from labq.formats.teuthology import parse_teuthology, teuthology_job
from labq.formats.teuthology_merge import MergeError, deep_merge, merge_override

THREE = "roles:\n- [mon.a, osd.0]\n- [mon.b, osd.1]\n- [client.0]\n"


def parse(text: str):
    return parse_teuthology(text, source="job.yaml")


def recipes(text: str):
    (recipe_set,) = parse(text).recipe_sets
    return recipe_set.recipes


def refusal(text: str) -> InputError:
    with pytest.raises(InputError) as caught:
        parse(text)
    assert "\n" not in str(caught.value)
    return caught.value


def config_of(task) -> object:
    """What a task receives: its params, with a nested config decoded."""
    if set(task.params) == {"config"}:
        return json.loads(str(task.params["config"]))
    return dict(task.params)


# --- deep_merge, as teuthology.misc.deep_merge ---------------------------------------


def test_deep_merge_follows_teuthology():
    assert deep_merge(None, {"a": 1}) == {"a": 1}
    assert deep_merge({"a": 1}, None) == {"a": 1}
    assert deep_merge([1, 2], [3]) == [1, 2, 3]
    assert deep_merge({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2], "d": 3}}) == {
        "a": {"b": 1, "c": [1, 2], "d": 3}
    }
    assert deep_merge({"fs": "ext4"}, {"fs": "xfs"}) == {"fs": "xfs"}
    assert deep_merge("x", {"a": 1}) == {"a": 1}  # a scalar is replaced, whatever by


def test_deep_merge_refuses_what_teuthology_asserts_against():
    with pytest.raises(MergeError) as caught:
        deep_merge({"conf": {"osd": [1]}}, {"conf": {"osd": {"x": 1}}})
    assert caught.value.path == ("conf", "osd")
    assert "a list cannot take a mapping" in caught.value.problem
    with pytest.raises(MergeError):
        deep_merge({"a": 1}, 5)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(JSONISH, JSONISH)
def test_deep_merge_never_modifies_its_inputs(a, b):
    before = json.dumps([a, b])
    with contextlib.suppress(MergeError):
        deep_merge(a, b)
    assert json.dumps([a, b]) == before


@given(st.dictionaries(st.text(max_size=2), JSONISH, max_size=4))
def test_merging_nothing_changes_nothing(config):
    assert deep_merge(config, {}) == config
    assert deep_merge(config, None) == config


def test_a_role_list_takes_a_mapping_override_as_teuthology_tasks_do():
    assert merge_override(["client.0"], {"client.0": {"port": 8000}}) == {
        "client.0": {"port": 8000}
    }


# --- overrides merged into tasks ----------------------------------------------------


def test_overrides_are_merged_into_every_task_they_name():
    text = (
        "roles: [[mon.a, client.0]]\n"
        "overrides:\n"
        "  ceph:\n    fs: xfs\n    conf: {osd: {debug osd: 20}}\n"
        "  rgw:\n    client.0: {port: 8000}\n"
        "  workunit: {env: {A: '1'}}\n"  # no workunit task: nothing to merge into
        "tasks:\n"
        "- install:\n"
        "- ceph:\n    fs: ext4\n    conf: {osd: {debug ms: 1}}\n"
        "- rgw: [client.0]\n"
        "- ceph: null\n"
    )
    (recipe,) = recipes(text)
    install, ceph, rgw, ceph_again = recipe.tasks
    assert config_of(install) == {}
    assert config_of(ceph) == {"fs": "xfs", "conf": {"osd": {"debug ms": 1, "debug osd": 20}}}
    assert config_of(rgw) == {"client.0": {"port": 8000}}
    assert config_of(ceph_again) == {"fs": "xfs", "conf": {"osd": {"debug osd": 20}}}


def test_lists_in_overrides_are_appended():
    text = (
        "roles: [[mon.a]]\n"
        "overrides: {ceph: {log-ignorelist: [b]}}\n"
        "tasks:\n- ceph: {log-ignorelist: [a]}\n"
    )
    (recipe,) = recipes(text)
    assert config_of(recipe.tasks[0]) == {"log-ignorelist": ["a", "b"]}


def test_exec_takes_no_overrides_as_in_teuthology():
    text = "roles: [[a]]\noverrides: {exec: {a: [rm -rf /]}}\ntasks:\n- exec: {a: [ls]}\n"
    (recipe,) = recipes(text)
    assert [t.run for t in recipe.tasks] == ["ls"]


def test_empty_overrides_are_no_overrides():
    (recipe,) = recipes("roles: [[a]]\noverrides:\ntasks:\n- install:\n")
    assert recipe.tasks[0].params == {}


def test_an_override_that_cannot_merge_names_both_places():
    error = refusal(
        "roles: [[a]]\ntasks:\n- ceph: {conf: [x]}\noverrides:\n  ceph:\n    conf: {osd: 1}\n"
    )
    assert error.line == 6
    assert error.place == "overrides.ceph.conf"
    assert "cannot be merged into tasks[0].ceph.conf: a list cannot take a mapping" in str(error)


def test_overrides_must_be_a_mapping():
    error = refusal("roles: [[a]]\noverrides: [ceph]\ntasks:\n- ceph:\n")
    assert (error.line, error.place) == (2, "overrides")


# --- targets ---------------------------------------------------------------------------


def test_each_entry_of_roles_is_forced_onto_its_target_in_order():
    text = (
        THREE
        + "machine_type: smithi\n"
        + "targets:\n"
        + "  ubuntu@smithi001.front.sepia.ceph.com: ssh-rsa AAA1\n"
        + "  smithi002.front.sepia.ceph.com: ssh-rsa AAA2\n"
        + "  root@mira003: ssh-ed25519 AAA3\n"
    )
    spec = parse(text)
    mons_a, mons_b, client = spec.recipe_sets[0].recipes
    assert [r.force for r in (mons_a, mons_b, client)] == [
        "smithi001.front.sepia.ceph.com",
        "smithi002.front.sepia.ceph.com",
        "mira003",
    ]
    assert client.metadata["target"] == "root@mira003"
    # teuthology does not lock explicit targets by machine type: a mira target is fine
    assert client.host == requirements.ANY_SYSTEM
    assert spec.metadata["targets"]["root@mira003"] == "ssh-ed25519 AAA3"


def test_extra_targets_are_not_taken():
    text = "roles: [[a]]\ntargets: {h1.lab: k1, h2.lab: k2}\n"
    (recipe,) = recipes(text)
    assert recipe.force == "h1.lab"


def test_targets_without_roles_give_one_recipe_per_target():
    text = "targets: {h1.lab: k1, h2.lab: k2}\ntasks:\n- exec: {all-hosts: [uptime]}\n"
    first, second = recipes(text)
    assert (first.force, first.role, second.force) == ("h1.lab", None, "h2.lab")
    assert [t.run for t in second.tasks] == ["uptime"]


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (THREE + "targets: {h1: k, h2: k}\n", 5, ["3 targets are needed", "2 are given"]),
        ("roles: [[a]]\ntargets: [h1]\n", 2, ["'targets' must be a mapping"]),
        ("roles: [[a]]\ntargets: {}\n", 2, ["'targets' must be a mapping"]),
        ("roles: [[a]]\ntargets: {'ubuntu@': k}\n", 2, ["[user@]host"]),
        ("roles: [[a], [b]]\ntargets:\n  ubuntu@h1: k\n  root@h1: k\n", 4, ["are one host"]),
    ],
)
def test_bad_targets(text, line, words):
    error = refusal(text)
    assert error.line == line
    for word in words:
        assert word in str(error)


# --- one role name on several machines ---------------------------------------------------

PARALLEL = """\
roles:
- [test0, test1]
- [test0, test1]
- [test0]
tasks:
- install:
- parallel_example: [test0, test1]
"""


def test_one_role_name_may_be_on_several_machines():
    first, second, third = recipes(PARALLEL)
    assert [r.role for r in (first, second, third)] == ["test0+test1", "test0+test1", "test0"]
    for recipe in (first, second, third):
        assert [t.name for t in recipe.tasks] == ["install", "parallel_example"]
        assert config_of(recipe.tasks[1]) == ["test0", "test1"]


def test_exec_all_roles_runs_on_every_holder_of_every_role():
    text = PARALLEL + "- exec: {all-roles: [hostname]}\n"
    first, _, third = recipes(text)
    assert [(t.run, t.role) for t in first.tasks[2:]] == [
        ("hostname", "test0"),
        ("hostname", "test1"),
    ]
    assert [(t.run, t.role) for t in third.tasks[2:]] == [("hostname", "test0")]


def test_exec_refuses_a_role_on_several_machines_as_teuthology_would_fail():
    error = refusal(PARALLEL + "- exec:\n    test0: [hostname]\n")
    assert (error.line, error.place) == (9, "tasks[2].exec.test0")
    assert "'test0' is on 3 machines (roles[0], roles[1], roles[2])" in str(error)


def test_a_role_twice_on_one_machine_is_refused():
    error = refusal("roles:\n- [a, b, a]\n")
    assert (error.line, error.place) == (2, "roles[0][2]")
    assert "given twice on one machine" in str(error)


# --- exec steps keep their place among the other tasks --------------------------------------


def test_exec_steps_go_to_their_roles_in_order_with_the_other_tasks():
    text = THREE + (
        "tasks:\n"
        "- install:\n"
        "- exec: {client.0: [one], mon.b: [two]}\n"
        "- ceph:\n"
        "- exec: {mon.a: [three]}\n"
        "- workunit:\n"
    )
    mons_a, mons_b, client = recipes(text)
    assert [t.run or t.name for t in mons_a.tasks] == ["install", "ceph", "three", "workunit"]
    assert [t.run or t.name for t in mons_b.tasks] == ["install", "two", "ceph", "workunit"]
    assert [t.run or t.name for t in client.tasks] == ["install", "one", "ceph", "workunit"]
    # each task's entry of 'tasks': the set runs them step by step across its recipes
    assert mons_a.metadata["task_steps"] == [0, 2, 3, 4]
    assert mons_b.metadata["task_steps"] == [0, 1, 2, 4]
    assert client.metadata["task_steps"] == [0, 1, 2, 4]


# --- fragments and jobs without machines ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "machine_type: vps\n",
        "overrides:\n  cephadm: {osd_method: raw}\n",
        "os_type: centos\nos_version: '9.stream'\n",
    ],
)
def test_a_fragment_is_refused_in_one_line(text):
    error = refusal(text)
    assert error.line == 1
    assert "a fragment, not a whole job" in str(error)


def test_a_job_without_roles_runs_its_tasks_on_one_system_without_a_role():
    assert detect_format("tasks:\n  - nop:\n") == "teuthology"
    (recipe,) = recipes("machine_type: vps\ntasks:\n- nop:\n")
    assert recipe.role is None
    assert [t.name for t in recipe.tasks] == ["nop"]
    assert requirements.matches(recipe.host, {"machine_type": "vps"})


def test_a_merged_mapping_becomes_a_job():
    data = {
        "roles": [["mon.a"], ["client.0"]],
        "overrides": {"ceph": {"fs": "xfs"}},
        "tasks": [{"ceph": None}],
        "targets": {"ubuntu@h1.lab": "k", "ubuntu@h2.lab": "k"},
    }
    spec = teuthology_job(data, source="rados/basic/{a.yaml b.yaml}")
    assert [r.force for r in spec.recipe_sets[0].recipes] == ["h1.lab", "h2.lab"]
    assert config_of(spec.recipe_sets[0].recipes[1].tasks[0]) == {"fs": "xfs"}
    with pytest.raises(InputError) as caught:
        teuthology_job({"roles": "x"}, source="suite/job")
    assert str(caught.value).startswith("suite/job: roles: ")


# --- exec retry / sleep_for_retry -------------------------------------------------------------


def test_exec_retry_tries_each_command_until_it_succeeds(tmp_path):
    counter = tmp_path / "tries"
    # succeeds on its third try; '#' and '&&' survive, the command is one argument
    command = f'echo x >> "{counter}"; [ $(wc -l < "{counter}") -ge 3 ] && true # note'
    text = (
        "roles: [[a]]\ntasks:\n- exec:\n    retry: {tries}\n    sleep_for_retry: 0\n"
        "    timeout: 10\n    a:\n    - '{command}'\n"
    )

    def run_with(tries: int) -> int:
        counter.unlink(missing_ok=True)
        (recipe,) = recipes(text.format(tries=tries, command=command.replace("'", "''")))
        (task,) = recipe.tasks
        assert task.timeout == tries * 10
        return subprocess.run(["/bin/sh", "-c", task.run], check=False).returncode

    assert run_with(3) == 0
    assert counter.read_text().count("x") == 3
    assert run_with(2) == 1
    assert counter.read_text().count("x") == 2


def test_exec_without_retry_runs_the_command_as_written():
    (recipe,) = recipes("roles: [[a]]\ntasks:\n- exec:\n    sleep_for_retry: 5\n    a: [ls -l]\n")
    assert [t.run for t in recipe.tasks] == ["ls -l"]
