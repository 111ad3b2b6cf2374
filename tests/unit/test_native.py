import json
from pathlib import Path

import pytest

from labq.domain import requirements
from labq.domain.job import JobSpec
from labq.domain.locks import LockDecl, LockKind
from labq.domain.model import System
from labq.domain.priority import Priority
from labq.errors import InputError
from labq.formats import source
from labq.formats.loader import detect_format, load_job, parse_job
from labq.formats.native import parse_native

EXAMPLES = Path(__file__).parents[2] / "src" / "labq" / "examples"


def test_bundled_example_reads_into_the_canonical_model():
    job = load_job(EXAMPLES / "smoke.yaml")
    (rs,) = job.recipe_sets
    assert rs.priority is Priority.HIGH
    assert rs.max_retries == 2
    assert rs.max_time == 1800
    assert rs.locks == {"network": LockDecl(LockKind.EXCLUSIVE, frozenset({"vlan-12"}))}
    server, client = rs.recipes
    assert [t.name for t in server.tasks] == ["setup", "serve"]
    assert server.tasks[1].params == {"PORT": 5201}
    fast = System(
        fqdn="a.lab1", lab="lab1", attributes={"memory_mb": 8192}, pools=frozenset({"perf"})
    )
    slow = System(
        fqdn="b.lab1", lab="lab1", attributes={"memory_mb": 2048}, pools=frozenset({"perf"})
    )
    assert requirements.matches(server.host, fast.facts())
    assert not requirements.matches(server.host, slow.facts())
    flaky = System(fqdn="flaky1.lab1", lab="lab1", attributes={"machine_type": "mira"})
    assert not requirements.matches(client.host, flaky.facts())


def test_canonical_form_round_trips_through_json():
    job = load_job(EXAMPLES / "smoke.yaml")
    again = JobSpec.model_validate(json.loads(json.dumps(job.canonical())))
    assert again == job
    assert parse_native(json.dumps(job.canonical()), source="x.json") == job


def test_defaults_are_spelled_out():
    job = parse_native("recipe_sets: [{recipes: [{}]}]", source="min.yaml")
    (rs,) = job.recipe_sets
    assert rs.priority is Priority.NORMAL
    assert rs.max_retries == 0
    assert rs.recipes[0].host == requirements.ANY_SYSTEM


BAD = [
    ("recipe_sets: [{recipes: [{}]}]\nbogus: 1\n", 2, "bogus", "unknown key 'bogus'"),
    ("recipe_sets:\n  - recipes: []\n", 2, "recipe_sets[0].recipes", "must not be empty"),
    (
        "recipe_sets:\n  - priority: asap\n    recipes: [{}]\n",
        2,
        "recipe_sets[0].priority",
        "unknown priority 'asap'",
    ),
    (
        "recipe_sets:\n  - recipes:\n      - host:\n          memory_mb: {'~=': 4}\n",
        4,
        "recipe_sets[0].recipes[0].host.memory_mb",
        "unknown operator '~='",
    ),
    (
        "recipe_sets:\n  - max_time: -5\n    recipes: [{}]\n",
        2,
        "recipe_sets[0].max_time",
        "greater than 0",
    ),
    (
        "recipe_sets:\n  - max_retries: lots\n    recipes: [{}]\n",
        2,
        "recipe_sets[0].max_retries",
        "integer",
    ),
    (
        "recipe_sets:\n  - locks: {disk: {shared: [a]}}\n    recipes: [{}]\n",
        2,
        "recipe_sets[0].locks.disk",
        "unknown lock level 'disk'",
    ),
    (
        "recipe_sets:\n  - locks: {network: {exclusive: []}}\n    recipes: [{}]\n",
        2,
        "recipe_sets[0].locks.network.exclusive",
        "list of resource names",
    ),
    ("recipe_sets: [{recipes: [{}]}]\nrecipe_sets: []\n", 2, "", "duplicate key 'recipe_sets'"),
    ("whiteboard: x\n", 1, "recipe_sets", "missing required key 'recipe_sets'"),
    ("- just\n- a list\n", 1, "", "must be a mapping"),
    ("recipe_sets: [{recipes: [{}]}\n", 2, "", "malformed YAML"),
    ("", None, "", "empty"),
    ("ref: {repo: r, commit: XYZ}\nrecipe_sets: [{recipes: [{}]}]\n", 1, "ref.commit", "pattern"),
]


@pytest.mark.parametrize(("text", "line", "place", "problem"), BAD)
def test_bad_documents_name_line_place_and_problem(text, line, place, problem):
    with pytest.raises(InputError) as caught:
        parse_native(text, source="job.yaml")
    error = caught.value
    assert error.source == "job.yaml"
    assert error.line == line
    assert error.place == place
    assert problem in error.problem
    assert "\n" not in str(error)


def test_json_errors_carry_the_line():
    with pytest.raises(InputError) as caught:
        parse_native(
            '{\n  "recipe_sets": [\n    {"recipes": [{"role": 5}]}\n  ]\n}', source="j.json"
        )
    assert caught.value.line == 3
    assert caught.value.place == "recipe_sets[0].recipes[0].role"


def test_duplicate_json_keys_are_refused():
    with pytest.raises(InputError, match="duplicate key 'group'"):
        parse_native('{"group": "a", "group": "b", "recipe_sets": []}', source="j.json")


def test_yaml_alias_bomb_is_refused_before_it_expands():
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghij"):
        prev = "abcdefghij"[i]
        refs = ", ".join([f"*{prev}"] * 10)
        bomb.append(f"{name}: &{name} [{refs}]")
    with pytest.raises(InputError, match="alias bomb"):
        parse_native("\n".join(bomb) + "\n", source="bomb.yaml")


def test_oversized_files_are_refused_unread(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("whiteboard: " + "x" * (source.MAX_DOCUMENT_BYTES + 10) + "\n")
    with pytest.raises(InputError, match="larger than the limit"):
        load_job(big)


def test_binary_files_are_refused(tmp_path):
    blob = tmp_path / "blob.yaml"
    blob.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(InputError, match="not UTF-8"):
        load_job(blob)


def test_missing_file_is_a_plain_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_job(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("<job><recipeSet/></job>", "beaker"),
        ("  <?xml version='1.0'?><job/>", "beaker"),
        ("roles:\n- [mon.a]\n", "teuthology"),
        ("machine_type: smithi\n", "teuthology"),
        ("recipe_sets: []\n", "native"),
        ('{"recipe_sets": []}', "native"),
    ],
)
def test_format_detection(text, fmt):
    assert detect_format(text) == fmt


def test_unknown_format_is_refused():
    with pytest.raises(InputError, match="unknown format"):
        parse_job("recipe_sets: []", source="x", fmt="cobol")  # type: ignore[arg-type]
