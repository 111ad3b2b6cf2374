"""One rule for sets that cannot run (docs/scheduling.md, "Sets that cannot run").

No system can *ever* run the set (none matches, none its group may use, no lab
has enough, every match removed): refused at submission, 422, nothing stored.
Its systems are only away for now (broken, manual) or busy: it waits, the queue
says why, and the consistency pass leaves it alone until they are removed.
"""

from __future__ import annotations

from typing import Any

import pytest

from labq.domain.states import RecipeState
from labq.service.inbox import ConsistencyDue

from .test_admission import QUICK, Live, LiveFactory, make_live  # noqa: F401 - a fixture

HOST_S3 = {"fqdn": "s3.lab"}


@pytest.fixture
def live(make_live: LiveFactory) -> Live:  # noqa: F811 - the fixture is used by name
    return make_live()


def one_set(*hosts: dict[str, Any]) -> dict[str, Any]:
    return {"recipes": [{"host": host, "tasks": QUICK} for host in hosts]}


def job_count(live: Live) -> int:
    total: int = live.get("/jobs", who="root")["total"]
    return total


def condition(live: Live, fqdn: str, value: str) -> None:
    answer = live.post(f"/systems/{fqdn}/condition", {"condition": value, "reason": "test"})
    assert answer.status_code == 200, answer.text


REFUSED = {
    "nothing matches": (
        "alice",
        [one_set({"arch": "s390x"})],
        "recipe_sets[0].recipes[0].host.arch",
        "arch = s390x: no system has it (they have x86_64)",
    ),
    "only in a pool the group may not use": (
        "bob",
        [one_set({"pool": "perf"})],
        "recipe_sets[0].recipes[0]",
        "every matching system is in a pool group 'everybody' may not use: s1.lab",
    ),
    "no lab has enough": (
        "alice",
        [one_set(*[{"lab": "lab2"}] * 3)],
        "recipe_sets[0]",
        "no single lab has a system for each of its 3 recipes at once",
    ),
    "every match removed": (
        "alice",
        [one_set({}), one_set({}, HOST_S3)],
        "recipe_sets[1].recipes[1]",
        "every matching system is removed: s3.lab",
    ),
}


@pytest.mark.parametrize(("who", "sets", "place", "why"), REFUSED.values(), ids=REFUSED.keys())
def test_a_set_no_system_can_ever_run_is_refused_and_nothing_is_stored(
    live: Live, who: str, sets: list[dict[str, Any]], place: str, why: str
) -> None:
    condition(live, "s3.lab", "removed")
    before = job_count(live)
    answer = live.post("/jobs", {"recipe_sets": sets}, who=who)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["place"] == place
    assert error["line"] == 1  # the JSON body is one line
    assert error["message"] == f"job:1: {place}: can never run: {why}"
    assert job_count(live) == before
    assert live.get("/queue")["queue"] == []


def test_a_set_whose_systems_are_away_waits_says_why_and_runs_when_one_is_back(
    live: Live,
) -> None:
    condition(live, "s3.lab", "broken")
    condition(live, "s4.lab", "manual")
    broken = live.submit(recipe_sets=[one_set(HOST_S3)])
    away = live.submit(recipe_sets=[one_set({"or": [HOST_S3, {"fqdn": "s4.lab"}]})])
    waits = {row["job_id"]: row["waits_for"] for row in live.get("/queue")["queue"]}
    assert waits == {
        broken: "every matching system is broken: s3.lab",
        away: "every matching system is broken or manual: s3.lab (broken), s4.lab (manual)",
    }
    live.service.post(ConsistencyDue())  # broken and manual systems may come back: no abort
    live.service.drain()
    assert [live.job(j)["state"] for j in (broken, away)] == ["queued", "queued"]
    condition(live, "s3.lab", "automated")
    assert live.started(broken)
    (row,) = live.get("/queue")["queue"]  # s3 is busy now: that is only its turn
    assert (row["job_id"], row["waits_for"]) == (away, None)


def test_a_waiting_set_whose_systems_are_removed_is_ended_by_the_consistency_pass(
    live: Live,
) -> None:
    condition(live, "s3.lab", "broken")
    job_id = live.submit(recipe_sets=[one_set(HOST_S3)])
    condition(live, "s3.lab", "removed")
    live.service.post(ConsistencyDue())
    live.service.drain()
    shown = live.job(job_id)
    assert shown["state"] == RecipeState.ABORTED.value
    assert "every matching system is removed: s3.lab (removed)" in shown["sets"][0]["error"]


# --- teuthology targets (issue 12, item 6) -------------------------------------------------

