import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from labq.domain import requirements
from labq.domain.job import JobSpec
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats.loader import detect_format, load_job
from labq.formats.teuthology import parse_teuthology, priority_level

EXAMPLES = Path(__file__).parents[2] / "src" / "labq" / "examples"
DATA = Path(__file__).parents[1] / "data" / "teuthology"


def parse(text: str) -> JobSpec:
    return parse_teuthology(text, source="job.yaml")


def box(machine_type: str) -> System:
    return System(fqdn=f"{machine_type}001", lab="sepia", attributes={"machine_type": machine_type})


# --- the bundled example -------------------------------------------------------


def test_bundled_example_reads_into_one_gang():
    spec = load_job(EXAMPLES / "teuthology.yaml")
    assert spec.owner == "scheduled_qa@teuthology"
    assert spec.whiteboard.startswith("rados/basic/")
    (rs,) = spec.recipe_sets
    assert rs.priority is Priority.HIGH  # 75
    assert rs.max_time == 10800
    assert [r.role for r in rs.recipes] == [
        "mon.a+mgr.x+osd.0+osd.1",
        "mon.b+mgr.y+osd.2+osd.3",
        "client.0",
    ]
    assert rs.recipes[2].metadata == {
        "roles": ["client.0"],
        "task_steps": [0, 1, 2, 2, 3, 4],
        "distro_requires": {"os_type": "centos", "os_version": "9.stream"},
    }
    for recipe in rs.recipes:
        assert requirements.matches(recipe.host, box("smithi").facts())
        assert not requirements.matches(recipe.host, box("mira").facts())
    assert spec.ref is not None
    assert spec.ref.repo == "https://github.com/ceph/ceph.git"
    assert spec.ref.branch == "main"
    assert spec.ref.commit == "5e2d4f6b0c8a9e1d3f7b2a4c6e8d0f1a3b5c7d9e"
    assert spec.metadata["os_type"] == "centos"
    assert spec.metadata["nuke-on-error"] is True
    assert spec.metadata["overrides"]["ceph"]["conf"]["osd"]


def test_bundled_example_tasks_land_on_the_recipes_holding_their_roles():
    mons, _, client = load_job(EXAMPLES / "teuthology.yaml").recipe_sets[0].recipes
    assert [t.name for t in mons.tasks] == ["install", "ceph", "workunit", "exec"]
    assert [(t.name, t.run, t.role, t.timeout) for t in client.tasks] == [
        ("install", None, None, None),
        ("ceph", None, None, None),
        ("exec", "ceph osd pool create rbd 8", "client.0", 600),
        ("exec", "rbd pool init rbd", "client.0", 600),
        ("workunit", None, None, None),
        ("exec", "sudo journalctl -b --no-pager | tail -n 100", None, None),
    ]
    # the job's overrides for ceph are merged into the ceph task's own config
    assert json.loads(str(client.tasks[1].params["config"])) == {
        "wait-for-scrub": False,
        "conf": {"osd": {"osd debug reject backfill probability": 0.3}},
        "log-ignorelist": ["\\(POOL_APP_NOT_ENABLED\\)"],
    }
    assert json.loads(str(client.tasks[4].params["config"])) == {
        "clients": {"client.0": ["rados/test.sh"]}
    }


def test_canonical_form_round_trips():
    spec = load_job(EXAMPLES / "teuthology.yaml")
    assert JobSpec.model_validate(spec.canonical()) == spec
    assert JobSpec.model_validate(json.loads(json.dumps(spec.canonical()))) == spec


def test_teuthology_yaml_is_detected():
    assert detect_format((EXAMPLES / "teuthology.yaml").read_text()) == "teuthology"


# --- priorities ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "level"),
    [
        (1, Priority.URGENT),
        (49, Priority.URGENT),
        (50, Priority.HIGH),
        (99, Priority.HIGH),
        (100, Priority.NORMAL),
        (199, Priority.NORMAL),
        (200, Priority.MEDIUM),
        (499, Priority.MEDIUM),
        (500, Priority.LOW),
        (1000, Priority.LOW),  # teuthology-suite's default
        (10**9, Priority.LOW),
    ],
)
def test_priority_bands(number, level):
    assert priority_level(number) is level
    assert parse(f"roles: [[a]]\npriority: {number}\n").recipe_sets[0].priority is level


def test_no_priority_is_labq_normal():
    assert parse("roles: [[a]]\n").recipe_sets[0].priority is Priority.NORMAL


@given(st.integers(1, 5000), st.integers(1, 5000))
def test_lower_number_is_never_a_lower_level(a, b):
    if a <= b:
        assert priority_level(a) >= priority_level(b)


# --- roles, machines, tasks ------------------------------------------------------


def test_comma_separated_machine_types_mean_any_of_them():
    (recipe,) = parse("roles: [[a]]\nmachine_type: 'smithi, mira'\n").recipe_sets[0].recipes
    assert requirements.matches(recipe.host, box("smithi").facts())
    assert requirements.matches(recipe.host, box("mira").facts())
    assert not requirements.matches(recipe.host, box("vps").facts())
    spec = parse("roles: [[a]]\nmachine_type: 'smithi, mira'\n")
    assert JobSpec.model_validate(spec.canonical()) == spec


