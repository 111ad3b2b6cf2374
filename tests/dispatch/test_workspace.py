import pytest

from labq.dispatch.workspace import RefError, cached_checkout, checkout, resolve_ref

from .conftest import git, git_out


def test_resolve_ref_gives_the_branch_commit(task_repo):
    head = git_out("rev-parse", "HEAD", cwd=task_repo)
    assert resolve_ref(task_repo.as_uri(), "main") == head
    assert resolve_ref(str(task_repo), "refs/heads/main") == head


def test_resolve_ref_follows_annotated_tags(task_repo):
    head = git_out("rev-parse", "HEAD", cwd=task_repo)
    git("tag", "-a", "v1", "-m", "release", cwd=task_repo)
    assert resolve_ref(task_repo.as_uri(), "v1") == head


def test_a_missing_branch_is_a_clear_error(task_repo):
    with pytest.raises(RefError, match="branch 'nope' does not exist in file://"):
        resolve_ref(task_repo.as_uri(), "nope")


def test_a_missing_repository_is_a_clear_error(tmp_path):
    with pytest.raises(RefError, match=r"cannot read repository file://.*/missing"):
        resolve_ref((tmp_path / "missing").as_uri(), "main")


@pytest.mark.parametrize("repo", ["", "--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/x"])
def test_hostile_repositories_are_refused(repo, tmp_path):
    with pytest.raises(RefError):
        resolve_ref(repo, "main")


def test_checkout_fetches_exactly_the_pinned_commit_even_after_the_branch_moved(
    task_repo, tmp_path
):
    pinned = resolve_ref(task_repo.as_uri(), "main")
    (task_repo / "README").write_text("v2\n")
    git("commit", "-q", "-am", "v2", cwd=task_repo)
    assert resolve_ref(task_repo.as_uri(), "main") != pinned

    dest = tmp_path / "ws"
    checkout(task_repo.as_uri(), pinned, dest)
    assert (dest / "README").read_text() == "v1\n"
    assert git_out("rev-parse", "HEAD", cwd=dest) == pinned
    assert (dest / "tasks" / "install" / "run").stat().st_mode & 0o111


def test_checkout_of_an_unknown_commit_fails(task_repo, tmp_path):
    with pytest.raises(RefError, match="is not in"):
        checkout(task_repo.as_uri(), "0" * 40, tmp_path / "ws")


def test_checkout_expands_an_abbreviated_commit_id(task_repo, tmp_path):
    full = resolve_ref(task_repo.as_uri(), "main")
    assert checkout(task_repo.as_uri(), full[:9], tmp_path / "ws") == full
    assert cached_checkout(task_repo.as_uri(), full[:9], tmp_path / "refs").name == full


@pytest.mark.parametrize("commit", ["abc", "HEAD", "--help", "g" * 40])
def test_checkout_wants_a_commit_id(commit, task_repo, tmp_path):
    with pytest.raises(RefError, match="not a commit id"):
        checkout(task_repo.as_uri(), commit, tmp_path / "ws")


def test_cached_checkout_is_made_once(task_repo, tmp_path):
    commit = resolve_ref(task_repo.as_uri(), "main")
    first = cached_checkout(task_repo.as_uri(), commit, tmp_path / "refs")
    (first / "marker").write_text("kept")
    again = cached_checkout(task_repo.as_uri(), commit, tmp_path / "refs")
    assert again == first
    assert (again / "marker").read_text() == "kept"
    assert [p.name for p in (tmp_path / "refs").iterdir()] == [commit]