TARGETED = """\
roles:
- [mon.a, osd.0]
- [client.0]
targets:
  ubuntu@s2.lab: ssh-rsa AAA2
  ubuntu@{second}: ssh-rsa AAA3
tasks:
- exec:
    client.0: [hostname]
"""


def submit_yaml(live: Live, text: str) -> Any:
    answer = live.client.post(
        "/api/v1/jobs",
        content=text.encode(),
        headers={**live.auth("alice"), "Content-Type": "application/yaml"},
    )
    live.service.drain()
    return answer


def test_teuthology_targets_take_exactly_their_systems(live: Live) -> None:
    answer = submit_yaml(live, TARGETED.format(second="s3.lab"))
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    assert live.started(job_id)
    (recipe_set,) = live.job(job_id)["sets"]
    assert [r["system"] for r in recipe_set["recipes"]] == ["s2.lab", "s3.lab"]


def test_an_unknown_teuthology_target_is_refused_at_submission_by_name(live: Live) -> None:
    before = job_count(live)
    answer = submit_yaml(live, TARGETED.format(second="smithi999.front.sepia.ceph.com"))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["place"] == "targets.ubuntu@smithi999.front.sepia.ceph.com"
    assert error["line"] == 6
    assert error["message"].startswith(f"job:6: {error['place']}: can never run: ")
    assert "'smithi999.front.sepia.ceph.com', which is not a system labq knows" in error["message"]
    assert job_count(live) == before


# --- refusals that name the field, its line and what systems have (issue 22) --------------

NAMED = {
    "a misspelt property": (
        "      host:\n        arch: x86_64\n        memroy_mb: {'>=': 4096}\n",
        7,
        "recipe_sets[0].recipes[0].host.memroy_mb",
        "memroy_mb: no system records this property; did you mean memory_mb?"
        " (systems record memory_mb besides the built-in ones)",
    ),
    "a system that does not exist": (
        "      host: {fqdn: s9.lab1}\n",
        5,
        "recipe_sets[0].recipes[0].host.fqdn",
        "fqdn = s9.lab1: no such system",
    ),
    "more memory than any system has": (
        "      host:\n        memory_mb:\n          '>=': 999999\n",
        6,
        "recipe_sets[0].recipes[0].host.memory_mb",
        "memory_mb >= 999999: no system has it (largest 8192)",
    ),
    "terms that hold apart but never together": (
        "      host:\n        lab: lab2\n        memory_mb: {'>=': 1024}\n",
        6,
        "recipe_sets[0].recipes[0].host.lab",
        "memory_mb >= 1024 holds on 1 of 6 systems; of those, lab = lab2: none of them has it"
        " (they have lab1)",
    ),
}
NATIVE_HEAD = (
    "whiteboard: named\nrecipe_sets:\n  - recipes:\n    - tasks: [{name: t, run: 'true'}]\n"
)


@pytest.mark.parametrize(("host", "line", "place", "why"), NAMED.values(), ids=NAMED.keys())
def test_a_refusal_names_the_line_the_field_and_what_the_systems_have(
    live: Live, host: str, line: int, place: str, why: str
) -> None:
    before = job_count(live)
    answer = submit_yaml(live, NATIVE_HEAD + host)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["line"], error["place"]) == (line, place)
    assert error["message"] == f"job:{line}: {place}: can never run: {why}"
    assert job_count(live) == before


BEAKER_MISSING = """\
<job>
  <recipeSet>
    <recipe>
      <hostRequires>
        <hostname op="=" value="s9.lab1"/>
      </hostRequires>
      <task name="/distribution/check-install"/>
    </recipe>
  </recipeSet>
</job>
"""


def test_a_beaker_refusal_names_the_line_and_place_of_its_host_requirements(live: Live) -> None:
    answer = live.client.post(
        "/api/v1/jobs",
        content=BEAKER_MISSING.encode(),
        headers={**live.auth("alice"), "Content-Type": "application/xml"},
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["line"], error["place"]) == (4, "/job/recipeSet/recipe/hostRequires")
    assert error["message"].endswith("can never run: fqdn = s9.lab1: no such system")


def test_a_run_refusal_names_the_document_and_its_line(live: Live) -> None:
    document = NATIVE_HEAD + "      host: {memroy_mb: 4096}\n"
    body = {"name": "r1", "jobs": [{"name": "nightly/a.yaml", "document": document}]}
    answer = live.post("/runs", body, who="alice")
    assert answer.status_code == 422, answer.text
    message = answer.json()["error"]["message"]
    assert message.startswith("nightly/a.yaml:5: recipe_sets[0].recipes[0].host.memroy_mb: ")
    assert "did you mean memory_mb?" in message
