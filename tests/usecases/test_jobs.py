"""The rules of the jobs' use cases, asserted without HTTP: what is refused, with what error
and words, and that a refusal stores nothing."""

from __future__ import annotations

import pytest

from labq.dispatch.workspace import RefError
from labq.domain import filters
from labq.domain.events import JobsCancelled, PriorityChanged
from labq.domain.job import JobSpec
from labq.domain.priority import Priority
from labq.errors import ConflictError, ForbiddenError, InputError, RequestError
from labq.formats.limits import Limits
from labq.store import Repository
from labq.store.selection import JobQuery
from labq.usecases.cancellation import cancel_job, cancel_jobs
from labq.usecases.priority import change_priority
from labq.usecases.runs import RunDocument, read_run, submit_run
from labq.usecases.selection import JobFilter
from labq.usecases.submission import pin_ref, submit_job
from tests.contract.conftest import at, job_spec

from .conftest import user

GROUP = "group: kernel-qe\n"


def _jobs(repo: Repository) -> int:
    return repo.jobs.count_found(JobQuery())


def test_a_member_submits_for_their_group(seeded: Repository) -> None:
    repo = seeded
    job_id = submit_job(repo, user(repo, "alice"), job_spec(group="kernel-qe"), "native", now=at(1))
    job = repo.jobs.load_job(job_id)
    assert (job.owner, job.group) == ("alice", "kernel-qe")


def test_a_non_member_may_not_submit_for_a_group(seeded: Repository) -> None:
    repo = seeded
    with pytest.raises(ForbiddenError) as refused:
        submit_job(repo, user(repo, "bob"), job_spec(group="kernel-qe"), "native", now=at(1))
    assert str(refused.value) == "'bob' is not a member of group 'kernel-qe'"
    assert refused.value.place == "group"
    assert _jobs(repo) == 0


def test_a_job_a_reject_rule_matches_is_refused(seeded: Repository) -> None:
    repo = seeded
    rule = repo.filters.add_filter(
        action="reject",
        actor="alice",
        now=at(0),
        predicates=[filters.parse_predicate("owner=bob")],
    )
    with pytest.raises(ConflictError) as refused:
        submit_job(repo, user(repo, "bob"), job_spec(), "native", now=at(1))
    assert str(refused.value) == f"the job is refused: rejected by {rule.describe()}"
    submit_job(repo, user(repo, "alice"), job_spec(), "native", now=at(1))  # not hers


def test_a_job_no_system_can_ever_run_is_refused_with_its_shortfall(seeded: Repository) -> None:
    repo = seeded
    huge = JobSpec.model_validate(
        {
            "recipe_sets": [
                {
                    "recipes": [
                        {
                            "host": {"memory_mb": {">=": 1_000_000}},
                            "tasks": [{"name": "t", "run": "true"}],
                        }
                    ]
                }
            ]
        }
    )
    with pytest.raises(InputError) as refused:
        submit_job(repo, user(repo, "alice"), huge, "native", now=at(1))
    assert refused.value.problem == (
        "can never run: memory_mb >= 1000000: no system has it (largest 8192)"
    )
    assert refused.value.place == "recipe_sets[0].recipes[0].host.memory_mb"


def test_a_ref_is_pinned_to_its_commit_and_an_unknown_one_refused() -> None:
    spec = job_spec(ref={"repo": "https://git.example/t.git", "branch": "main"})
    pinned = pin_ref(spec, lambda repo, branch: "c0ffee")
    assert pinned.ref is not None
    assert pinned.ref.commit == "c0ffee"

    def missing(repo: str, branch: str) -> str:
        raise RefError(f"no branch {branch!r} in {repo}")

    with pytest.raises(RequestError) as refused:
        pin_ref(spec, missing)
    assert str(refused.value) == "cannot pin ref: no branch 'main' in https://git.example/t.git"
    assert refused.value.place == "ref"


def test_only_the_owner_its_group_or_an_admin_cancels_a_job(seeded: Repository) -> None:
    repo = seeded
    job_id = submit_job(repo, user(repo, "alice"), job_spec(), "native", now=at(1))
    with pytest.raises(ForbiddenError, match="belongs to 'alice'; 'bob' may not change it"):
        cancel_job(repo, user(repo, "bob"), job_id, now=at(2))
    done = cancel_job(repo, user(repo, "alice"), job_id, now=at(2), reason="typo")
    assert (done.count, done.note, done.events) == (1, None, [JobsCancelled(job_id)])
    again = cancel_job(repo, user(repo, "alice"), job_id, now=at(3))
    assert (again.count, again.events) == (0, [])
    assert again.note == f"job {job_id} is already cancelled: nothing to cancel"


def test_raising_a_priority_needs_an_admin(seeded: Repository) -> None:
    repo = seeded
    job_id = submit_job(repo, user(repo, "alice"), job_spec(), "native", now=at(1))
    with pytest.raises(ForbiddenError) as refused:
        change_priority(repo, user(repo, "alice"), job_id, Priority.URGENT, now=at(2))
    assert str(refused.value) == f"raising job {job_id} from normal to urgent needs an admin"
    assert refused.value.place == "priority"
    done = change_priority(repo, user(repo, "alice"), job_id, Priority.LOW, now=at(2))
    assert done.events == [PriorityChanged(job_id)]
    assert len(done.sets) == 1


def test_a_bulk_cancel_changes_what_it_may_and_says_why_not_for_the_rest(
    seeded: Repository,
) -> None:
    repo = seeded
    alices = submit_job(repo, user(repo, "alice"), job_spec(), "native", now=at(1))
    bobs = submit_job(repo, user(repo, "bob"), job_spec(), "native", now=at(1))
    with pytest.raises(RequestError, match="give job ids or at least one filter"):
        cancel_jobs(repo, user(repo, "alice"), JobFilter(), now=at(2))
    dry = cancel_jobs(
        repo, user(repo, "alice"), JobFilter(ids=(alices, bobs)), now=at(2), dry_run=True
    )
    assert (dry.matched, [c.job_id for c in dry.changed], list(dry.events)) == (2, [alices], [])
    done = cancel_jobs(repo, user(repo, "alice"), JobFilter(ids=(alices, bobs)), now=at(2))
    assert [c.job_id for c in done.changed] == [alices]
    assert [r.job_id for r in done.refused] == [bobs]
    assert list(done.events) == [JobsCancelled(alices)]


def test_a_run_is_refused_by_its_document_named(seeded: Repository) -> None:
    repo = seeded
    native = "recipe_sets:\n- recipes:\n  - tasks:\n    - {name: t, run: 'true'}\n"
    documents = [RunDocument("ok.yaml", native), RunDocument("group.yaml", GROUP + native)]
    jobs = read_run(documents, limits=Limits(), resolve=lambda repo, branch: "c0ffee")
    with pytest.raises(ForbiddenError) as refused:
        submit_run(repo, user(repo, "bob"), "nightly", jobs, now=at(1), meta={})
    assert str(refused.value) == "group.yaml: 'bob' is not a member of group 'kernel-qe'"
    assert refused.value.place == "group"
    assert submit_run(repo, user(repo, "alice"), "nightly-2", jobs, now=at(1), meta={})