def test_without_machine_type_any_system_will_do():
    (recipe,) = parse("roles: [[a]]\n").recipe_sets[0].recipes
    assert recipe.host == requirements.ANY_SYSTEM


def test_exec_all_runs_once_per_role_and_all_hosts_once_per_recipe():
    text = """roles: [[mon.a, osd.0], [client.0]]
tasks:
- exec:
    all: ["hostname"]
- sh:
    all-hosts: ["uptime"]
    osd.0: ["true"]
"""
    first, second = parse(text).recipe_sets[0].recipes
    assert [(t.name, t.run, t.role) for t in first.tasks] == [
        ("exec", "hostname", "mon.a"),
        ("exec", "hostname", "osd.0"),
        ("sh", "uptime", None),
        ("sh", "true", "osd.0"),
    ]
    assert [(t.name, t.run, t.role) for t in second.tasks] == [
        ("exec", "hostname", "client.0"),
        ("sh", "uptime", None),
    ]


@pytest.mark.parametrize(
    ("config", "params"),
    [
        ("", {}),
        ("{}", {}),
        ("{branch: main, flavor: default, debug: true, n: 3}", None),
        ("[client.0]", {"config": '["client.0"]'}),
        ("{conf: {osd: {a: 1}}}", {"config": '{"conf": {"osd": {"a": 1}}}'}),
        ("{branch: null}", {"config": '{"branch": null}'}),
        ("42", {"config": "42"}),
    ],
)
def test_named_tasks_carry_their_config_as_params(config, params):
    (recipe,) = parse(f"roles: [[a]]\ntasks:\n- install: {config}\n").recipe_sets[0].recipes
    (task,) = recipe.tasks
    assert (task.name, task.run, task.role) == ("install", None, None)
    expected = (
        params
        if params is not None
        else {"branch": "main", "flavor": "default", "debug": True, "n": 3}
    )
    assert task.params == expected


def test_description_wins_over_name_which_stays_in_metadata():
    spec = parse("roles: [[a]]\nname: run-1\ndescription: the test\n")
    assert spec.whiteboard == "the test"
    assert spec.metadata["name"] == "run-1"
    assert parse("roles: [[a]]\nname: run-1\n").whiteboard == "run-1"


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("sha1: abcdef1\nbranch: wip\n", None),
        (
            "repo: https://g/ceph.git\n",
            {"repo": "https://g/ceph.git", "branch": "main", "commit": None},
        ),
        (
            "repo: r\nbranch: wip\nsha1: abcdef1\n",
            {"repo": "r", "branch": "wip", "commit": "abcdef1"},
        ),
        (
            "repo: r\nbranch: wip\nsha1: abcdef1\nsuite_branch: qa\n",
            {"repo": "r", "branch": "qa", "commit": None},
        ),
        (
            "repo: r\nsha1: abcdef1\nsuite_repo: s\nsuite_branch: qa\nsuite_sha1: 1234567\n",
            {"repo": "s", "branch": "qa", "commit": "1234567"},
        ),
    ],
)
def test_workspace_ref(text, ref):
    spec = parse("roles: [[a]]\n" + text.replace("1234567", "'1234567'"))
    assert (spec.ref.model_dump() if spec.ref else None) == ref
    assert spec.metadata.get("sha1") == ("abcdef1" if "sha1:" in text else None)


def test_metadata_is_plain_json():
    spec = parse("roles: [[a]]\nscheduled: 2024-05-02\nodd: {1: one}\nteuthology_branch: main\n")
    assert spec.metadata == {
        "scheduled": "2024-05-02",
        "odd": {"1": "one"},
        "teuthology_branch": "main",
    }
    assert JobSpec.model_validate(spec.canonical()) == spec


# --- bad input -----------------------------------------------------------------

ALIAS_BOMB = "\n".join(
    [
        "a: &a [x, x, x, x, x, x, x, x, x, x]",
        *(f"{n}: &{n} [{', '.join(['*' + p] * 10)}]" for p, n in zip("abcd", "bcde", strict=True)),
        "roles: [[*e]]",
    ]
)

