"""The job page's Clone button and Extend form: offered and allowed as the API allows."""

from __future__ import annotations

from labq.domain.states import RecipeState
from labq.store import reading, transaction
from tests.api.conftest import T0, Lab, submit
from tests.ui.test_pages import UI, csrf_of, log_in, message


def start(lab: Lab, job_id: int) -> int:
    """Start the job's set on s2.lab, as the scheduler would; its id."""
    with transaction(lab.engine) as repo:
        rset = repo.jobs.load_job(job_id).sets[0]
        recipe = rset.recipes[0].id
        repo.moves.move_recipe(recipe, RecipeState.QUEUED, now=T0)
        repo.moves.move_recipe(recipe, RecipeState.SCHEDULED, now=T0, system="s2.lab")
        repo.supervisors.start_recipe_set(rset.id, lab="lab1", now=T0, claim="c" * 32)
    return rset.id


def test_anyone_may_clone_from_the_page_and_the_clone_links_back(lab: Lab) -> None:
    original = submit(lab, "alice", whiteboard="nightly")
    log_in(lab, "bob")
    assert 'id="clone-form"' in lab.client.get(f"{UI}/jobs/{original}").text
    answer = lab.client.post(
        f"{UI}/jobs/{original}/clone", data={"csrf": csrf_of(lab)}, follow_redirects=False
    )
    assert answer.status_code == 303
    clone = original + 1
    assert answer.headers["location"] == f"/ui/jobs/{clone}?note=cloned"
    page = lab.client.get(answer.headers["location"])
    assert (
        f'<dt>Cloned from</dt><dd><a href="/ui/jobs/{original}">J:{original}</a></dd>' in page.text
    )
    with reading(lab.engine) as repo:
        assert repo.jobs.load_job(clone).owner == "bob"
    assert "Cloned from" not in lab.client.get(f"{UI}/jobs/{original}").text


def test_a_refused_clone_says_why_on_the_page(lab: Lab) -> None:
    grouped = submit(lab, "alice", group="kernel-qe")
    log_in(lab, "bob")
    answer = lab.client.post(f"{UI}/jobs/{grouped}/clone", data={"csrf": csrf_of(lab)})
    assert answer.status_code == 403
    assert message(answer) == "'bob' is not a member of group 'kernel-qe'"


def test_extend_is_offered_and_allowed_exactly_where_the_api_allows_it(lab: Lab) -> None:
    job = submit(lab, "alice", group="kernel-qe")
    log_in(lab, "alice")
    assert 'id="extend-form"' not in lab.client.get(f"{UI}/jobs/{job}").text  # not running
    timed = submit(
        lab,
        "alice",
        group="kernel-qe",
        recipe_sets=[{"max_time": 600, "recipes": [{"tasks": [{"name": "t", "run": "true"}]}]}],
    )
    set_id = start(lab, timed)
    assert 'id="extend-form"' in lab.client.get(f"{UI}/jobs/{timed}").text
    lab.client.cookies.clear()
    log_in(lab, "bob")
    assert 'id="extend-form"' not in lab.client.get(f"{UI}/jobs/{timed}").text
    refused = lab.client.post(
        f"{UI}/jobs/{timed}/extend", data={"csrf": csrf_of(lab), "minutes": "30"}
    )
    assert refused.status_code == 403
    assert "'bob' may not change it" in message(refused)
    lab.client.cookies.clear()
    log_in(lab, "carol")  # in the job's group
    answer = lab.client.post(
        f"{UI}/jobs/{timed}/extend",
        data={"csrf": csrf_of(lab), "minutes": "30"},
        follow_redirects=False,
    )
    assert answer.headers["location"] == f"/ui/jobs/{timed}?note=extended"
    with reading(lab.engine) as repo:
        assert repo.extensions.current_max_time(set_id) == 600 + 1800
    assert "max time 40\xa0min (extended by 30\xa0min)" in lab.client.get(f"{UI}/jobs/{timed}").text
