import json

import pytest

from tests.acceptance.conftest import EXAMPLES


def test_help_lists_the_commands(labq):
    result = labq("--help")
    assert result.returncode == 0
    assert "validate" in result.stdout
    assert "init" in result.stdout


@pytest.mark.parametrize(
    ("name", "roles"),
    [
        ("smoke.yaml", ["server", "client"]),
        ("beaker.xml", None),
        ("teuthology.yaml", None),
    ],
)
def test_validate_prints_the_canonical_job(labq, name, roles):
    result = labq("validate", str(EXAMPLES / name))
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert job["recipe_sets"]
    assert all(rs["recipes"] for rs in job["recipe_sets"])
    if roles is not None:
        assert [r["role"] for r in job["recipe_sets"][0]["recipes"]] == roles


def test_validate_with_an_explicit_format_refuses_the_wrong_one(labq):
    result = labq("validate", "--format", "beaker", str(EXAMPLES / "smoke.yaml"))
    assert result.returncode != 0
    assert "smoke.yaml" in result.stderr
    assert "Traceback" not in result.stderr


BAD = {
    "priority.yaml": (
        "recipe_sets:\n  - priority: superhigh\n    recipes: [{}]\n",
        ":2:",
        "unknown priority",
    ),
    "empty-set.yaml": (
        "recipe_sets:\n  - priority: low\n    recipes: []\n",
        ":3:",
        "must not be empty",
    ),
    "operator.yaml": (
        "recipe_sets:\n  - recipes:\n      - host: {arch: {'=~': x}}\n",
        ":3:",
        "unknown operator",
    ),
    "malformed.yaml": ("recipe_sets: [\n", ":2:", "malformed YAML"),
    "malformed.xml": ("<job><recipeSet></job>", ":1:", "malformed XML"),
    "bomb.xml": (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
        ' <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">\n]>\n'
        "<job><whiteboard>&lol2;</whiteboard></job>\n",
        "bomb.xml:",
        "",
    ),
    "external.xml": (
        '<?xml version="1.0"?>\n<!DOCTYPE job [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n'
        "<job><whiteboard>&x;</whiteboard></job>\n",
        "external.xml:",
        "",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_line_on_stderr_without_traceback(labq, tmp_path, name):
    text, where, problem = BAD[name]
    path = tmp_path / name
    path.write_text(text)
    result = labq("validate", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert name in lines[0]
    assert where in lines[0]
    assert problem in lines[0]
    assert "root:" not in result.stderr  # an external entity was never read


def test_oversized_file_is_refused(labq, tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("whiteboard: '" + "x" * (2 * 1024 * 1024) + "'\n")
    result = labq("validate", str(path))
    assert result.returncode == 2
    assert "larger than the limit" in result.stderr


def test_missing_file(labq):
    result = labq("validate", "nowhere.yaml")
    assert result.returncode == 2
    assert result.stderr.strip() == "labq: nowhere.yaml: no such file"


def test_validate_holds_a_job_to_the_settings_limits(labq, tmp_path):
    job = tmp_path / "many.yaml"
    job.write_text(
        "recipe_sets:\n  - recipes:\n      - tasks:\n"
        + "".join(f"          - {{name: t{i}, run: 'true'}}\n" for i in range(4))
    )
    assert labq("validate", str(job)).returncode == 0
    settings = tmp_path / "labq.yaml"
    settings.write_text("limits:\n  tasks_per_recipe: 3\n")
    refused = labq("validate", "--config", str(settings), str(job))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        # the reading stops at the first task past the limit: the rest is never read
        f"labq: {job}:3: recipe_sets[0].recipes[0].tasks: 4 or more tasks is more than the"
        " limit of 3 (limits.tasks_per_recipe)"
    )
    from_env = labq("validate", str(job), env={"LABQ_CONFIG": str(settings)})
    assert from_env.returncode == 2
    assert "limits.tasks_per_recipe" in from_env.stderr