BAD = [
    # (document, line, words in the message)
    ("roles: mon.a\n", 1, ["'roles' must be a non-empty list of lists"]),
    ("owner: me\nroles: []\n", 2, ["'roles' must be a non-empty list"]),
    ("roles:\n- [mon.a]\n- mon.b\n", 3, ["each entry of 'roles'"]),
    ("roles:\n- [mon.a]\n- []\n", 3, ["each entry of 'roles'"]),
    ("roles:\n- [mon.a, 7]\n", 2, ["a role name must be text"]),
    ("roles:\n- [mon.a]\n- [mon.b, mon.b]\n", 3, ["'mon.b' is given twice on one machine"]),
    ("machine_type: smithi\n", 1, ["a fragment, not a whole job"]),
    ("- roles\n", 1, ["must be a mapping"]),
    ("roles: [[a]]\npriority: 0\n", 2, ["'priority' must be a whole number of at least 1"]),
    ("roles: [[a]]\npriority: -5\n", 2, ["'priority'", "at least 1"]),
    ("roles: [[a]]\npriority: 1.5\n", 2, ["'priority'", "whole number"]),
    ("roles: [[a]]\npriority: high\n", 2, ["'priority'", "whole number"]),
    ("roles: [[a]]\n\npriority: true\n", 3, ["'priority'"]),
    ("roles: [[a]]\nmax_job_time: 1h\n", 2, ["'max_job_time'"]),
    ("roles: [[a]]\nmax_job_time: 60\ntimeout: 60\n", 3, ["only one of"]),
    ("roles: [[a]]\nmachine_type: 'smithi,,mira'\n", 2, ["'machine_type'"]),
    ("roles: [[a]]\nmachine_type: [smithi]\n", 2, ["'machine_type'"]),
    ("roles: [[a]]\nowner: [me]\n", 2, ["'owner' must be text"]),
    ("roles: [[a]]\nrepo: r\nsha1: 0123456\n", 3, ["'sha1' must be text (quote it)"]),
    ("roles: [[a]]\nrepo: r\nsha1: 'XYZ'\n", 3, ["pattern"]),
    (ALIAS_BOMB, 5, ["alias bomb"]),
    ("roles: [[a]]\nroles: [[b]]\n", 2, ["duplicate key 'roles'"]),
    ("roles: [[a]\n", 2, ["malformed YAML"]),
    ("roles: [[a]]\ntasks: {install: null}\n", 2, ["'tasks' must be a list"]),
    (
        "roles: [[a]]\ntasks:\n- install:\n- ceph:\n  exec:\n",
        4,
        ["exactly one key", "2 keys"],
    ),
    ("roles: [[a]]\ntasks:\n- install\n", 3, ["exactly one key", "'install'"]),
    ("roles: [[a]]\ntasks:\n- exec: [true]\n", 3, ["'exec' takes a mapping"]),
    ("roles: [[a]]\ntasks:\n- exec:\n    client.9: [ls]\n", 4, ["'client.9' is not in 'roles'"]),
    ("roles: [[a]]\ntasks:\n- exec:\n    a: ls\n", 4, ["commands must be a list"]),
    ("roles: [[a]]\ntasks:\n- exec:\n    a:\n    - ls\n    - false\n", 6, ["quote it"]),
    ("roles: [[a]]\ntasks:\n- exec:\n    retry: 0\n    a: [ls]\n", 4, ["'retry'", "at least 1"]),
    (
        "roles: [[a]]\ntasks:\n- exec:\n    retry: 2\n    sleep_for_retry: -1\n    a: [ls]\n",
        5,
        ["'sleep_for_retry'", "at least 0"],
    ),
    ("roles: [[a]]\ntasks:\n- exec:\n    timeout: 0\n    a: [ls]\n", 4, ["'timeout'"]),
    ("roles: [[a]]\nwhen: .nan\n", 2, ["finite"]),
    ("roles: [[a]]\nblob: !!binary aGVsbG8=\n", 2, ["bytes values are not supported"]),
]


@pytest.mark.parametrize(("text", "line", "words"), BAD)
def test_bad_documents_name_file_line_and_problem(text, line, words):
    with pytest.raises(InputError) as caught:
        parse(text)
    error = caught.value
    assert (error.source, error.line) == ("job.yaml", line)
    message = str(error)
    assert message.startswith(f"job.yaml:{line}: ")
    assert "\n" not in message
    for word in words:
        assert word in message


def test_places_are_paths_in_the_teuthology_document():
    with pytest.raises(InputError) as caught:
        parse("roles: [[a]]\ntasks:\n- install:\n- exec:\n    a: [ls, 3]\n")
    assert caught.value.place == "tasks[1].exec.a[1]"
    assert caught.value.line == 5


def test_validation_errors_point_into_the_yaml():
    long_role = "r" * 300
    with pytest.raises(InputError) as caught:
        parse(f"roles:\n- [a]\n- [{long_role}]\n")
    assert caught.value.line == 3
    assert caught.value.place == "roles[1]"
    assert "at most 255 characters" in caught.value.problem


def test_errors_from_files_name_the_file():
    path = DATA / "two-key-task.yaml"
    with pytest.raises(InputError) as caught:
        load_job(path)
    assert str(caught.value).startswith(f"{path}:7: tasks[1]: ")


@pytest.mark.parametrize(
    ("written", "version"),
    [("8.10", "8.10"), ("9.0", "9.0"), ("22.04", "22.04"), ("'8.10'", "8.10"), ("9", "9")],
)
def test_an_unquoted_os_version_is_the_version_as_written(written, version):
    text = (
        "roles: [[mon.a, osd.0]]\nos_type: rhel\n"
        f"os_version: {written}\ntasks:\n- exec:\n    mon.a: ['true']\n"
    )
    (rs,) = parse(text).recipe_sets
    assert rs.recipes[0].metadata["distro_requires"] == {"os_type": "rhel", "os_version": version}
